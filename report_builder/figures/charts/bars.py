"""Grouped bars: the share of each pair category among FF-amplified pairs vs its base rate (K24).

Pitfall: shares are computed per model from counts (not averaged from per-layer shares), so a layer
with few pairs does not weigh as much as one with many.
"""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from report_builder.figures.charts.data import inline_data


def pooled_share_bars(df: pd.DataFrame, categories: Sequence[str], title: str = "",
                      models: Sequence[str] | None = None):
    """Grouped bars: share among top pairs vs base rate per category, pooled over layers, per model."""
    g = df.groupby(["model", "category"], sort=False)[["top_count", "base_count"]].sum().reset_index()
    g["top"] = g["top_count"] / g.groupby("model")["top_count"].transform("sum").replace(0, np.nan)
    g["base"] = g["base_count"] / g.groupby("model")["base_count"].transform("sum").replace(0, np.nan)
    long = g.melt(id_vars=["model", "category"], value_vars=["top", "base"], var_name="set", value_name="share")
    long["set"] = long["set"].map({"top": "top-amplified pairs", "base": "all pairs (base rate)"})
    ch = alt.Chart(inline_data(long.fillna(0.0))).mark_bar().encode(
        x=alt.X("category:N", sort=list(categories), title=None, axis=alt.Axis(labelAngle=-35)),
        xOffset=alt.XOffset("set:N", sort=["top-amplified pairs", "all pairs (base rate)"]),
        y=alt.Y("share:Q", axis=alt.Axis(format="%"), title="share of pairs"),
        color=alt.Color("set:N", sort=["top-amplified pairs", "all pairs (base rate)"], title=None),
        tooltip=["model:N", "category:N", "set:N", alt.Tooltip("share:Q", format=".1%")],
    ).properties(width=24 * len(categories), height=150).facet(
        column=alt.Column("model:N", title=None, sort=list(models) if models else "ascending"))
    return ch.properties(title=title) if title else ch
