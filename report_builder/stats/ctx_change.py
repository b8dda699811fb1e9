"""K24 contextualization change ``1 − Spearman ρ`` between two scopes' maps, by ranking each map once.

`ranked` turns a map's valid pairs into centred average ranks (`_rank`, bit for bit
``scipy.stats.rankdata``), so a scope in several pairs is ranked once per sequence and layer;
`sequence_ctx_changes` gives every component and cumulative change of one sequence and layer and
`summarise_ctx` averages them into the ``k24_ctx`` table. Numpy / pandas only (no scipy).

Pitfall: Spearman ρ of two maps is undefined when one of them is constant over the valid pairs
(e.g. a 1-token sequence, or a causal 1×1 map); `ctx_change` then returns ``nan`` and the caller
drops that sequence from the mean (``n_seqs`` counts only the sequences that were used).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from report_builder import schema
from report_builder.stats.maps import valid_pairs_mask


def _rank(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank), as ``scipy.stats.rankdata``.

    A tie group's rank depends only on where the group starts and ends in sorted order, never on the
    order the sort leaves its members in, so the fast unstable sort gives the same ranks as a stable
    one. NaNs (sorted last) are never equal, so each is its own group and their order matters: with
    any NaN the stable sort is used, and NaNs are ranked in index order as before.
    """
    order = np.argsort(x)
    xs = x[order]
    if xs.size and xs[-1] != xs[-1]:
        order = np.argsort(x, kind="mergesort")
        xs = x[order]
    first = np.empty(x.size, dtype=bool)
    first[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=first[1:])
    ranks = np.empty(x.size, dtype=np.float64)
    if first.all():  # no ties: the k-th smallest gets 0.5 * (k + (k - 1) + 1) = k exactly
        ranks[order] = np.arange(1, x.size + 1, dtype=np.float64)
        return ranks
    dense = np.cumsum(first)
    bounds = np.append(np.flatnonzero(first), x.size)
    ranks[order] = 0.5 * (bounds[dense] + bounds[dense - 1] + 1)
    return ranks


@dataclass(frozen=True)
class Ranked:
    """One map's valid pairs as centred average ranks and their sum of squares (`ranked`): what the
    Spearman ρ of that map with any other needs, so a scope in several pairs is ranked once."""

    shape: tuple[int, int]
    centred: np.ndarray | None  # None: fewer than 2 valid pairs (ρ undefined)
    ss: float = float("nan")


def ranked(m: np.ndarray, causal: bool, mask: np.ndarray | None = None) -> Ranked:
    """`Ranked` of an ``(n, n)`` map over its valid pairs (see `ctx_change` for ``causal`` and ``mask``)."""
    a = np.asarray(m)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    # float32 maps are ranked as they are: casting to float64 is exact and keeps order and ties
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"maps must be (n, n) arrays, got {a.shape}")
    if mask is None and not causal:
        x = a.ravel()  # every pair, in the row-major order a boolean mask takes them in
    else:
        v = valid_pairs_mask(a.shape[0], causal)
        x = a[v & np.asarray(mask, dtype=bool) if mask is not None else v]
    if x.size < 2:
        return Ranked(a.shape, None)
    r = _rank(x)
    r = r - r.mean()
    return Ranked(a.shape, r, (r * r).sum())


def ranked_change(a: Ranked, b: Ranked) -> float:
    """``1 − Spearman ρ`` of two `Ranked` maps (from S to T), clipped to ``[0, 2]``; nan when undefined."""
    if a.shape != b.shape:
        raise ValueError(f"maps must be equal (n, n) arrays, got {a.shape} and {b.shape}")
    if a.centred is None or b.centred is None:
        return float("nan")
    den = np.sqrt(a.ss * b.ss)
    if den == 0 or not np.isfinite(den):
        return float("nan")
    rho = float((a.centred * b.centred).sum() / den)
    if np.isnan(rho):
        return float("nan")
    return float(np.clip(1.0 - rho, 0.0, 2.0))


def ctx_change(map_s: np.ndarray, map_t: np.ndarray, causal: bool, mask: np.ndarray | None = None) -> float:
    """Contextualization change ``1 − ρ`` between two maps of one sequence and layer.

    Args:
        map_s: ``(n, n)`` map at scope S (before).
        map_t: ``(n, n)`` map at scope T (after).
        causal: if True only pairs ``j <= i`` are used.
        mask: optional extra ``(n, n)`` bool mask (e.g. non-pad), AND-ed with the causal mask.

    Returns:
        ``1 − Spearman ρ`` over the flattened valid pairs, in ``[0, 2]``: 0 for maps with identical
        rank order, 2 for exactly reversed ranks. ``nan`` when ρ is undefined (either map constant
        over the valid pairs, or fewer than 2 valid pairs) — callers drop such sequences.
    """
    a, b = np.asarray(map_s), np.asarray(map_t)
    if a.shape != b.shape:
        raise ValueError(f"maps must be equal (n, n) arrays, got {a.shape} and {b.shape}")
    return ranked_change(ranked(a, causal, mask), ranked(b, causal, mask))


def change_plan(ln_position: str) -> tuple[list[dict], list[tuple[str, str]]]:
    """The K24 changes of one sequence and layer for a layout: the rows in order (``kind``,
    ``component``, ``from_scope``, ``to_scope``, without ``change``) and the distinct (from, to) scope
    pairs they need, in the order first needed (a pair that is both a component and a cumulative one,
    ATB→ next scope, appears once). Shared by `sequence_ctx_changes` and the device statistics."""
    lay = schema.layout(ln_position)
    rows = [dict(kind="component", component=comp, from_scope=lay.scopes[k], to_scope=lay.scopes[k + 1])
            for k, comp in enumerate(lay.components)]
    rows += [dict(kind="cumulative", component=f"{s}→{t}", from_scope=s, to_scope=t) for s, t in lay.cumulative()]
    pairs: list[tuple[str, str]] = []
    for r in rows:
        if (r["from_scope"], r["to_scope"]) not in pairs:
            pairs.append((r["from_scope"], r["to_scope"]))
    return rows, pairs


def sequence_ctx_changes(maps: dict[str, np.ndarray], ln_position: str, causal: bool) -> list[dict]:
    """All K24 changes for one sequence and layer.

    Each scope is ranked once (`ranked`) however many pairs it is in, and a pair that is both a
    component and a cumulative one (ATB→ next scope) is computed once: the same values as
    `ctx_change` on every pair.

    Args:
        maps: scope name -> ``(n, n)`` map, for every scope of the layout.
        ln_position: the layout id (`schema.layout`).
        causal: whether pairs are restricted to ``j <= i``.

    Returns:
        rows ``{kind, component, from_scope, to_scope, change}``: one ``component`` row per
        consecutive scope pair (component ``FF``/``RES``/``LN``) and one ``cumulative`` row per
        later scope (component ``"ATB→<scope>"``, from ATB); `change_plan` gives them without ``change``.
    """
    rows, pairs = change_plan(ln_position)
    ranks: dict[str, Ranked] = {}
    changes: dict[tuple[str, str], float] = {}
    for s, t in pairs:
        for x in (s, t):
            if x not in ranks:
                ranks[x] = ranked(maps[x], causal)
        changes[(s, t)] = ranked_change(ranks[s], ranks[t])
    return [dict(**r, change=changes[(r["from_scope"], r["to_scope"])]) for r in rows]


def summarise_ctx(rows: pd.DataFrame) -> pd.DataFrame:
    """Average per-sequence changes into the ``k24_ctx`` table.

    Args:
        rows: one row per (model, dataset, seq, layer, kind, component, from_scope, to_scope) with a
            ``change`` column (``nan`` rows are dropped before averaging).

    Returns:
        ``k24_ctx`` frame: model, dataset, layer, kind, component, from_scope, to_scope, change
        (mean over sequences), change_sd (sample SD, ddof=1; nan for one sequence), n_seqs.
    """
    keys = ["model", "dataset", "layer", "kind", "component", "from_scope", "to_scope"]
    ok = rows.dropna(subset=["change"])
    out = (ok.groupby(keys, sort=False)["change"]
           .agg(change="mean", change_sd="std", n_seqs="count").reset_index())
    out["n_seqs"] = out["n_seqs"].astype(int)
    return out[keys + ["change", "change_sd", "n_seqs"]]
