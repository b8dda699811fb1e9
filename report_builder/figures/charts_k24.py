"""Pure Altair builders for the K24 figures (``DataFrame -> alt.Chart``; no I/O, no torch).

General builders (annotated heatmaps, scatter, …) live in ``charts.py``; these are the K24-specific
ones: the layer diagrams with scope markers, the scope-map explorer, per-layer change lines, the
category lift heatmap, the norm-ratio band and the LN-dimension scatter.

Data is inlined with `charts.inline_data` (one JSON string per dataset: small specs, fast
validation, independent of Altair's row limit), so every encoding names its type explicitly.
Layers are shown 1-based. Pitfall: the map explorer can carry many rows (examples × layers ×
scopes × n²); it keeps only numeric columns in the main data and looks the token labels up from a
small second table.
"""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from report_builder.figures import theme
from report_builder.figures.charts import inline_data

LAYER_TITLE = "layer (1 = first)"


def _shown(df: pd.DataFrame) -> pd.DataFrame:
    """Layers are 0-based in the tables and shown 1-based, as in the papers (and the K21 charts)."""
    return df.assign(layer=df["layer"] + 1) if "layer" in df.columns else df

SCOPE_STEP_LABELS = {
    "ATB": "ATB (attention block)",
    "ATBFF": "+FF", "ATBFFRES": "+FF+RES", "ATBFFRESLN": "+FF+RES+LN (layer)",
    "ATBLN": "+LN", "ATBLNFF": "+LN+FF", "ATBLNFFRES": "+LN+FF+RES (layer)",
}
COMPONENT_COLOURS = {"FF": theme.CATEGORICAL[0], "RES": theme.CATEGORICAL[1], "LN": theme.CATEGORICAL[2]}


# ---------------------------------------------------------------------------------------------
# Diagram
# ---------------------------------------------------------------------------------------------

_DIAGRAMS = {
    # nodes (label, kind), residual skips (from node index, to node index), scopes (after node index)
    "post": dict(
        nodes=[("x", "io"), ("ATTN", "box"), ("⊕", "add"), ("LN₁", "box"), ("FF", "box"), ("⊕", "add"),
               ("LN₂", "box"), ("y", "io")],
        skips=[(0, 2), (3, 5)],
        scopes=[(3, "ATB"), (4, "ATBFF"), (5, "ATBFFRES"), (6, "ATBFFRESLN")],
    ),
    "pre": dict(
        nodes=[("x", "io"), ("LN₁", "box"), ("ATTN", "box"), ("⊕", "add"), ("LN₂", "box"), ("FF", "box"),
               ("⊕", "add"), ("y", "io")],
        skips=[(0, 3), (3, 6)],
        scopes=[(3, "ATB"), (4, "ATBLN"), (5, "ATBLNFF"), (6, "ATBLNFFRES")],
    ),
}


def layer_diagram(ln_position: str, title: str, width: int = 620, height: int = 130) -> alt.LayerChart:
    """A post-LN or pre-LN layer as boxes and arrows, with a dashed marker after each K24 scope."""
    d = _DIAGRAMS[ln_position]
    step = 1.5
    nodes = pd.DataFrame([dict(k=k, label=lab, kind=kind, x0=k * step, x1=k * step + 1.0, xc=k * step + 0.5)
                          for k, (lab, kind) in enumerate(d["nodes"])])
    boxes = nodes[nodes.kind != "io"].assign(y0=0.2, y1=0.8)
    boxes.loc[boxes.kind == "add", ["x0", "x1"]] = boxes.loc[boxes.kind == "add", ["xc"]].values + [[-0.25, 0.25]]
    boxes.loc[boxes.kind == "add", ["y0", "y1"]] = [[0.3, 0.7]]
    edge_rows = []
    for k in range(len(nodes) - 1):
        a, b = nodes.iloc[k], nodes.iloc[k + 1]
        x_start = a.x1 if a.kind == "box" else (a.xc + 0.25 if a.kind == "add" else a.xc + 0.2)
        x_end = b.x0 if b.kind == "box" else (b.xc - 0.25 if b.kind == "add" else b.xc - 0.2)
        edge_rows.append(dict(edge=f"e{k}", order=0, x=x_start, y=0.5))
        edge_rows.append(dict(edge=f"e{k}", order=1, x=x_end, y=0.5))
    for q, (s, t) in enumerate(d["skips"]):
        xs = nodes.iloc[s].x1 + 0.25 if nodes.iloc[s].kind != "io" else nodes.iloc[s].xc + 0.3
        xt = nodes.iloc[t].xc
        for o, (x, y) in enumerate([(xs, 0.5), (xs, 1.15), (xt, 1.15), (xt, 0.7)]):
            edge_rows.append(dict(edge=f"s{q}", order=o, x=x, y=y))
    edges = pd.DataFrame(edge_rows)
    scope_rows = [dict(scope=s, label=s, x=nodes.iloc[k].x1 + 0.25, y0=-0.25, y1=1.0) for k, s in d["scopes"]]
    scopes = pd.DataFrame(scope_rows)
    xdom = [-0.2, nodes.x1.max() + 0.2]
    X = lambda f: alt.X(f, scale=alt.Scale(domain=xdom), axis=None)  # noqa: E731
    Y = lambda f: alt.Y(f, scale=alt.Scale(domain=[-0.55, 1.35]), axis=None)  # noqa: E731
    base_props = dict(width=width, height=height)
    rect = alt.Chart(inline_data(boxes)).mark_rect(stroke="#555", strokeWidth=1, cornerRadius=3).encode(
        x=X("x0:Q"), x2="x1:Q", y=Y("y0:Q"), y2="y1:Q",
        color=alt.Color("kind:N", scale=alt.Scale(domain=["box", "add"], range=["#eef3f8", "#ffffff"]),
                        legend=None))
    text = alt.Chart(inline_data(nodes.assign(y=0.5))).mark_text(fontSize=13).encode(x=X("xc:Q"), y=Y("y:Q"), text="label:N")
    lines = alt.Chart(inline_data(edges)).mark_line(color="#555", strokeWidth=1.2).encode(
        x=X("x:Q"), y=Y("y:Q"), detail="edge:N", order="order:Q")
    heads = alt.Chart(inline_data(edges[edges.order == edges.groupby("edge").order.transform("max")])).mark_point(
        shape="triangle-right", size=40, filled=True, color="#555").encode(x=X("x:Q"), y=Y("y:Q"))
    rules = alt.Chart(inline_data(scopes)).mark_rule(strokeDash=[4, 3], color=theme.CATEGORICAL[3]).encode(
        x=X("x:Q"), y=Y("y0:Q"), y2="y1:Q")
    labels = alt.Chart(inline_data(scopes)).mark_text(fontSize=11, color=theme.CATEGORICAL[3], dy=8, baseline="top").encode(
        x=X("x:Q"), y=Y("y0:Q"), text="label:N")
    return alt.layer(lines, heads, rect, text, rules, labels).properties(title=title, **base_props)


# ---------------------------------------------------------------------------------------------
# Maps
# ---------------------------------------------------------------------------------------------


def _compact(maps: pd.DataFrame, keys: list[str], digits: int = 3) -> list[dict]:
    """One record per (keys…, i) holding the arrays ``j`` and ``v`` (values rounded), expanded in the
    spec by a Vega-Lite ``flatten`` — about 4× smaller than one record per cell."""
    d = maps.sort_values(keys + ["i", "j"])
    out = []
    for key, g in d.groupby(keys + ["i"], sort=False):
        rec = dict(zip(keys + ["i"], [k.item() if hasattr(k, "item") else k for k in key]))
        rec["j"] = g["j"].astype(int).tolist()
        rec["v"] = g["value"].round(digits).tolist()
        out.append(rec)
    return out


def _token_lookup(maps: pd.DataFrame, example_index: dict | None = None) -> pd.DataFrame:
    """``key`` (= example index × 10000 + position) → ``label`` ("pos:token") and ``token``."""
    ex = maps["example"] if "example" in maps.columns else pd.Series(0, index=maps.index)
    a = pd.DataFrame({"example": ex, "pos": maps["i"], "token": maps["token_i"]})
    b = pd.DataFrame({"example": ex, "pos": maps["j"], "token": maps["token_j"]})
    t = pd.concat([a, b]).drop_duplicates(["example", "pos"])
    e = t["example"].map(example_index) if example_index else t["example"]
    return pd.DataFrame({"key": (e * 10000 + t["pos"]).astype(int),
                         "label": t["pos"].astype(str) + ":" + t["token"].astype(str),
                         "token": t["token"].astype(str)})


def _expand(chart: alt.Chart, toks: pd.DataFrame, example_field: str | None) -> alt.Chart:
    """flatten (j, v) → one row per cell, then look the token labels of i and j up."""
    e = alt.datum[example_field] * 10000 if example_field else 0
    lk = alt.LookupData(data=inline_data(toks), key="key", fields=["label", "token"])
    return chart.transform_flatten(["j", "v"], ["j", "value"]).transform_calculate(
        ki=e + alt.datum.i, kj=e + alt.datum.j
    ).transform_lookup(lookup="ki", from_=lk, **{"as": ["label_i", "token_i"]}).transform_lookup(
        lookup="kj", from_=lk, **{"as": ["label_j", "token_j"]})


def _map_encoding(cell: int, title_axes: bool, show_labels: bool = True) -> dict:
    axis = (alt.Axis(labelFontSize=min(9, max(cell - 1, 5)), labelLimit=80,
                     title=None if not title_axes else alt.Undefined) if show_labels else None)
    return dict(
        x=alt.X("label_j:N", sort=alt.EncodingSortField("j", op="min"),
                title="j (source token)" if title_axes else None, axis=axis),
        y=alt.Y("label_i:N", sort=alt.EncodingSortField("i", op="min"),
                title="i (query token)" if title_axes else None, axis=axis),
        color=alt.Color("value:Q", scale=alt.Scale(scheme=theme.SEQUENTIAL), title="row-normalised value"),
    )


def scope_map_strip(df: pd.DataFrame, scopes: Sequence[str], title: str, cell: int = 11,
                    show_labels: bool = True) -> alt.FacetChart:
    """Small heatmaps of one example and layer, one per scope, in scope order.

    ``df`` has scope, i, j, token_i, token_j, value (one example, one layer).
    """
    n = int(max(df["i"].max(), df["j"].max())) + 1
    base = alt.Chart(inline_data(_compact(df, ["scope"]))).mark_rect()
    return _expand(base, _token_lookup(df.drop(columns=["example"], errors="ignore")), None).encode(
        **_map_encoding(cell, False, show_labels),
        tooltip=[alt.Tooltip("scope:N"), alt.Tooltip("label_i:N", title="i (query)"),
                 alt.Tooltip("label_j:N", title="j (source)"), alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=cell * n, height=cell * n).facet(
        column=alt.Column("scope:N", sort=list(scopes), title=None)
    ).properties(title=title)


def map_explorer(maps: pd.DataFrame, scopes: Sequence[str], title: str, key: str = "m0",
                 cell: int | None = None) -> alt.Chart:
    """Heatmap of one (example, layer, scope) map at a time, chosen by widgets.

    Args:
        maps: rows of ``k24_maps`` for one model: example, layer, scope, i, j, token_i, token_j, value.
        scopes: this model's scopes in order (options of the scope selector).
        title: chart title (model name).
        key: suffix that makes the parameter names unique when several explorers are concatenated.
        cell: pixel size of one cell (default: 14 px, shrunk so the longest example fits ~600 px).

    Data: one record per (example, layer, scope, i) with arrays over ``j`` (see `_compact`); token
    labels come from a small lookup table keyed by ``example_index*10000 + pos``.
    """
    examples = sorted(maps["example"].unique().tolist())
    ex_index = {e: k for k, e in enumerate(examples)}
    n_layers = int(maps["layer"].max()) + 1
    n_max = int(maps["i"].max()) + 1
    cell = cell or max(4, min(14, 600 // n_max))
    main = _shown(maps[["example", "layer", "scope", "i", "j", "value"]])
    main["example"] = main["example"].map(ex_index)
    layer = alt.param(name=f"layer_{key}", value=n_layers // 2 + 1,
                      bind=alt.binding_range(min=1, max=n_layers, step=1, name=f"{title} layer (1 = first) "))
    scope = alt.param(name=f"scope_{key}", value=scopes[0],
                      bind=alt.binding_select(options=list(scopes), name=f"{title} scope "))
    example = alt.param(name=f"example_{key}", value=0,
                        bind=alt.binding_select(options=list(range(len(examples))),
                                                labels=[str(e) for e in examples], name=f"{title} example "))
    base = alt.Chart(inline_data(_compact(main, ["example", "layer", "scope"]))).mark_rect().add_params(
        layer, scope, example).transform_filter(
        (alt.datum.layer == layer) & (alt.datum.scope == scope) & (alt.datum.example == example))
    return _expand(base, _token_lookup(maps, ex_index), "example").encode(
        **_map_encoding(cell, True),
        tooltip=[alt.Tooltip("layer:O", title=LAYER_TITLE), alt.Tooltip("scope:N"),
                 alt.Tooltip("label_i:N", title="i (query)"), alt.Tooltip("label_j:N", title="j (source)"),
                 alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=cell * n_max, height=cell * n_max, title=title)


# ---------------------------------------------------------------------------------------------
# Per-layer lines
# ---------------------------------------------------------------------------------------------


def per_layer_lines(df: pd.DataFrame, y: str, color: str, *, y_title: str, color_sort: Sequence[str] | None = None,
                    color_range: Sequence[str] | None = None, row: str | None = None, column: str | None = None,
                    band: tuple[str, str] | None = None, tooltip: Sequence | None = None,
                    width: int = 260, height: int = 170, title: str = "", y_zero: bool = True,
                    rule_at: float | None = None, independent_x: bool = False,
                    row_sort: Sequence[str] | None = None, column_sort: Sequence[str] | None = None):
    """Line + points of ``y`` against ``layer``, coloured by ``color``, optionally with a band and facets."""
    scale = alt.Scale(domain=list(color_sort), range=list(color_range)) if color_range else (
        alt.Scale(domain=list(color_sort)) if color_sort else alt.Undefined)
    c = alt.Color(f"{color}:N", sort=list(color_sort) if color_sort else alt.Undefined, scale=scale)
    df = _shown(df)
    x = alt.X("layer:Q", title=LAYER_TITLE, axis=alt.Axis(tickMinStep=1, format="d"))
    base = alt.Chart(inline_data(df)).encode(x=x, color=c)
    tt = list(tooltip) if tooltip else ["layer:Q", f"{color}:N", alt.Tooltip(f"{y}:Q", format=".3f")]
    layers = []
    if band:
        layers.append(base.mark_area(opacity=0.18).encode(y=alt.Y(f"{band[0]}:Q"), y2=f"{band[1]}:Q"))
    layers.append(base.mark_line(strokeWidth=1.6).encode(
        y=alt.Y(f"{y}:Q", title=y_title, scale=alt.Scale(zero=y_zero))))
    layers.append(base.mark_point(filled=True, size=28).encode(y=f"{y}:Q", tooltip=tt))
    if rule_at is not None:
        layers.append(alt.Chart(inline_data(df)).mark_rule(color="#999", strokeDash=[3, 3]).encode(
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


# ---------------------------------------------------------------------------------------------
# FF-amp
# ---------------------------------------------------------------------------------------------


def category_lift_heatmap(df: pd.DataFrame, categories: Sequence[str], clip: float = 3.0, title: str = "",
                          models: Sequence[str] | None = None, datasets: Sequence[str] | None = None):
    """Heatmap of log2(top_share / base_share) per layer × category; text = top_count.

    ``df``: ``k24_ffamp_base`` rows (model, dataset, layer, category, top_count, top_share, base_count,
    base_share). Cells with no top pair or no base pair are clipped to ±``clip``.
    """
    d = _shown(df)
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.log2(d["top_share"] / d["base_share"])
    d["log2_lift"] = np.clip(lift.replace([np.inf, -np.inf], np.nan).fillna(-clip).where(
        d["base_share"] > 0, clip), -clip, clip)
    d.loc[(d["top_share"] == 0) & (d["base_share"] == 0), "log2_lift"] = 0.0
    base = alt.Chart(inline_data(d)).encode(
        x=alt.X("category:N", sort=list(categories), title=None, axis=alt.Axis(labelAngle=-35)),
        y=alt.Y("layer:O", title=LAYER_TITLE))
    heat = base.mark_rect().encode(
        color=alt.Color("log2_lift:Q", title="log₂(top / base)",
                        scale=alt.Scale(scheme=theme.DIVERGING, domain=[-clip, clip], reverse=True)),
        tooltip=["layer:O", "category:N", "top_count:Q", alt.Tooltip("top_share:Q", format=".1%"),
                 "base_count:Q", alt.Tooltip("base_share:Q", format=".1%"), alt.Tooltip("log2_lift:Q", format=".2f")])
    txt = base.mark_text(fontSize=9).encode(
        text="top_count:Q",
        color=alt.condition("abs(datum.log2_lift) > 1.5", alt.value("white"), alt.value("black")))
    n_layers = int(d["layer"].max()) + 1
    ch = alt.layer(heat, txt).properties(width=22 * len(categories), height=min(16 * n_layers, 400)).facet(
        row=alt.Row("model:N", title=None, sort=list(models) if models else "ascending"),
        column=alt.Column("dataset:N", title=None, sort=list(datasets) if datasets else "ascending"))
    return ch.resolve_scale(y="independent").properties(title=title) if title else ch.resolve_scale(y="independent")


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


def top_pairs_strip(df: pd.DataFrame, categories: Sequence[str], title: str = "",
                    models: Sequence[str] | None = None, datasets: Sequence[str] | None = None):
    """Each top pair as a point: layer × amp, coloured by category; facets model × dataset."""
    ch = alt.Chart(inline_data(_shown(df))).mark_point(filled=True, size=36, opacity=0.8).encode(
        x=alt.X("layer:Q", title=LAYER_TITLE, axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("amp:Q", title="FF-amp"),
        color=alt.Color("category:N", sort=list(categories), scale=alt.Scale(domain=list(categories))),
        tooltip=["layer:Q", "rank:Q", "token_i:N", "token_j:N", "category:N", alt.Tooltip("amp:Q", format=".3f"),
                 "context:N"],
    ).properties(width=220, height=150).facet(
        row=alt.Row("model:N", title=None, sort=list(models) if models else "ascending"),
        column=alt.Column("dataset:N", title=None, sort=list(datasets) if datasets else "ascending"))
    return ch.properties(title=title) if title else ch


# ---------------------------------------------------------------------------------------------
# LN dimensions
# ---------------------------------------------------------------------------------------------


def ln_dims_scatter(df: pd.DataFrame, n_layers: int, key: str = "ln", title: str = "",
                    models: Sequence[str] | None = None) -> alt.HConcatChart:
    """Per-dimension FF change (x) vs LN weight γ (y), one layer at a time (slider); colour = kept_ratio.

    ``df``: ``k24_ln_dims`` rows for one dataset (model, layer, dim, ff_change, ln_weight,
    ln_out_change, kept_ratio); one panel per model, all driven by one layer slider (a model with
    fewer layers than the slider's value shows its last layer, never an empty panel). The slider
    parameter is declared on the returned top-level chart (a parameter inside a faceted chart that
    is then concatenated breaks Vega-Lite), so nest the result with `alt.vconcat` only via
    `with_layer_slider`-style top-level params, as done here.
    """
    layer = alt.param(name=f"layer_{key}", value=n_layers // 2 + 1,
                      bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer (1 = first) "))
    d = _shown(df[["model", "layer", "dim", "ff_change", "ln_weight", "ln_out_change", "kept_ratio"]])
    d[["ff_change", "ln_weight", "ln_out_change", "kept_ratio"]] = d[
        ["ff_change", "ln_weight", "ln_out_change", "kept_ratio"]].round(4)
    models = list(models) if models else list(dict.fromkeys(d["model"]))
    panels = []
    for m in models:
        dm = d[d["model"] == m]
        last = int(dm["layer"].max()) if len(dm) else 1
        panels.append(alt.Chart(inline_data(dm)).mark_point(filled=True, size=26, opacity=0.75).encode(
            x=alt.X("ff_change:Q", title="FF change (mean |FF output| in dim)"),
            y=alt.Y("ln_weight:Q", title="LN weight γ"),
            color=alt.Color("kept_ratio:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1], clamp=True),
                            title="kept ratio"),
            tooltip=["model:N", "layer:Q", "dim:Q", alt.Tooltip("ff_change:Q", format=".3f"),
                     alt.Tooltip("ln_weight:Q", format=".3f"), alt.Tooltip("ln_out_change:Q", format=".3f"),
                     alt.Tooltip("kept_ratio:Q", format=".2f")],
        ).transform_filter(alt.datum.layer == alt.expr.min(layer, last)).properties(width=240, height=200, title=m))
    ch = alt.hconcat(*panels).add_params(layer)
    return ch.properties(title=title) if title else ch
