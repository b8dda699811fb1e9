"""The K24 pass's host statistics as they were before issue #16, frozen: the unit tests' bit-for-bit
reference and the timing baseline of ``python -m tests.tools.bench_stats``.

`NaiveHostStats` is the code `k24_compute.scope_partials` ran per sequence and layer before the
rewrite, kept verbatim as the baseline: every scope pair ranked both of its maps (a stable mergesort
per map, twice per scope and per pair it is in), and every layer recomputed the sequence's pair
categories as an ``(n, n)`` array of strings and counted them with ``np.unique``. The current code
(`stats.host_stats.HostStats`) ranks each scope once with the fast unstable sort (exact average ranks
whatever order ties come in), computes categories once per sequence as int codes, and skips
top-pair candidates under the running k-th value. `tables_identical` compares two sets of tables to
the last bit.

Pure numpy/pandas (no torch). Pitfall: only what the rewrite replaced is frozen here; the rest (masks,
word ids, name spans, snippets, `TopPairs`) is read from today's `k24_stats`, so a change there
moves both sides alike and only a test against fixed numbers catches it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder import schema
from report_builder.stats.context_snippet import context_snippet
from report_builder.stats.maps import row_normalise, valid_pairs_mask
from report_builder.stats.pair_categories import (CATEGORY_ORDER, _token_name_ids, find_name_spans, infer_word_ids,
                                                  is_punctuation, strip_marker)
from report_builder.stats.top_pairs import PAYLOAD, SeqInfo, TopPairs


def old_rank(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    first = np.r_[True, xs[1:] != xs[:-1]]
    dense = np.cumsum(first)
    bounds = np.r_[np.nonzero(first)[0], x.size]
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = 0.5 * (bounds[dense] + bounds[dense - 1] + 1)
    return ranks


def old_spearman(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 2:
        return float("nan")
    rx = old_rank(x)
    ry = old_rank(y)
    rx = rx - rx.mean()
    ry = ry - ry.mean()
    den = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    if den == 0 or not np.isfinite(den):
        return float("nan")
    return float((rx * ry).sum() / den)


def old_ctx_change(map_s: np.ndarray, map_t: np.ndarray, causal: bool, mask: np.ndarray | None = None) -> float:
    """`stats.ctx_change.ctx_change` before the rewrite."""
    a = np.asarray(map_s, dtype=np.float64)
    b = np.asarray(map_t, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"maps must be equal (n, n) arrays, got {a.shape} and {b.shape}")
    m = valid_pairs_mask(a.shape[0], causal)
    if mask is not None:
        m = m & np.asarray(mask, dtype=bool)
    rho = old_spearman(a[m], b[m])
    if np.isnan(rho):
        return float("nan")
    return float(np.clip(1.0 - rho, 0.0, 2.0))


def old_sequence_ctx_changes(maps: dict[str, np.ndarray], ln_position: str, causal: bool) -> list[dict]:
    """`stats.ctx_change.sequence_ctx_changes` before the rewrite."""
    lay = schema.layout(ln_position)
    rows = []
    for k, comp in enumerate(lay.components):
        s, t = lay.scopes[k], lay.scopes[k + 1]
        rows.append(dict(kind="component", component=comp, from_scope=s, to_scope=t,
                         change=old_ctx_change(maps[s], maps[t], causal)))
    for s, t in lay.cumulative():
        rows.append(dict(kind="cumulative", component=f"{s}→{t}", from_scope=s, to_scope=t,
                         change=old_ctx_change(maps[s], maps[t], causal)))
    return rows


def old_pair_categories(tokens, word_ids, offsets, text: str, special, names=None) -> np.ndarray:
    """`stats.pair_categories.pair_categories` before the rewrite (string comparisons, ``np.select`` on names)."""
    n = len(tokens)
    sp = np.asarray(special, dtype=bool).reshape(n)
    if word_ids is None:
        word_ids = infer_word_ids(tokens, sp)
    wid = np.array([(-1 - k) if (w is None or sp[k]) else int(w) for k, w in enumerate(word_ids)])
    if offsets is not None:
        if names is None:
            names = find_name_spans(text)
        nid = _token_name_ids(offsets, text, sp, names)
    else:
        nid = -np.arange(1, n + 1)
    stripped = np.array([strip_marker(t) for t in tokens], dtype=object)
    punct = np.array([is_punctuation(t) for t in tokens], dtype=bool)
    idx = np.arange(n)
    conds = [
        sp[:, None] | sp[None, :],
        wid[:, None] == wid[None, :],
        (nid[:, None] == nid[None, :]) & (nid[:, None] >= 0),
        np.abs(idx[:, None] - idx[None, :]) == 1,
        stripped[:, None] == stripped[None, :],
        punct[:, None] | punct[None, :],
    ]
    return np.select(conds, list(CATEGORY_ORDER[:-1]), default=CATEGORY_ORDER[-1]).astype(object)


def old_top_add(tp: TopPairs, seq: int, amp: np.ndarray, info: SeqInfo, before=None, after=None) -> None:
    """`stats.top_pairs.TopPairs.add` before the rewrite (categories and their counts redone every layer)."""
    amp = np.asarray(amp, dtype=np.float64)
    n = amp.shape[0]
    valid = valid_pairs_mask(n, tp.causal) & ~np.eye(n, dtype=bool)
    cats = old_pair_categories(info.tokens, info.word_ids, info.offsets, info.text, info.special)
    vc = cats[valid]
    u, c = np.unique(vc.astype(str), return_counts=True)
    for cat, cnt in zip(u, c):
        tp.base_counts[cat] = tp.base_counts.get(cat, 0) + int(cnt)
    ii, jj = np.nonzero(valid)
    vals = amp[ii, jj]
    if vals.size == 0:
        return
    kk = min(tp.k, vals.size)
    cand = np.argpartition(-vals, kk - 1)[:kk]
    for q in cand:
        i, j, v = int(ii[q]), int(jj[q]), float(vals[q])
        tp._offer((v, -seq, -i, -j), lambda i=i, j=j, v=v: dict(
            seq=int(seq), i=i, j=j, token_i=str(info.tokens[i]), token_j=str(info.tokens[j]), amp=v,
            before=float(before[i, j]) if before is not None else float("nan"),
            after=float(after[i, j]) if after is not None else float("nan"),
            category=str(cats[i, j]),
            context=context_snippet(info.text, info.offsets, i, j, tp.width, info.tokens)
            if info.offsets is not None else f"{info.tokens[i]} ← {info.tokens[j]}",
        ))


class NaiveHostStats:
    """`stats.host_stats.HostStats` as `scope_partials` did it before the rewrite (same interface)."""

    def __init__(self, lay, causal: bool, *, top_k: int, include_special: bool, n_layers: int):
        from report_builder.stats.host_stats import HostStats

        self._cols = HostStats.CTX_COLS
        self.lay, self.causal, self.top_k, self.include_special = lay, causal, top_k, include_special
        self.ctx_rows: list[dict] = []
        self.tops: dict[int, TopPairs] = {}

    def add(self, e, layer: int, full: dict[str, np.ndarray]) -> None:
        lay = self.lay
        maps = full
        if not self.include_special:
            keep = ~np.asarray(e.special)
            maps = {s: m[np.ix_(keep, keep)] for s, m in full.items()}
        for row in old_sequence_ctx_changes(maps, lay.id, self.causal):
            self.ctx_rows.append(dict(seq=e.seq, layer=layer, **row))
        b, a = row_normalise(full[lay.ff_before]), row_normalise(full[lay.ff_after])
        tp = self.tops.setdefault(layer, TopPairs(k=self.top_k, causal=self.causal))
        info = SeqInfo(tokens=e.tokens, special=e.special, text=e.text, offsets=e.offsets, word_ids=e.word_ids)
        old_top_add(tp, e.seq, a - b, info, before=b, after=a)

    def tables(self) -> dict[str, pd.DataFrame]:
        tops = sorted(self.tops.items())
        return {
            "ctx_rows": pd.DataFrame(self.ctx_rows, columns=list(self._cols)),
            "top_pairs": pd.concat([tp.top_frame().drop(columns="rank").assign(layer=l) for l, tp in tops],
                                   ignore_index=True)[["layer", *PAYLOAD]],
            "base_counts": pd.concat([tp.base_frame().assign(layer=l) for l, tp in tops],
                                     ignore_index=True)[["layer", "category", "base_count"]],
        }


def tables_identical(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> bool:
    """Same tables, columns, dtypes and values to the last bit (nan equal to nan)."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if list(x.columns) != list(y.columns) or list(x.dtypes) != list(y.dtypes) or len(x) != len(y):
            return False
        for c in x.columns:
            u, v = x[c].to_numpy(), y[c].to_numpy()
            if u.dtype.kind == "f":
                if u.dtype != v.dtype or not np.array_equal(u.view(f"i{u.itemsize}"), v.view(f"i{v.itemsize}")):
                    return False
            elif list(u) != list(v):
                return False
    return True
