"""K24 RES / LN summaries: FF output vs residual norms per layer, and the share of FF's change LN keeps.

Pitfall: tokens with a zero residual norm are skipped in the ratio (never divided by), and a
dimension whose FF change is 0 has a ``nan`` kept ratio, not 0.
"""
from __future__ import annotations

import numpy as np


def norm_ratio_summary(ff_norm: np.ndarray, res_norm: np.ndarray) -> dict[str, float]:
    """Per-layer summary of ``‖FF output_i‖`` vs ``‖residual input_i‖`` over all tokens.

    Returns ff_norm_mean, res_norm_mean, ratio_mean, ratio_q10, ratio_q50, ratio_q90 where
    ``ratio_i = ‖FF_i‖ / ‖res_i‖`` (tokens with a zero residual norm are skipped).
    """
    f = np.asarray(ff_norm, dtype=np.float64).ravel()
    r = np.asarray(res_norm, dtype=np.float64).ravel()
    ok = r > 0
    ratio = f[ok] / r[ok]
    q = np.quantile(ratio, [0.1, 0.5, 0.9]) if ratio.size else [np.nan] * 3
    return dict(ff_norm_mean=float(f.mean()), res_norm_mean=float(r.mean()),
                ratio_mean=float(ratio.mean()) if ratio.size else float("nan"),
                ratio_q10=float(q[0]), ratio_q50=float(q[1]), ratio_q90=float(q[2]))


def kept_ratio(ff_change: np.ndarray, ln_out_change: np.ndarray) -> np.ndarray:
    """Per-dimension share of FF's change that survives LN: ``ln_out_change / ff_change`` (nan where 0)."""
    f = np.asarray(ff_change, dtype=np.float64)
    g = np.asarray(ln_out_change, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(f > 0, g / np.where(f > 0, f, 1.0), np.nan)
