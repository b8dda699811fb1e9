"""Pure chart builders shared by the K21 and K24 figures: ``DataFrame -> alt.Chart`` (no I/O).

Builders (all keyword-configured, all with tooltips, sized for a ~800 px content column):

* `annotated_heatmap` — value printed in every cell, fixed colour domain, optional facet panels
  (K21 Fig. 3 and siblings: layers × token categories, one panel per method).
* `token_map_heatmap` — token-to-token maps (rows = output token ``i``, columns = input token ``j``),
  one panel per method/scope side by side, a layer slider bound to an Altair parameter (K21 Fig. 1,
  K24 map explorer). Data is stored compactly (one record per (layer, i) holding arrays over ``j``,
  one array per panel, expanded by a Vega-Lite ``flatten``; token labels joined by a ``lookup``), so
  6 layers × 60 tokens × 2 panels is ≈ 0.3 MB.
* `scatter` — points with optional colour groups and log axes (K21 Fig. 4).
* `per_layer_chart` — a line (or bar) per group over layers, optional band (K21 Table 8's chart,
  K24 per-layer curves).
* `chain_diagram_svg` — a small hand-written SVG of a chain of blocks with residual skips and
  bracketed spans (K21 Fig. 2; usable for K24's layer diagrams). Returns a string, not a chart.

Conventions: layers are 0-based in every result table; the builders show them 1-based when
``one_based=True`` (the default, as in the papers) by adding a display column. Token labels are
``"pos:token"`` so repeated tokens stay distinct, ordered by position.

Data is embedded inline as one JSON string per dataset (`inline_data`), so every spec is
self-contained, validates fast, and is independent of the active Altair data transformer (whose
default 5,000-row limit would reject map and scatter data);
builders keep specs small instead (compact map layout, rounding; callers subsample points). A renderer
that wants the data out of the page writes the whole spec to a content-hashed file.

Pitfall: Vega-Lite treats ``.`` and ``[`` ``]`` in *field names* as nested access; builders only use
field names they create or that the caller passes, so pass plain column names (hyphens are fine).
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Sequence

import altair as alt
import pandas as pd

from report_builder.figures import theme

theme.enable()

#: Default panel width for single charts (px); fits an 800 px column with a legend.
DEFAULT_WIDTH = 560


def inline_data(data: pd.DataFrame | list[dict]) -> alt.InlineData:
    """Rows as inline Vega-Lite data: one compact JSON *string* with ``format: json``.

    A string keeps the spec small (no per-value indentation when the spec is pretty-printed) and makes
    schema validation O(1) instead of O(rows) — Altair validates inline record arrays element by element,
    which takes seconds for a few thousand rows. DataFrames are sanitised as Altair does (NaN -> null,
    timestamps -> ISO strings).
    """
    if isinstance(data, pd.DataFrame):
        from altair.utils.data import to_values

        data = to_values(data)["values"]
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return alt.InlineData(values=text, format=alt.DataFormat(type="json"))


def _typed(df: pd.DataFrame, col: str) -> str:
    """``"col:Q"`` for numeric columns, ``"col:N"`` otherwise (inline data carries no dtype)."""
    kind = "Q" if pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]) else "N"
    return f"{_field(col)}:{kind}"


def _field(name: str) -> str:
    """Escape a column name for use in a Vega-Lite field definition."""
    return name.replace(".", "\\.").replace("[", "\\[").replace("]", "\\]")


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
    cell_width: int = 30,
    cell_height: int = 18,
    columns: int = 5,
    x_title: str | None = None,
    y_title: str | None = None,
    value_title: str | None = None,
    tooltip_extra: Sequence[str] = (),
    font_size: int = 9,
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
    enc_x = alt.X(f"{_field(x)}:N", sort=list(x_order) if x_order is not None else "ascending", title=xt,
                  axis=alt.Axis(labelAngle=-40, labelLimit=90))
    enc_y = alt.Y(f"{_field(y)}:O", sort=list(y_order) if y_order is not None else "ascending", title=yt)
    tooltip = [alt.Tooltip(_typed(df, c), title=c) for c in ([facet] if facet else [])]
    tooltip += [alt.Tooltip(f"{_field(y)}:O", title=yt), alt.Tooltip(f"{_field(x)}:N", title=xt),
                alt.Tooltip(f"{_field(value)}:Q", title=vt, format=fmt)]
    tooltip += [alt.Tooltip(_typed(df, c), title=c) for c in tooltip_extra]
    rect = alt.Chart().mark_rect().encode(
        x=enc_x, y=enc_y,
        color=alt.Color(f"{_field(value)}:Q", title=vt,
                        scale=alt.Scale(domain=[lo, hi], scheme=scheme, clamp=True),
                        legend=alt.Legend(orient=legend_orient)),
        tooltip=tooltip,
    )
    text = alt.Chart().mark_text(fontSize=font_size).encode(
        x=enc_x, y=enc_y,
        text=alt.Text(f"{_field(value)}:Q", format=fmt),
        color=alt.condition(f"datum[{value!r}] > {threshold}", alt.value("white"), alt.value("#222")),
        tooltip=tooltip,
    )
    layered = alt.layer(rect, text, data=inline_data(df)).properties(
        width=alt.Step(cell_width), height=alt.Step(cell_height)
    )
    if facet is None:
        return layered
    return layered.facet(
        facet=alt.Facet(f"{_field(facet)}:N", sort=list(facet_order) if facet_order else "ascending", title=None),
        columns=columns,
        spacing=12,
    )


def token_labels(positions: Sequence[int] | pd.Series, tokens: Sequence[str] | pd.Series) -> pd.DataFrame:
    """``pos, label`` with ``label = "pos:token"`` (distinct even for repeated tokens), sorted by position."""
    lab = pd.DataFrame({"pos": pd.Series(positions).to_numpy(), "token": pd.Series(tokens).astype(str).to_numpy()})
    lab = lab.drop_duplicates("pos").sort_values("pos").reset_index(drop=True)
    lab["pos"] = lab["pos"].astype(int)
    lab["label"] = lab["pos"].astype(str) + ":" + lab["token"]
    return lab[["pos", "label"]]


def token_map_heatmap(
    df: pd.DataFrame,
    *,
    panel: str = "method",
    panel_order: Sequence[str] | None = None,
    layer: str = "layer",
    i: str = "i",
    j: str = "j",
    token_i: str = "token_i",
    token_j: str = "token_j",
    value: str = "value",
    size: int = 300,
    slider: bool = True,
    one_based: bool = True,
    independent: bool = True,
    scheme: str = theme.SEQUENTIAL,
    value_format: str = ".3f",
    digits: int = 4,
) -> alt.Chart:
    """Token-to-token maps, one panel per ``panel`` value side by side, with a layer slider.

    Rows are output tokens ``i`` (top to bottom), columns input tokens ``j`` (left to right); both axes
    are labelled ``pos:token`` in position order. The colour scale is independent per panel by default
    (ATTN-N and ATTNRESLN-N differ by an order of magnitude).

    Args:
        df: tidy map rows ``layer, <panel>, i, j, token_i, token_j, value`` for one model and example.
        panel: column whose values become panels (e.g. ``method`` or ``scope``); panel_order: which
            values and in what order (default: sorted unique values).
        size: panel width and height in px (cells get ``size / n`` px).
        slider: bind the shown layer to a range slider (Altair parameter ``layer_sel``); otherwise
            layers are stacked vertically, one row of panels per layer.
        one_based: label layers 1..L (the data keeps its 0-based column).
        digits: values are rounded to this many decimals to keep the spec small.

    Returns:
        An ``hconcat`` (slider) or ``vconcat`` of ``hconcat`` rows (no slider) chart.
    """
    panels = list(panel_order) if panel_order is not None else sorted(df[panel].unique())
    labels = token_labels(
        pd.concat([df[i], df[j]], ignore_index=True), pd.concat([df[token_i], df[token_j]], ignore_index=True)
    )
    order = labels["label"].tolist()
    n = max(len(order), 1)
    long = df[df[panel].isin(panels)]
    wide = (
        long.pivot_table(index=[layer, i, j], columns=panel, values=value, aggfunc="first")
        .round(digits)
        .reset_index()
    )
    wide.columns = [str(c) for c in wide.columns]
    wide = wide.rename(columns={layer: "layer", i: "i", j: "j"}).sort_values(["layer", "i", "j"])
    if one_based:
        wide["layer"] = wide["layer"] + 1
    layers = sorted(wide["layer"].unique())
    # compact layout: one record per (layer, i) holding arrays over j (flattened in Vega-Lite)
    pcols = [str(p) for p in panels]
    packed = wide.groupby(["layer", "i"], sort=True).agg({c: list for c in ["j", *pcols]}).reset_index()
    packed[pcols] = packed[pcols].map(lambda v: [None if pd.isna(x) else float(x) for x in v])
    values = [
        {"layer": int(r["layer"]), "i": int(r["i"]), "j": [int(x) for x in r["j"]], **{c: r[c] for c in pcols}}
        for r in packed.to_dict("records")
    ]
    data = inline_data(values)
    fsize = max(5, min(11, int(size / n * 0.9)))
    lookup = alt.LookupData(data=inline_data(labels), key="pos", fields=["label"])

    def one(pcol: str, filt) -> alt.Chart:
        ch = (
            alt.Chart()
            .transform_filter(filt)
            .transform_flatten(["j", *pcols])
            .transform_lookup(lookup="i", from_=lookup, as_=["row"])
            .transform_lookup(lookup="j", from_=lookup, as_=["col"])
            .mark_rect()
            .encode(
                x=alt.X("col:N", sort=order, title="input token j",
                        axis=alt.Axis(labelFontSize=fsize, labelAngle=-90, orient="top", labelLimit=80)),
                y=alt.Y("row:N", sort=order, title="output token i",
                        axis=alt.Axis(labelFontSize=fsize, labelLimit=80)),
                color=alt.Color(f"{_field(pcol)}:Q", title=pcol, scale=alt.Scale(scheme=scheme),
                                legend=alt.Legend(orient="bottom", gradientLength=min(size, 200))),
                tooltip=[
                    alt.Tooltip("layer:O", title="layer"),
                    alt.Tooltip("row:N", title="output i"),
                    alt.Tooltip("col:N", title="input j"),
                    alt.Tooltip(f"{_field(pcol)}:Q", title=pcol, format=value_format),
                ],
            )
            .properties(width=size, height=size, title=pcol)
        )
        return ch

    if slider:
        p = alt.param(
            name="layer_sel",
            value=int(layers[0]),
            bind=alt.binding_range(min=int(layers[0]), max=int(layers[-1]), step=1,
                                   name="Layer (1 = first) " if one_based else "Layer "),
        )
        charts = [one(pc, "datum.layer == layer_sel") for pc in pcols]
        out = alt.hconcat(*charts, spacing=16, data=data).add_params(p)
    else:
        rows = []
        for lay in layers:
            rows.append(alt.hconcat(*[one(pc, f"datum.layer == {int(lay)}").properties(
                title=f"{pc}, layer {int(lay)}") for pc in pcols], spacing=16))
        out = alt.vconcat(*rows, spacing=16, data=data)
    if independent:
        out = out.resolve_scale(color="independent")
    return out


def scatter(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    color: str | None = None,
    color_order: Sequence[str] | None = None,
    color_range: Sequence[str] | None = None,
    log_x: bool = False,
    log_y: bool = False,
    x_title: str | None = None,
    y_title: str | None = None,
    y_domain: tuple[float, float] | None = None,
    tooltip: Sequence[str] = (),
    width: int = DEFAULT_WIDTH,
    height: int = 340,
    opacity: float = 0.45,
    point_size: int = 14,
) -> alt.Chart:
    """Scatter plot with optional colour groups (later groups in ``color_order`` are drawn first).

    Args:
        df: one row per point.
        x, y: numeric columns; ``log_x`` / ``log_y`` put the axis on a log scale.
        color: optional nominal column; color_order: legend order (the first group is drawn on top);
            color_range: colours in that order (default: the theme palette).
        tooltip: extra columns for the tooltip (x, y and colour are always shown).
    """
    data = df
    if color is not None and color_order is not None:
        rank = {c: k for k, c in enumerate(color_order)}
        data = df.assign(_z=df[color].map(lambda c: -rank.get(c, len(rank)))).sort_values("_z", kind="stable")
        data = data.drop(columns="_z")
    enc = {
        "x": alt.X(f"{_field(x)}:Q", title=x_title or x,
                   scale=alt.Scale(type="log") if log_x else alt.Scale(zero=False)),
        "y": alt.Y(f"{_field(y)}:Q", title=y_title or y,
                   scale=alt.Scale(type="log") if log_y else alt.Scale(domain=list(y_domain)) if y_domain else alt.Scale()),
        "tooltip": [alt.Tooltip(_typed(df, c), title=c) for c in tooltip]
        + [alt.Tooltip(f"{_field(x)}:Q", title=x_title or x), alt.Tooltip(f"{_field(y)}:Q", title=y_title or y, format=".2f")],
    }
    if color is not None:
        scale = alt.Scale(domain=list(color_order), range=list(color_range)) if color_order and color_range else (
            alt.Scale(domain=list(color_order)) if color_order else alt.Scale())
        enc["color"] = alt.Color(f"{_field(color)}:N", title=color, scale=scale,
                                 legend=alt.Legend(orient="right", symbolOpacity=1))
        enc["tooltip"].insert(0, alt.Tooltip(f"{_field(color)}:N", title=color))
    return (
        alt.Chart(inline_data(data))
        .mark_circle(size=point_size, opacity=opacity)
        .encode(**enc)
        .properties(width=width, height=height)
    )


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
) -> alt.Chart:
    """A value per layer: one line (with points) or grouped bars per ``color`` group.

    Args:
        df: one row per (group, layer).
        y: numeric column. layer: 0-based layer column (shown 1-based when ``one_based``).
        color: optional group column (e.g. ``model``); color_order: legend order.
        mark: ``"line"`` (line + points) or ``"bar"`` (grouped bars, ``xOffset`` by group).
        band: optional ``(low, high)`` columns drawn as a shaded band behind the line.
        strokedash: optional nominal column mapped to the line dash (e.g. ``report``: ours vs paper).
    """
    data = df.assign(_layer=df[layer] + (1 if one_based else 0))
    lt = "layer (1 = first)" if one_based else "layer"
    x = alt.X("_layer:O", title=lt, axis=alt.Axis(labelAngle=0))
    yscale = alt.Scale(domain=list(y_domain)) if y_domain else alt.Scale(zero=zero)
    tips = [alt.Tooltip(f"{_field(color)}:N", title=color)] if color else []
    tips += [alt.Tooltip("_layer:O", title=lt), alt.Tooltip(f"{_field(y)}:Q", title=y_title or y, format=y_format)]
    tips += [alt.Tooltip(_typed(df, c), title=c) for c in tooltip]
    enc = {"x": x, "y": alt.Y(f"{_field(y)}:Q", title=y_title or y, scale=yscale), "tooltip": tips}
    if color:
        enc["color"] = alt.Color(f"{_field(color)}:N", title=color,
                                 sort=list(color_order) if color_order else "ascending")
    if strokedash:
        enc["strokeDash"] = alt.StrokeDash(f"{_field(strokedash)}:N", title=strokedash)
    base = alt.Chart(inline_data(data))
    if mark == "bar":
        if color:
            enc["xOffset"] = alt.XOffset(f"{_field(color)}:N", sort=list(color_order) if color_order else "ascending")
        chart = base.mark_bar().encode(**enc)
    else:
        chart = base.mark_line(point=True, strokeWidth=2).encode(**enc)
    if band is not None:
        benc = {"x": x, "y": alt.Y(f"{_field(band[0])}:Q", scale=yscale), "y2": alt.Y2(f"{_field(band[1])}")}
        if color:
            benc["color"] = enc["color"]
        chart = alt.layer(base.mark_area(opacity=0.15).encode(**benc), chart)
    return chart.properties(width=width, height=height)


@dataclass(frozen=True)
class Stage:
    """One node of `chain_diagram_svg`: ``kind`` ``"box"`` (a block) or ``"add"`` (a ⊕ node);
    ``note`` lines are printed under the node."""

    label: str
    kind: str = "box"
    note: tuple[str, ...] = ()


def chain_diagram_svg(
    stages: Sequence[Stage],
    *,
    skips: Sequence[tuple[int, int]] = (),
    spans: Sequence[tuple[str, int, int]] = (),
    input_label: str = "x",
    output_label: str = "y",
    title: str = "",
    description: str = "",
    width: int = 760,
) -> str:
    """A left-to-right chain of blocks as a standalone, accessible SVG string (no external assets).

    Args:
        stages: the nodes in order.
        skips: residual connections ``(a, b)``: the input of stage ``a`` is added at stage ``b``
            (which should be an ``"add"`` node), drawn as an arrow above the chain.
        spans: brackets below the chain ``(label, first, last)`` naming what a method or scope covers.
        input_label / output_label: text at the two ends. title / description: ``<title>``/``<desc>``.

    Returns:
        SVG markup using ``currentColor`` for lines and text (follows the page's light/dark theme).
    """
    esc = html.escape
    n = len(stages)
    margin, io_w = 16, 44
    slot = (width - 2 * margin - 2 * io_w) / max(n, 1)
    box_w, box_h, add_r = min(96.0, slot * 0.62), 40, 13
    y_mid = 86
    note_lines = max((len(s.note) for s in stages), default=0)
    span_top = y_mid + box_h / 2 + 18 + 14 * note_lines + 8
    height = int(span_top + 26 * len(spans) + 12)
    cx = [margin + io_w + slot * (k + 0.5) for k in range(n)]

    def left(k):
        return cx[k] - (add_r if stages[k].kind == "add" else box_w / 2)

    def right(k):
        return cx[k] + (add_r if stages[k].kind == "add" else box_w / 2)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-labelledby="d-title d-desc" font-family="{esc(theme.FONT)}" font-size="13">',
        f'<title id="d-title">{esc(title)}</title><desc id="d-desc">{esc(description)}</desc>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>',
        '<g stroke="currentColor" fill="none" stroke-width="1.5">',
    ]
    # arrows along the chain
    out.append(f'<line x1="{margin + io_w - 8}" y1="{y_mid}" x2="{left(0) - 2}" y2="{y_mid}" marker-end="url(#arrow)"/>')
    for k in range(n - 1):
        out.append(f'<line x1="{right(k)}" y1="{y_mid}" x2="{left(k + 1) - 2}" y2="{y_mid}" marker-end="url(#arrow)"/>')
    out.append(f'<line x1="{right(n - 1)}" y1="{y_mid}" x2="{width - margin - io_w + 6}" y2="{y_mid}" marker-end="url(#arrow)"/>')
    # residual skips
    for idx, (a, b) in enumerate(skips):
        xa = (left(a) + (right(a - 1) if a > 0 else margin + io_w - 8)) / 2
        top = y_mid - box_h / 2 - 22 - 10 * idx
        out.append(
            f'<path d="M{xa},{y_mid} L{xa},{top} L{cx[b]},{top} L{cx[b]},{y_mid - add_r - 2}" '
            f'marker-end="url(#arrow)"/>'
        )
    out.append("</g>")
    # nodes
    for k, s in enumerate(stages):
        if s.kind == "add":
            out.append(f'<circle cx="{cx[k]}" cy="{y_mid}" r="{add_r}" fill="#E69F00" fill-opacity="0.18" '
                       f'stroke="currentColor" stroke-width="1.5"/>')
            out.append(f'<text x="{cx[k]}" y="{y_mid + 5}" text-anchor="middle" fill="currentColor" '
                       f'font-size="16">+</text>')
        else:
            out.append(f'<rect x="{cx[k] - box_w / 2}" y="{y_mid - box_h / 2}" width="{box_w}" height="{box_h}" '
                       f'rx="6" fill="#0072B2" fill-opacity="0.14" stroke="currentColor" stroke-width="1.5"/>')
            out.append(f'<text x="{cx[k]}" y="{y_mid + 5}" text-anchor="middle" fill="currentColor" '
                       f'font-weight="600">{esc(s.label)}</text>')
        if s.kind == "add" and s.label:
            out.append(f'<text x="{cx[k] + add_r + 4}" y="{y_mid - add_r - 2}" text-anchor="start" '
                       f'fill="currentColor" font-size="11">{esc(s.label)}</text>')
        for ln, line in enumerate(s.note):
            out.append(f'<text x="{cx[k]}" y="{y_mid + box_h / 2 + 18 + 14 * ln}" text-anchor="middle" '
                       f'fill="currentColor" font-size="11">{esc(line)}</text>')
    out.append(f'<text x="{margin}" y="{y_mid + 5}" fill="currentColor" font-style="italic">{esc(input_label)}</text>')
    out.append(f'<text x="{width - margin}" y="{y_mid + 5}" text-anchor="end" fill="currentColor" '
               f'font-style="italic">{esc(output_label)}</text>')
    # spans (brackets)
    for r, (label, a, b) in enumerate(spans):
        y0 = span_top + 26 * r
        x0, x1 = left(a), right(b)
        out.append(f'<path d="M{x0},{y0 - 6} L{x0},{y0} L{x1},{y0} L{x1},{y0 - 6}" stroke="#009E73" '
                   f'stroke-width="2" fill="none"/>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y0 + 14}" text-anchor="middle" fill="currentColor" '
                   f'font-size="12">{esc(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
