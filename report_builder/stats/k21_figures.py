"""Numbers the K21 figures derive from the result tables beyond `stats.k21` (torch-free, pandas only).

* `self_share` — share of each map row that stays on the diagonal (K21 Fig. 1's reading).
* `frequency_points` — token occurrences grouped for K21 Fig. 4 ([CLS], [SEP], '.', ',', other), the
  'other' group subsampled with a fixed seed.
* `expansion_rows` — K21 Table 8: per-model expansion summaries in a given order, a seed group summarised
  as one row, and the per-layer lines of the chart.

Pitfall: the Fig. 4 subsample is part of the figure's content hash; it is seeded (seed 0) and drawn
from the positions in table order, so never reorder ``freq`` before calling `frequency_points`.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from report_builder.stats import k21 as st

#: K21 Fig. 4's point groups, in legend order.
FIG4_GROUPS = ("[CLS]", "[SEP]", ".", ",", "other")


def self_share(maps: pd.DataFrame) -> pd.Series:
    """Per method, the mean over (layer, row i) of the row's share on its diagonal, in percent.

    Args:
        maps: ``k21_maps`` rows of one model and example (method, layer, i, j, value).

    Returns:
        A Series indexed by method.
    """
    diag = maps.assign(d=maps["i"] == maps["j"])
    tot = diag.groupby(["method", "layer", "i"])["value"].sum()
    own = diag[diag["d"]].groupby(["method", "layer", "i"])["value"].sum()
    return (own / tot).groupby("method").mean() * 100


def frequency_points(freq: pd.DataFrame, max_other: int, seed: int = 0) -> tuple[pd.DataFrame, int]:
    """Token occurrences for the frequency scatter, 'other' subsampled to ``max_other`` points.

    Args:
        freq: ``k21_freq`` rows of one model and dataset.
        max_other: most 'other' points kept (uniformly, without replacement, ``seed``).

    Returns:
        ``(points, n_other)``: points with token, group, freq_rank, ATTNRESLN-N (rounded to 2
        decimals), in table order; ``n_other`` the number of 'other' occurrences before subsampling.
    """
    stripped = freq["token"].astype(str).str.lstrip("Ġ▁ ")
    group = np.select(
        [freq["category"] == "[CLS]", freq["category"] == "[SEP]", stripped == ".", stripped == ","],
        ["[CLS]", "[SEP]", ".", ","], default="other",
    )
    pts = pd.DataFrame({"token": freq["token"].astype(str).to_numpy(), "group": group,
                        "freq_rank": freq["freq_rank"].astype(int).to_numpy(),
                        "ATTNRESLN-N": freq["ATTNRESLN-N"].round(2).to_numpy()})
    other = np.flatnonzero(pts["group"].to_numpy() == "other")
    n_other = len(other)
    if n_other > max_other:
        keep_other = np.sort(np.random.default_rng(seed).choice(other, max_other, replace=False))
        keep = np.sort(np.concatenate([np.flatnonzero(pts["group"].to_numpy() != "other"), keep_other]))
        pts = pts.iloc[keep].reset_index(drop=True)
    return pts, n_other


def expansion_rows(exp: pd.DataFrame, seed_group: Sequence[str],
                   order: Mapping[str, int]) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """K21 Table 8's summary rows and chart lines.

    Args:
        exp: ``k21_expansion`` rows (model, layer, expansion_rate).
        seed_group: models summarised as one group row (used only when it has ≥ 2 members).
        order: model -> position (configuration order); models not in it follow, by name.

    Returns:
        ``(summary, lines, group_name)``: summary has model, mean, sd, min, max, n_layers, group
        (bool); lines has model, layer, expansion_rate, report (``"this build"``); group_name is the
        group row's model label, or None without a group.
    """
    g = set(seed_group) if len(seed_group) >= 2 else set()
    singles = exp[~exp["model"].isin(g)]
    singles = singles.assign(_o=singles["model"].map(lambda x: order.get(x, len(order)))).sort_values(
        ["_o", "model", "layer"]).drop(columns="_o")
    summ = st.expansion_summary(singles)
    summ["group"] = False
    lines = singles[["model", "layer", "expansion_rate"]].assign(report="this build")
    name = None
    if g and exp["model"].isin(g).any():
        gs = st.expansion_group_summary(exp, sorted(g))
        name = f"seed group ({gs['n_models']} models)"
        summ = pd.concat([summ, pd.DataFrame([{"model": name, "mean": gs["mean"], "sd": gs["sd"], "min": gs["min"],
                                               "max": gs["max"], "n_layers": int(exp[exp["model"].isin(g)]["layer"].nunique()),
                                               "group": True}])], ignore_index=True)
        gl = exp[exp["model"].isin(g)].groupby("layer", as_index=False)["expansion_rate"].mean()
        lines = pd.concat([lines, gl.assign(model=name, report="this build")], ignore_index=True)
    return summ, lines, name
