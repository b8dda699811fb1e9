"""Heatmaps with a fixed colour domain: values printed in cells (K21 Fig. 3 family) and category lift (K24).

`annotated_heatmap` — value printed in every cell, fixed colour domain, optional facet panels (K21
Fig. 3 and siblings: layers × token categories, one panel per method). `category_lift_heatmap` —
log₂(share among FF-amplified pairs / base rate) per layer × category, faceted model × dataset.

Pitfall: the text colour flips at a threshold of the *domain*, not of the data; keep domains fixed.
"""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from report_builder.figures import theme
from report_builder.figures.charts.data import LAYER_TITLE, field, inline_data, shown, typed


def annotated_heatmap(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    value: str,
    facet: str | None = None,
    facet_order: Sequence[str] | None = None,
    x_order: Sequence | None = None,
    y_order: Sequence | None = None,
    domain: tuple[float, float] = (0.0, 100.0),
    scheme: str = theme.SEQUENTIAL,
    fmt: str = ".1f",
    cell_width: int = 38,
    cell_height: int = 20,
    columns: int = 5,
    x_title: str | None = None,
    y_title: str | None = None,
    value_title: str | None = None,
    tooltip_extra: Sequence[str] = (),
    font_size: int = theme.FONT_SIZE,
    legend_orient: str = "right",
) -> alt.Chart:
    """Heatmap with the value printed in each cell on a fixed colour scale.

    Args:
        df: tidy frame, one row per cell (and facet panel).
        x, y: columns for the horizontal (nominal) and vertical (ordinal) axes.
        value: numeric column coloured and printed.
        facet: optional column splitting the data into panels (wrapped after ``columns`` panels).
        facet_order, x_order, y_order: explicit category orders (default: sorted).
        domain: fixed colour domain (values outside are clamped); text turns white above 60 % of it.
        fmt: d3 format of the printed value. cell_width / cell_height: px per cell.
        tooltip_extra: more columns to show in the tooltip.
        legend_orient: where the colour legend goes (``"bottom"`` saves width for many panels).

    Returns:
        A layered (rect + text) chart, faceted when ``facet`` is given.
    """
    lo, hi = domain
    threshold = lo + 0.6 * (hi - lo)
    xt = x_title if x_title is not None else x
    yt = y_title if y_title is not None else y
    vt = value_title if value_title is not None else value
    enc_x = alt.X(f"{field(x)}:N", sort=list(x_order) if x_order is not None else "ascending", title=xt,
                  axis=alt.Axis(labelAngle=-40, labelLimit=90))
    enc_y = alt.Y(f"{field(y)}:O", sort=list(y_order) if y_order is not None else "ascending", title=yt)
    tooltip = [alt.Tooltip(typed(df, c), title=c) for c in ([facet] if facet else [])]
    tooltip += [alt.Tooltip(f"{field(y)}:O", title=yt), alt.Tooltip(f"{field(x)}:N", title=xt),
                alt.Tooltip(f"{field(value)}:Q", title=vt, format=fmt)]
    tooltip += [alt.Tooltip(typed(df, c), title=c) for c in tooltip_extra]
    rect = alt.Chart().mark_rect().encode(
        x=enc_x, y=enc_y,
        color=alt.Color(f"{field(value)}:Q", title=vt,
                        scale=alt.Scale(domain=[lo, hi], scheme=scheme, clamp=True),
                        legend=alt.Legend(orient=legend_orient)),
        tooltip=tooltip,
    )
    text = alt.Chart().mark_text(fontSize=font_size).encode(
        x=enc_x, y=enc_y,
        text=alt.Text(f"{field(value)}:Q", format=fmt),
        color=alt.condition(f"datum[{value!r}] > {threshold}", alt.value("white"), alt.value("#222")),
        tooltip=tooltip,
    )
    layered = alt.layer(rect, text, data=inline_data(df)).properties(
        width=alt.Step(cell_width), height=alt.Step(cell_height)
    )
    if facet is None:
        return layered
    out = layered.facet(
        facet=alt.Facet(f"{field(facet)}:N", sort=list(facet_order) if facet_order else "ascending", title=None),
        columns=columns,
        spacing=12,
    )
    n_panels = len(facet_order) if facet_order else df[facet].nunique()
    if n_panels > columns:  # wrapped: each panel labels its own columns (the shared axis sat under the last row
        out = out.resolve_axis(x="independent")  # only, below an empty slot where the panels do not fill it)
    return out


def category_lift_heatmap(df: pd.DataFrame, categories: Sequence[str], clip: float = 3.0, title: str = "",
                          models: Sequence[str] | None = None, datasets: Sequence[str] | None = None):
    """Heatmap of log2(top_share / base_share) per layer × category; text = top_count.

    ``df``: ``k24_ffamp_base`` rows (model, dataset, layer, category, top_count, top_share, base_count,
    base_share). Cells with no top pair are grey "no data" (text "–"); a top pair in a category with no
    base pair is clipped to +``clip``.
    """
    d = shown(df)
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.log2(d["top_share"] / d["base_share"])
    d["log2_lift"] = np.clip(lift.replace([np.inf, -np.inf], np.nan).fillna(-clip).where(
        d["base_share"] > 0, clip), -clip, clip)
    # a cell without any top pair carries no evidence of under-representation: "no data", not −clip
    d.loc[d["top_count"] == 0, "log2_lift"] = np.nan
    d["count_text"] = d["top_count"].map(lambda c: "–" if c == 0 else str(int(c)))
    base = alt.Chart().encode(
        x=alt.X("category:N", sort=list(categories), title=None, axis=alt.Axis(labelAngle=-40)),
        y=alt.Y("layer:O", title=LAYER_TITLE))
    empty = base.mark_rect(color="#eeeeee").encode(
        tooltip=["layer:O", "category:N", alt.Tooltip("top_count:Q", title="top pairs (none: no data)"),
                 "base_count:Q"]).transform_filter("datum.top_count == 0")
    heat = base.mark_rect().transform_filter("datum.top_count > 0").encode(
        color=alt.Color("log2_lift:Q", title="log₂(top / base)",
                        scale=alt.Scale(scheme=theme.DIVERGING, domain=[-clip, clip], reverse=True)),
        tooltip=["layer:O", "category:N", "top_count:Q", alt.Tooltip("top_share:Q", format=".1%"),
                 "base_count:Q", alt.Tooltip("base_share:Q", format=".1%"), alt.Tooltip("log2_lift:Q", format=".2f")])
    txt = base.mark_text(fontSize=theme.FONT_SIZE).encode(
        text="count_text:N",
        color=alt.condition("datum.top_count > 0 && abs(datum.log2_lift) > 1.5", alt.value("white"),
                            alt.value("black")))
    # one block per model, each as tall as its own layer count (a 6-layer model is not stretched to 30)
    order = list(models) if models else sorted(d["model"].unique())
    blocks = []
    for m in order:
        dm = d[d["model"] == m]
        if dm.empty:
            continue
        blocks.append(alt.layer(empty, heat, txt, data=inline_data(dm)).properties(
            width=34 * len(categories), height=20 * int(dm["layer"].nunique())).facet(
            column=alt.Column("dataset:N", title=None, sort=list(datasets) if datasets else "ascending")
        ).properties(title=str(m)))
    ch = alt.vconcat(*blocks, spacing=16)
    return ch.properties(title=title) if title else ch
