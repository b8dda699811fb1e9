"""K24 top FF-amplified pairs and the pair categories' base rates, one sequence at a time.

`TopPairs` keeps the k largest FF-amp values (``i ≠ j``) of one (model, dataset, layer) with their
categories and context snippets, and counts every valid pair's category; `seq_pairs` computes a
sequence's valid pairs and categories once for all its layers; `category_shares` makes the
``k24_ffamp_base`` table (share among top pairs vs base rate).

Pitfall: ties are broken by (seq, i, j) ascending, a total order, so the result does not depend on
feeding order and shards merge exactly (`TopPairs.merge`); never compare pairs by amp alone.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from report_builder.stats.context_snippet import context_snippet
from report_builder.stats.maps import valid_pairs_mask
from report_builder.stats.pair_categories import CATEGORY_ORDER, pair_category_codes


@dataclass
class SeqInfo:
    """What the categoriser and the snippet need about one sequence."""

    tokens: Sequence[str]
    special: Sequence[bool]
    text: str = ""
    offsets: Sequence[tuple[int, int] | None] | None = None
    word_ids: Sequence[int | None] | None = None


PAYLOAD = ("seq", "i", "j", "token_i", "token_j", "amp", "before", "after", "category", "context")
"""What `TopPairs.top_frame` records of each pair, after its ``rank``."""


@dataclass(frozen=True)
class SeqPairs:
    """One sequence's valid ``i ≠ j`` pairs, their categories and category counts (`seq_pairs`): the
    same in every layer, so `TopPairs.add` can take them computed once per sequence."""

    n: int
    flat: np.ndarray  # flat indices i * n + j of the valid pairs, row-major
    codes: np.ndarray  # (n, n) indices into CATEGORY_ORDER
    counts: np.ndarray  # pairs per category, CATEGORY_ORDER's order


def seq_pairs(info: SeqInfo, causal: bool) -> SeqPairs:
    """The `SeqPairs` of one sequence (``j ≤ i`` only if ``causal``)."""
    n = len(info.tokens)
    valid = valid_pairs_mask(n, causal) & ~np.eye(n, dtype=bool)
    codes = pair_category_codes(info.tokens, info.word_ids, info.offsets, info.text, info.special)
    return SeqPairs(n, np.flatnonzero(valid), codes, np.bincount(codes[valid], minlength=len(CATEGORY_ORDER)))


@dataclass
class TopPairs:
    """Running top-k FF-amplified pairs (``i ≠ j``) of one (model, dataset, layer) and base rates.

    Feed one sequence at a time with `add`; memory is O(k) for the top pairs plus 7 counters.
    Ties are broken by (seq, i, j) ascending, so the result does not depend on feeding order.
    """

    k: int = 20
    causal: bool = False
    width: int = 40
    _heap: list = field(default_factory=list)  # min-heap of (amp, -seq, -i, -j, payload)
    base_counts: dict = field(default_factory=lambda: {c: 0 for c in CATEGORY_ORDER})

    def add(self, seq: int, amp: np.ndarray, info: SeqInfo, before: np.ndarray | None = None,
            after: np.ndarray | None = None, pairs: SeqPairs | None = None) -> None:
        """Add one sequence's ``(n, n)`` amp map (and optionally its row-normalised before/after maps).

        ``pairs``: the sequence's `seq_pairs` (computed here if None; pass them to share them between layers).
        """
        amp = np.asarray(amp, dtype=np.float64)
        n = amp.shape[0]
        if pairs is None:
            pairs = seq_pairs(info, self.causal)
        if pairs.n != n:
            raise ValueError(f"the pairs are of a sequence of {pairs.n} tokens, the map has {n}")
        self._count(pairs)
        vals = amp.ravel()[pairs.flat]
        if vals.size == 0:
            return
        kk = min(self.k, vals.size)
        cand = np.argpartition(-vals, kk - 1)[:kk]
        if len(self._heap) >= self.k:  # only candidates above the current k-th key can enter
            floor = self._heap[0][0]
            cand = cand[vals[cand] >= floor]
        flat = pairs.flat[cand]
        ii, jj = flat // n, flat % n
        self._offer_pairs(seq, flat, n, vals[cand], info, pairs, None if before is None else before[ii, jj],
                          None if after is None else after[ii, jj])

    def add_candidates(self, seq: int, flat: np.ndarray, vals: np.ndarray, info: SeqInfo, pairs: SeqPairs,
                       before: np.ndarray, after: np.ndarray) -> None:
        """Add one sequence whose best pairs were chosen elsewhere (the device statistics): ``flat`` their
        indices ``i * n + j`` in its ``(n, n)`` map, ``vals`` their amp, ``before``/``after`` their
        row-normalised values; at least the k largest of its valid ``i ≠ j`` pairs (ties: smaller
        ``(i, j)`` first), which `add` would offer. Counts the sequence's pairs as `add` does."""
        self._count(pairs)
        if len(flat):
            self._offer_pairs(seq, np.asarray(flat, dtype=np.int64), pairs.n, np.asarray(vals, dtype=np.float64),
                              info, pairs, np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64))

    def _count(self, pairs: SeqPairs) -> None:
        for cat, cnt in zip(CATEGORY_ORDER, pairs.counts):
            if cnt:
                self.base_counts[cat] = self.base_counts.get(cat, 0) + int(cnt)

    def _offer_pairs(self, seq: int, flat: np.ndarray, n: int, vals: np.ndarray, info: SeqInfo, pairs: SeqPairs,
                     before: np.ndarray | None, after: np.ndarray | None) -> None:
        for q in range(len(flat)):
            f = int(flat[q])
            i, j, v = f // n, f % n, float(vals[q])
            self._offer((v, -seq, -i, -j), lambda i=i, j=j, v=v, q=q: dict(
                seq=int(seq), i=i, j=j, token_i=str(info.tokens[i]), token_j=str(info.tokens[j]), amp=v,
                before=float(before[q]) if before is not None else float("nan"),
                after=float(after[q]) if after is not None else float("nan"),
                category=CATEGORY_ORDER[pairs.codes[i, j]],
                context=context_snippet(info.text, info.offsets, i, j, self.width, info.tokens)
                if info.offsets is not None else f"{info.tokens[i]} ← {info.tokens[j]}",
            ))

    def _offer(self, key: tuple, payload: Callable[[], dict]) -> None:
        if len(self._heap) >= self.k and key <= self._heap[0][:4]:
            return
        item = (*key, payload())
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, item)
        else:
            heapq.heapreplace(self._heap, item)

    def merge(self, top: pd.DataFrame, base: pd.DataFrame) -> None:
        """Fold in another `TopPairs`' `top_frame` and `base_frame` (e.g. a shard's): the result is the
        one feeding both sets of sequences into one `TopPairs` gives, in any order (keys are totally
        ordered, counts are summed)."""
        for cat, cnt in zip(base["category"], base["base_count"]):
            self.base_counts[cat] = self.base_counts.get(cat, 0) + int(cnt)
        for r in top[list(PAYLOAD)].itertuples(index=False):
            self._offer((float(r.amp), -int(r.seq), -int(r.i), -int(r.j)), lambda r=r: dict(
                seq=int(r.seq), i=int(r.i), j=int(r.j), token_i=str(r.token_i), token_j=str(r.token_j),
                amp=float(r.amp), before=float(r.before), after=float(r.after), category=str(r.category),
                context=str(r.context)))

    def top_frame(self) -> pd.DataFrame:
        """Top pairs, ``rank`` 1 = largest amp: rank, seq, i, j, token_i, token_j, amp, before, after, category, context."""
        items = sorted(self._heap, key=lambda t: (-t[0], -t[1], -t[2], -t[3]))
        rows = [dict(rank=r + 1, **t[4]) for r, t in enumerate(items)]
        return pd.DataFrame(rows, columns=["rank", *PAYLOAD])

    def base_frame(self) -> pd.DataFrame:
        """Base counts over all valid ``i ≠ j`` pairs seen: category, base_count (every category listed)."""
        return pd.DataFrame({"category": list(CATEGORY_ORDER),
                             "base_count": [int(self.base_counts.get(c, 0)) for c in CATEGORY_ORDER]})


def top_pairs(amps: Iterable[tuple[int, np.ndarray, SeqInfo]], k: int = 20, causal: bool = False,
              width: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Top-k FF-amplified pairs over a dataset for one layer, and the category base counts.

    Args:
        amps: iterable of ``(seq, amp_map, info)``; ``amp_map`` is ``(n, n)`` (see `ffamp`). To also
            record before/after values use `TopPairs` directly.
        k: how many pairs to keep (over the whole dataset, ``i ≠ j``; ``j ≤ i`` if causal).
        causal: restrict to ``j <= i``.
        width: context characters either side in the snippets.

    Returns:
        ``(top_df, base_df)`` — see `TopPairs.top_frame` / `TopPairs.base_frame`.
    """
    tp = TopPairs(k=k, causal=causal, width=width)
    for seq, amp, info in amps:
        tp.add(seq, amp, info)
    return tp.top_frame(), tp.base_frame()


def category_shares(top_df: pd.DataFrame, base_df: pd.DataFrame) -> pd.DataFrame:
    """Share of each category among top pairs vs its base rate (the ``k24_ffamp_base`` table).

    Args:
        top_df: top pairs with a ``category`` column (plus any of model, dataset, layer).
        base_df: ``category``, ``base_count`` (plus the same group columns).

    Returns:
        one row per (group…, category) for every category in `CATEGORY_ORDER`: group columns,
        category, top_count, top_share (of the group's top pairs), base_count, base_share (of all
        valid ``i ≠ j`` pairs in the group). Shares are 0 (not nan) for empty groups.
    """
    groups = [c for c in ("model", "dataset", "layer") if c in base_df.columns]
    base = base_df.assign(_g=0).groupby(["_g"] + groups + ["category"], sort=False)["base_count"].sum()
    keys = base.reset_index()[["_g"] + groups].drop_duplicates()
    full = keys.merge(pd.DataFrame({"category": list(CATEGORY_ORDER)}), how="cross")
    top = top_df.assign(_g=0).groupby(["_g"] + groups + ["category"], sort=False).size().rename("top_count")
    on = ["_g"] + groups + ["category"]
    out = full.merge(top.reset_index(), on=on, how="left").merge(base.reset_index(), on=on, how="left")
    out[["top_count", "base_count"]] = out[["top_count", "base_count"]].fillna(0).astype(int)
    for col, name in (("top_count", "top_share"), ("base_count", "base_share")):
        tot = out.groupby(["_g"] + groups, sort=False)[col].transform("sum")
        out[name] = np.where(tot > 0, out[col] / tot.where(tot > 0, 1), 0.0).astype(float)
    return out[groups + ["category", "top_count", "top_share", "base_count", "base_share"]].reset_index(drop=True)
