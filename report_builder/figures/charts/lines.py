"""A value per layer: one line (or bar group) per model, method, component or scope.

* `per_layer_chart` — line with points (or grouped bars) per ``color`` group, an optional band and an
  optional stroke dash (ours vs the paper's), ordinal 1-based layer axis (K21 Table 8's chart).
* `per_layer_lines` — line + points on a quantitative layer axis with optional band, reference rule
  and row/column facets (the K24 per-layer curves).

Both show layers 1-based (the tables are 0-based). Pitfall: they are kept apart because their specs
differ (ordinal vs quantitative x, layered band order); merging them would change cited hashes.
"""
from __future__ import annotations

from typing import Sequence

import altair as alt
import pandas as pd

from report_builder.figures.charts.data import DEFAULT_WIDTH, LAYER_TITLE, field, inline_data, layer_x, shown, typed


def per_layer_chart(
    df: pd.DataFrame,
    *,
    y: str,
    layer: str = "layer",
    color: str | None = None,
    color_order: Sequence[str] | None = None,
    mark: str = "line",
    one_based: bool = True,
    band: tuple[str, str] | None = None,
    y_title: str | None = None,
    y_domain: tuple[float, float] | None = None,
    zero: bool = False,
    tooltip: Sequence[str] = (),
    y_format: str = ".3f",
    width: int = DEFAULT_WIDTH,
    height: int = 280,
    strokedash: str | None = None,
    rule_at: float | None = None,
    log_y: bool = False,
) -> alt.Chart:
    """A value per layer: one line (with points) or grouped bars per ``color`` group.

    Args:
        df: one row per (group, layer).
        y: numeric column. layer: 0-based layer column (shown 1-based when ``one_based``).
        color: optional group column (e.g. ``model``); color_order: legend order.
        mark: ``"line"`` (line + points) or ``"bar"`` (grouped bars, ``xOffset`` by group).
        band: optional ``(low, high)`` columns drawn as a shaded band behind the line.
        strokedash: optional nominal column mapped to the line dash (e.g. ``report``: ours vs paper).
        rule_at: draw a dashed reference line at this value (the y axis then includes it).
        log_y: a log y axis (for values spanning decades).
    """
    data = df.assign(_layer=df[layer] + (1 if one_based else 0))
    lt = LAYER_TITLE if one_based else "layer"
    x = alt.X("_layer:O", title=lt, axis=alt.Axis(labelAngle=0))
    if y_domain is None and rule_at is not None and len(df):
        lo, hi = min(float(df[y].min()), rule_at), max(float(df[y].max()), rule_at)
        if log_y:
            y_domain = (lo / 1.25, hi * 1.25)
        else:
            pad = 0.08 * (hi - lo or 1.0)
            y_domain = (lo - pad, hi + pad)
    kind = {"type": "log"} if log_y else {}
    yscale = alt.Scale(domain=list(y_domain), nice=False, **kind) if y_domain else alt.Scale(zero=zero, **kind)
    tips = [alt.Tooltip(f"{field(color)}:N", title=color)] if color else []
    tips += [alt.Tooltip("_layer:O", title=lt), alt.Tooltip(f"{field(y)}:Q", title=y_title or y, format=y_format)]
    tips += [alt.Tooltip(typed(df, c), title=c) for c in tooltip]
    enc = {"x": x, "y": alt.Y(f"{field(y)}:Q", title=y_title or y, scale=yscale), "tooltip": tips}
    if color:
        enc["color"] = alt.Color(f"{field(color)}:N", title=color,
                                 sort=list(color_order) if color_order else "ascending")
    if strokedash:
        enc["strokeDash"] = alt.StrokeDash(f"{field(strokedash)}:N", title=strokedash)
    base = alt.Chart(inline_data(data))
    if mark == "bar":
        if color:
            enc["xOffset"] = alt.XOffset(f"{field(color)}:N", sort=list(color_order) if color_order else "ascending")
        chart = base.mark_bar().encode(**enc)
    else:
        chart = base.mark_line(point=True, strokeWidth=2).encode(**enc)
    if band is not None:
        benc = {"x": x, "y": alt.Y(f"{field(band[0])}:Q", scale=yscale), "y2": alt.Y2(f"{field(band[1])}")}
        if color:
            benc["color"] = enc["color"]
        chart = alt.layer(base.mark_area(opacity=0.15).encode(**benc), chart)
    if rule_at is not None:
        chart = alt.layer(chart, base.mark_rule(color="#777", strokeDash=[4, 3]).encode(y=alt.datum(rule_at)))
    return chart.properties(width=width, height=height)


def per_layer_lines(df: pd.DataFrame, y: str, color: str, *, y_title: str, color_sort: Sequence[str] | None = None,
                    color_range: Sequence[str] | None = None, row: str | None = None, column: str | None = None,
                    band: tuple[str, str] | None = None, tooltip: Sequence | None = None,
                    width: int = 260, height: int = 170, title: str = "", y_zero: bool = True,
                    rule_at: float | None = None, independent_x: bool = False, log_y: bool = False,
                    row_sort: Sequence[str] | None = None, column_sort: Sequence[str] | None = None):
    """Line + points of ``y`` against ``layer``, coloured by ``color``, optionally with a band and facets."""
    scale = alt.Scale(domain=list(color_sort), range=list(color_range)) if color_range else (
        alt.Scale(domain=list(color_sort)) if color_sort else alt.Undefined)
    c = alt.Color(f"{color}:N", sort=list(color_sort) if color_sort else alt.Undefined, scale=scale)
    df = shown(df)
    x = layer_x()
    base = alt.Chart(inline_data(df)).encode(x=x, color=c)
    tt = list(tooltip) if tooltip else ["layer:Q", f"{color}:N", alt.Tooltip(f"{y}:Q", format=".3f")]
    layers = []
    if band:
        layers.append(base.mark_area(opacity=0.18).encode(y=alt.Y(f"{band[0]}:Q"), y2=f"{band[1]}:Q"))
    yscale = alt.Scale(type="log") if log_y else alt.Scale(zero=y_zero)
    if band:
        layers[0] = base.mark_area(opacity=0.18).encode(y=alt.Y(f"{band[0]}:Q", scale=yscale), y2=f"{band[1]}:Q")
    layers.append(base.mark_line(strokeWidth=1.6).encode(
        y=alt.Y(f"{y}:Q", title=y_title, scale=yscale)))
    layers.append(base.mark_point(filled=True, size=28).encode(y=f"{y}:Q", tooltip=tt))
    if rule_at is not None:
        layers.append(alt.Chart(base.data).mark_rule(color="#777", strokeDash=[4, 3]).encode(  # same data: facets
            y=alt.datum(rule_at)))
    ch = alt.layer(*layers).properties(width=width, height=height)
    if row or column:
        fkw = {}
        if row:
            fkw["row"] = alt.Row(f"{row}:N", title=None, sort=list(row_sort) if row_sort else "ascending")
        if column:
            fkw["column"] = alt.Column(f"{column}:N", title=None,
                                       sort=list(column_sort) if column_sort else "ascending")
        ch = ch.facet(**fkw)
        if independent_x:
            ch = ch.resolve_scale(x="independent")
    return ch.properties(title=title) if title else ch
