"""The K21 analyses' host statistics: the ``k21_tokens`` rows of a pass and the ``k21_freq`` table,
built from whole arrays instead of per-token Python lists (pure numpy/pandas, no torch).

`TokenRows` keeps each (sequence, layer)'s five ratios as one float32 ``(5, n)`` block and builds the
frame once: blocks ordered by (seq, layer) (rows only when a (seq, layer) repeats), tokens and
categories taken from one array per sequence. `frequency_table` averages each token over the layers
with the float32 compensated (Kahan) sum pandas' ``groupby().mean()`` runs, one layer at a time over
every token of the set, and looks the ranks up once per distinct token id.

Both give the tables the previous per-token code gave, to the last bit: same values, dtypes, column
order and row order (`tests/reference/k21_host_stats.py` keeps that code; the unit tests compare bit
for bit, ``python -m tests.tools.bench_stats --k21-pass N`` times both). Pitfall: `frequency_table`
takes the fast path only for a table laid out as `TokenRows` writes it (each sequence's layers
contiguous, the same tokens at every layer, one model and dataset); any other table goes through the
previous pandas code, which is exact by definition.
"""
from __future__ import annotations

from itertools import chain
from typing import Sequence

import numpy as np
import pandas as pd

from report_builder.schema import K21_METHODS

_KEYS = ["model", "dataset", "seq", "pos", "token", "category"]
_COLS = ("seq", "layer", "pos", "token", "category", *K21_METHODS)
_PERCENT = np.float32(100.0)


class TokenRows:
    """``k21_tokens`` rows of one pass, accumulated per (sequence, layer) in any order.

    ``add(e, layer, block)``: ``block`` is the ``(5, n)`` float32 array of the five methods' ratios
    (fractions, `schema.K21_METHODS` order) for the ``n`` tokens of ``e`` (an `EncodedSeq`). A subclass
    may keep blocks of another kind (`k21_compute.TensorRows`: the engine's tensors) by overriding
    `stack`, which joins them into one ``(5, rows)`` float32 array at the end.
    """

    def __init__(self) -> None:
        self._added: list[tuple] = []  # (seq, layer, e, block)

    def stack(self, blocks: list, total: int) -> np.ndarray:
        """The blocks side by side as one writable ``(5, total)`` float32 array (fractions)."""
        out = np.concatenate(blocks, axis=1).astype(np.float32)
        if out.shape != (len(K21_METHODS), total):
            raise ValueError(f"ratios of shape {out.shape} for {total} tokens and {len(K21_METHODS)} methods")
        return out

    def add(self, e, layer: int, block) -> None:
        self._added.append((e.seq, layer, e, block))

    @property
    def layers(self) -> set[int]:
        """The layers added."""
        return {a[1] for a in self._added}

    def frame(self, model: str, dataset: str) -> pd.DataFrame:
        """The ``k21_tokens`` frame, sorted by (seq, layer, pos), ratios in percent (float32)."""
        added = self._added
        if not added:
            return _frame_from_lists({k: [] for k in _COLS}, model, dataset)
        seqs = np.fromiter((a[0] for a in added), dtype=np.int64, count=len(added))
        layers = np.fromiter((a[1] for a in added), dtype=np.int64, count=len(added))
        order = np.lexsort((layers, seqs))  # stable, as the rows' mergesort
        ks, kl = seqs[order], layers[order]
        repeated = bool(np.any((ks[1:] == ks[:-1]) & (kl[1:] == kl[:-1])))
        if repeated:  # a (seq, layer) twice: rows interleave by pos, so sort rows (stable, as before)
            order = np.arange(len(added))
        encs = [added[b][2] for b in order]
        n_of = np.fromiter(map(len, encs), dtype=np.int64, count=len(encs))
        total = int(n_of.sum())
        starts = np.cumsum(n_of) - n_of
        pos = np.arange(total, dtype=np.int64) - np.repeat(starts, n_of)
        values = self.stack([added[b][3] for b in order], total)
        values *= _PERCENT  # float32, as 100.0 * each layer's array
        # tokens and categories: one array per distinct sequence, taken for every (layer, pos)
        first: dict[int, int] = {}
        uniq: list = []
        base = np.empty(len(encs), dtype=np.int64)
        at = 0
        for k, e in enumerate(encs):
            o = first.get(id(e))
            if o is None:
                o = first[id(e)] = at
                uniq.append(e)
                at += len(e)
            base[k] = o
        take = np.repeat(base, n_of) + pos
        tokens = _strings(list(chain.from_iterable(e.tokens for e in uniq))).take(take)
        cats = _strings(list(chain.from_iterable(e.category for e in uniq))).take(take)
        cols = {"model": _constant(model, total), "dataset": _constant(dataset, total),
                "seq": np.repeat(ks if not repeated else seqs, n_of),
                "layer": np.repeat(kl if not repeated else layers, n_of), "pos": pos, "token": tokens,
                "category": cats}
        for i, m in enumerate(K21_METHODS):
            cols[m] = values[i]
        df = pd.DataFrame(cols)
        if repeated:
            rows = np.lexsort((cols["pos"], cols["layer"], cols["seq"]))
            df = df.take(rows).reset_index(drop=True)
        return df


_STR = pd.Series(["-"]).dtype
"""The dtype pandas gives a column of Python strings (`str`, pyarrow-backed, under pandas 3)."""
_ARROW_STR = isinstance(_STR, pd.StringDtype) and _STR.storage == "pyarrow"


def _strings(values: list):
    """``values`` as the pandas array a DataFrame column of that list would hold (pyarrow builds it
    directly when every value is a string)."""
    if _ARROW_STR and all(type(v) is str for v in values):
        import pyarrow as pa

        return pd.array(pa.array(values, type=pa.large_string()), dtype=_STR)
    return pd.Series(values).array


def _constant(value, n: int):
    """``value`` repeated ``n`` times as `DataFrame.insert` of the scalar would hold it."""
    if _ARROW_STR and type(value) is str:
        import pyarrow as pa

        return pd.array(pa.repeat(pa.scalar(value, pa.large_string()), n), dtype=_STR)
    return pd.Series([value]).array.take(np.zeros(n, dtype=np.intp))


def _frame_from_lists(cols: dict[str, list], model: str, dataset: str) -> pd.DataFrame:
    """The frame as the per-token code built it (for no rows, where list dtypes are what they are)."""
    df = pd.DataFrame(cols)
    df.insert(0, "dataset", dataset)
    df.insert(0, "model", model)
    df = df.sort_values(["seq", "layer", "pos"], kind="mergesort").reset_index(drop=True)
    df[list(K21_METHODS)] = df[list(K21_METHODS)].astype("float32")
    return df


def frequency_table(tokens_df: pd.DataFrame, encoded: Sequence, ranks: dict[int, int]) -> pd.DataFrame:
    """``k21_freq``: layer-averaged ratios per token occurrence with its frequency rank (unmasked inputs).

    Groups by (model, dataset, seq, pos, token, category) in order of appearance, as pandas'
    ``groupby(sort=False).mean()`` does; ``freq_rank`` is ``ranks`` of the token's id, the largest rank
    for an id it lacks.
    """
    lay = _layout(tokens_df)
    ids = _ids_by_seq(encoded) if lay is not None else None
    if lay is None or ids is None:
        return _frequency_pandas(tokens_df, encoded, ranks)
    seq_first, n_of, n_layers = lay
    g_pos = np.arange(int(n_of.sum()), dtype=np.int64) - np.repeat(np.cumsum(n_of) - n_of, n_of)
    row0 = np.repeat(seq_first, n_of) + g_pos  # each group's first row (its layer-0 row)
    step = np.repeat(n_of, n_of)  # rows between a group's layers
    token_ids = []
    for s, n in zip(tokens_df["seq"].to_numpy()[seq_first].tolist(), n_of.tolist()):
        got = ids.get(s)
        if got is None or len(got) < n:
            return _frequency_pandas(tokens_df, encoded, ranks)  # raises as the pandas code does
        token_ids.append(got[:n])
    cols = {k: tokens_df[k].array.take(row0) for k in _KEYS}
    worst = max(ranks.values()) if ranks else 1
    uniq, inv = np.unique(np.fromiter(chain.from_iterable(token_ids), dtype=np.int64, count=len(row0)),
                          return_inverse=True)
    lut = np.array([int(ranks.get(u, worst)) for u in uniq.tolist()], dtype=np.int64)
    cols["freq_rank"] = lut[inv.reshape(-1)]
    means = _layer_means([tokens_df[m].to_numpy() for m in K21_METHODS], row0, step, n_layers)
    for i, m in enumerate(K21_METHODS):
        cols[m] = means[i]
    return pd.DataFrame(cols)


def _layer_means(cols: list[np.ndarray], row0: np.ndarray, step: np.ndarray, n_layers: int) -> np.ndarray:
    """Means over layers of each column's ``col[row0 + l * step]``, l = 0..n_layers-1, skipping NaN, by
    the compensated sum of pandas' ``group_mean`` in the columns' own dtype: ``y = v - c; t = s + y;
    c = (t - s) - y`` (a NaN compensation reset to 0), ``s = t``; then ``s / count`` (NaN for none)."""
    dt = cols[0].dtype.type
    s = np.zeros((len(cols), len(row0)), dtype=cols[0].dtype)
    c = np.zeros_like(s)

    def layer(k: int) -> np.ndarray:
        idx = row0 + k * step
        return np.stack([col[idx] for col in cols])

    with np.errstate(invalid="ignore", over="ignore"):
        top = float(np.finfo(dt).max) / 4 / (n_layers + 1)
        finite = all(col.size == 0 or (np.isfinite(col).all() and float(np.abs(col).max()) < top) for col in cols)
        if finite:  # no NaN, no infinity, no overflow: every value counts and no compensation is NaN
            for k in range(n_layers):
                y = layer(k)
                y -= c
                t = s + y
                np.subtract(t, s, out=c)
                c -= y
                s = t
            return s / dt(n_layers)
        nobs = np.zeros(s.shape, dtype=np.int64)
        for k in range(n_layers):
            v = layer(k)
            ok = ~np.isnan(v)
            y = v - c
            t = s + y
            c_new = t - s - y
            c_new[np.isnan(c_new)] = 0  # an infinity makes the compensation NaN; pandas resets it (GH#50367)
            c = np.where(ok, c_new, c)
            s = np.where(ok, t, s)
            nobs += ok
        with np.errstate(divide="ignore"):
            mean = s / nobs.astype(s.dtype)
    mean[nobs == 0] = dt(np.nan)
    return mean


def _layout(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(first row, tokens, layers) per sequence when ``df`` is laid out as `TokenRows` writes it:
    every sequence's rows contiguous, ``layers`` blocks of pos 0..n-1 with the same tokens and
    categories, sequences distinct, one model and dataset, float method columns; else None."""
    if len(df) == 0 or any(c not in df.columns for c in (*_KEYS, "layer", *K21_METHODS)):
        return None
    dtypes = dict(zip(df.columns, df.dtypes))
    floats = {dtypes[m] for m in K21_METHODS}
    if len(floats) != 1 or floats.pop() not in (np.float32, np.float64):
        return None
    if any(dtypes[c].kind not in "iu" for c in ("seq", "layer", "pos")):
        return None
    for c in ("model", "dataset"):
        col = df[c].array
        if not bool(np.asarray(col == col[0], dtype=bool).all()):
            return None
    seq, layer, pos = (df[c].to_numpy() for c in ("seq", "layer", "pos"))
    r = len(df)
    new_block = np.ones(r, dtype=bool)
    new_block[1:] = (seq[1:] != seq[:-1]) | (layer[1:] != layer[:-1])
    b_start = np.flatnonzero(new_block)
    b_len = np.diff(np.append(b_start, r))
    if not np.array_equal(pos, np.arange(r) - np.repeat(b_start, b_len)):
        return None
    new_seq = np.ones(len(b_start), dtype=bool)
    new_seq[1:] = seq[b_start[1:]] != seq[b_start[:-1]]
    s_block = np.flatnonzero(new_seq)  # each sequence's first block
    per_seq = np.diff(np.append(s_block, len(b_start)))
    if len(np.unique(seq[b_start[s_block]])) != len(s_block) or np.any(per_seq != per_seq[0]):
        return None
    n_of = b_len[s_block]
    if np.any(b_len != np.repeat(n_of, per_seq)):
        return None
    seq_first = b_start[s_block]
    offset = np.arange(r) - np.repeat(seq_first, n_of * per_seq)  # row within its sequence
    same = np.repeat(seq_first, n_of * per_seq) + offset % np.repeat(n_of, n_of * per_seq)
    for c in ("token", "category"):
        col = df[c].array
        ok = col == col.take(same) if per_seq[0] > 1 else ~pd.isna(col)  # NaN keys: pandas drops the group
        if not bool(np.asarray(ok, dtype=bool).all()):
            return None
    return seq_first, n_of, int(per_seq[0])


def _ids_by_seq(encoded: Sequence) -> dict[int, list[int]] | None:
    """Token ids by sequence index; None when two sequences share an index."""
    out: dict[int, list[int]] = {}
    for e in encoded:
        if e.seq in out:
            return None
        out[e.seq] = e.input_ids
    return out


def _frequency_pandas(tokens_df: pd.DataFrame, encoded: Sequence, ranks: dict[int, int]) -> pd.DataFrame:
    """`frequency_table` by pandas' groupby for a table of any layout (the previous code)."""
    df = tokens_df.groupby(_KEYS, sort=False)[list(K21_METHODS)].mean().reset_index()
    worst = max(ranks.values()) if ranks else 1
    id_of = {(e.seq, p): tid for e in encoded for p, tid in enumerate(e.input_ids)}
    df.insert(6, "freq_rank", [int(ranks.get(id_of[(s, p)], worst)) for s, p in zip(df["seq"], df["pos"])])
    return df
