"""Spearman's ρ in numpy, bit for bit as ``scipy.stats.spearmanr`` (so rendering needs no scipy).

`spearman` runs scipy's own steps on the same arrays: the two variables stacked as columns, each
ranked (average ranks for ties: `ctx_change._rank`, equal to ``scipy.stats.rankdata``) by
``np.apply_along_axis``, then ``np.corrcoef(..., rowvar=0)[1, 0]``; `series_spearman` is pandas'
``Series.corr(method="spearman")`` (aligned on the index, pairs with a NaN dropped) on top of it.
`tests/stats/test_ranks.py` checks both against scipy and pandas for equality of every bit.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder.stats.ctx_change import _rank as average_ranks


def spearman(x, y) -> float:
    """Spearman's ρ of two equal-length 1-D samples: NaN when either is constant, has a NaN, or has fewer than
    two values (as ``scipy.stats.spearmanr(x, y).statistic``, without its warning)."""
    a = np.column_stack((np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)))
    if a.shape[0] <= 1 or (a[:, 0][0] == a[:, 0]).all() or (a[:, 1][0] == a[:, 1]).all() or np.isnan(a).any():
        return float("nan")
    ranked = np.apply_along_axis(average_ranks, 0, a)
    return float(np.corrcoef(ranked, rowvar=0)[1, 0])


def series_spearman(a: pd.Series, b: pd.Series) -> float:
    """``a.corr(b, method="spearman")``: aligned on the index (inner join), pairs with a NaN dropped."""
    this, other = a.align(b, join="inner")
    if len(this) == 0:
        return float("nan")
    x = this.to_numpy(dtype=float, na_value=np.nan)
    y = other.to_numpy(dtype=float, na_value=np.nan)
    ok = ~(np.isnan(x) | np.isnan(y))
    return spearman(x[ok], y[ok]) if ok.any() else float("nan")
