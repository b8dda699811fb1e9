"""The generated K21 prose: one- or two-sentence readings computed from this build's numbers.

Each function takes the numbers a builder computed (statistics frames, means) and returns plain
text; nothing here reads a result table. Pitfall: a reading states a direction ("frequent tokens mix
more") only from the sign of the number it prints — never a sentence assumed from the paper.
"""
from __future__ import annotations

from typing import Callable

import pandas as pd

from report_builder.precision import published as pub

#: Why a Spearman ρ of the frequency analysis can be undefined.
UNDEFINED_RHO = "the mixing ratios or the frequency ranks are all equal, so there is no ordering to correlate"


def mixing_reading(stats: pd.DataFrame, who: str) -> str:
    """ATTNRESLN-N vs ATTN-N mean mixing ratio of one model (from `stats.k21` per-model stats)."""
    s = stats.set_index("method")["mean"]
    if "ATTNRESLN-N" not in s or "ATTN-N" not in s:
        return ""
    a, b = s["ATTN-N"], s["ATTNRESLN-N"]
    factor = f" (~{pub(a / b, '.1f')}× less)" if b > 0 else ""
    return (f"For {who}, the ATTNRESLN-N mean mixing ratio is {pub(b, '.1f')}% against ATTN-N {pub(a, '.1f')}%: "
            f"counting the residual connection and layer normalisation cuts the measured context mixing{factor}.")


def rho_reading(fs: pd.DataFrame, who: str) -> str:
    """The sign and size of the ATTNRESLN-N frequency correlation (from `stats.k21.frequency_spearman`)."""
    r = fs.set_index("method")
    if "ATTNRESLN-N" not in r.index:
        return ""
    a, b = r.loc["ATTNRESLN-N", "rho_all"], r.loc["ATTNRESLN-N", "rho_no_special"]
    if pd.isna(a):
        return f"For {who} the ATTNRESLN-N correlation is undefined ({UNDEFINED_RHO})."
    trend = "frequent tokens mix more with their context" if a < 0 else "rare tokens mix more with their context"
    return f"For {who}, ATTNRESLN-N: ρ = {pub(a, '.2f')} ({_rho(b)} without [CLS]/[SEP]) — {trend}."


def self_share_reading(share: pd.Series) -> str:
    """K21 Fig. 1: the diagonal share of ATTN-N vs ATTNRESLN-N rows (from `stats.k21_figures.self_share`)."""
    return (f"On this sentence pair, a token's own term carries on average {pub(share['ATTN-N'], '.0f')}% of its row in "
            f"ATTN-N but {pub(share['ATTNRESLN-N'], '.0f')}% in ATTNRESLN-N: once the residual and LayerNorm are "
            f"included, each token mostly keeps its own information.")


def category_reading(means: pd.DataFrame, label: Callable[[str], str] = str) -> str:
    """K21 Fig. 3 family: ATTNRESLN-N overall mixing in the first vs last layer, [CLS]/[SEP] vs Normal
    (from `stats.k21.layer_category_means`), each category named as the chart shows it (``label``)."""
    ov = means[(means["category"] == "Overall") & (means["method"] == "ATTNRESLN-N")].sort_values("layer")
    reading = ""
    if len(ov):
        first, last = ov["value"].iloc[0], ov["value"].iloc[-1]
        reading = (f"ATTNRESLN-N overall mixing goes from {pub(first, '.1f')}% in layer 1 to {pub(last, '.1f')}% in layer "
                   f"{int(ov['layer'].iloc[-1]) + 1}")
        rn = means[(means["method"] == "ATTNRESLN-N")].groupby("category")["value"].mean()
        sp = [c for c in ("[CLS]", "[SEP]") if c in rn]
        if "Normal" in rn and sp:
            reading += ("; averaged over layers, " + ", ".join(f"{label(c)} {pub(rn[c], '.1f')}%" for c in sp)
                        + f" vs Normal tokens {pub(rn['Normal'], '.1f')}%")
        reading += "."
    return reading


def variants_reading(r: pd.Series) -> str:
    """K21 Table 5: the range of ATTNRESLN-N mean mixing ratio over variants (model -> mean)."""
    if len(r) == 1:
        return f"ATTNRESLN-N mean mixing ratio of the one configured variant, {r.index[0]}: {pub(r.iloc[0], '.1f')}%."
    if r.round(1).nunique() == 1:
        return f"ATTNRESLN-N mean mixing ratio is {pub(r.iloc[0], '.1f')}% for all {len(r)} variants."
    return (f"ATTNRESLN-N mean mixing ratio ranges from {pub(r.min(), '.1f')}% ({r.idxmin()}) to {pub(r.max(), '.1f')}% "
            f"({r.idxmax()}) across the {len(r)} variants.")


def datasets_reading(model: str, r: pd.Series) -> str:
    """K21 Table 6: one model's ATTNRESLN-N mean mixing ratio on each dataset (dataset -> mean)."""
    return (f"For {model}, the ATTNRESLN-N mean mixing ratio is "
            + ", ".join(f"{pub(v, '.1f')}% on {k}" for k, v in r.items()) + ".")


def seed_group_reading(stats: pd.DataFrame) -> str:
    """K21 Table 7: ATTNRESLN-N vs ATTN-N over the seeds, and whether the gap exceeds the spread."""
    r = stats.set_index("method")
    reading = ""
    if "ATTNRESLN-N" in r.index:
        m_ln, sd_ln, m_a = r.loc["ATTNRESLN-N", "mean"], r.loc["ATTNRESLN-N", "sd"], r.loc["ATTN-N", "mean"]
        reading = (f"Over {int(r.loc['ATTNRESLN-N', 'n_models'])} seeds, the ATTNRESLN-N mean mixing ratio is "
                   f"{pub(m_ln, '.1f')}% (SD {pub(sd_ln, '.2f')}) against ATTN-N {pub(m_a, '.1f')}%")
        reading += (": the gap is far larger than the seed-to-seed spread." if sd_ln * 10 < abs(m_a - m_ln)
                    else ".")
    return reading


def _rho(v: float) -> str:
    return "undefined" if pd.isna(v) else pub(v, '.2f')


def _undefined_note(r: pd.Series) -> str:
    return f" (undefined: {UNDEFINED_RHO})" if r.isna().any() else ""


def rho_by_model_reading(r: pd.Series) -> str:
    """K21 Table 9: ATTNRESLN-N ρ per model (model -> ρ)."""
    return ("ATTNRESLN-N ρ(frequency rank, mixing ratio): " + ", ".join(f"{k} {_rho(v)}" for k, v in r.items())
            + _undefined_note(r) + ".")


def rho_by_dataset_reading(model: str, r: pd.Series) -> str:
    """K21 Table 10: one model's ATTNRESLN-N ρ per dataset (dataset -> ρ)."""
    return (f"For {model}, ATTNRESLN-N ρ: " + ", ".join(f"{_rho(v)} on {k}" for k, v in r.items())
            + _undefined_note(r) + ".")


def seed_rho_reading(fs: pd.DataFrame) -> str:
    """K21 Table 11: the ATTNRESLN-N ρ mean and SD over the seed group."""
    r = fs.set_index("method")
    reading = ""
    if "ATTNRESLN-N" in r.index:
        reading = (f"Over {int(r.loc['ATTNRESLN-N', 'n_models'])} seeds, ATTNRESLN-N ρ = "
                   f"{pub(r.loc['ATTNRESLN-N', 'rho_all_mean'], '.2f')} (SD {pub(r.loc['ATTNRESLN-N', 'rho_all_sd'], '.2f')}).")
    return reading


def expansion_reading(top: pd.Series) -> str:
    """K21 Table 8: the first model's mean, min and max expansion rate (a summary row)."""
    return (f"{top['model']}: mean expansion rate {pub(top['mean'], '.2f')} over its layers (min {pub(top['min'], '.2f')}, "
            f"max {pub(top['max'], '.2f')}); values near 1 mean the value→output map neither shrinks nor grows vectors.")
