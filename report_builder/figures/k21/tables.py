"""Display formatting of the K21 tables: statistics and Spearman frames -> the columns shown on the page.

Pitfall: rounding happens here, for display only; the downloadable ``data.csv`` keeps full precision.
"""
from __future__ import annotations

import pandas as pd


def stats_table(df: pd.DataFrame, key: str, key_title: str) -> pd.DataFrame:
    """Mean, max, min per method (%), rounded to 2 decimals, keyed by ``key`` shown as ``key_title``."""
    return pd.DataFrame(
        {
            key_title: df[key],
            "Method": df["method"],
            "Mean (%)": df["mean"].round(2),
            "Max (%)": df["max"].round(2),
            "Min (%)": df["min"].round(2),
            "Tokens pooled": df["n"],
        }
    )


def spearman_table(df: pd.DataFrame, key: str | None, key_title: str | None) -> pd.DataFrame:
    """ρ with and without [CLS]/[SEP] per method, rounded to 3 decimals, optionally keyed."""
    out = pd.DataFrame({
        "Method": df["method"],
        "ρ (all tokens)": df["rho_all"].round(3),
        "ρ (without [CLS], [SEP])": df["rho_no_special"].round(3),
        "Occurrences": df["n_all"],
    })
    if key is not None:
        out.insert(0, key_title, df[key].to_numpy())
    return out
