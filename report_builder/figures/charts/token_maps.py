"""Token-to-token maps A[i, j]: K21 Fig. 1 panels, K24 scope strips and the K24 scope-map explorer.

* `token_map_heatmap` — one panel per method/scope side by side, a layer slider bound to an Altair
  parameter (K21 Fig. 1). Data is stored compactly (one record per (layer, i) holding arrays over
  ``j``, one array per panel, expanded by a Vega-Lite ``flatten``; token labels joined by a
  ``lookup``), so 6 layers × 60 tokens × 2 panels is ≈ 0.3 MB.
* `scope_map_strip` — small maps of one example and layer, one per scope (K24 Fig. 1).
* `map_explorer` — one (example, layer, scope) map at a time, chosen by widgets (K24 maps).

Rows are output/query tokens ``i``, columns input/source tokens ``j``, labelled ``pos:token``.
Pitfall: the explorer can carry many rows (examples × layers × scopes × n²); it keeps only numeric
columns in the main data and looks the token labels up from a small second table.
"""
from __future__ import annotations

import json

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from report_builder.figures import theme
from report_builder.schema import example_order
from report_builder.tokens import visible_controls
from report_builder.figures.charts.data import LAYER_TITLE, field, inline_data, shown, token_labels


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
    label: str = "",
    unit: str = "",
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
        label: prefix of every panel title (e.g. the model), so an exported panel says what it shows;
            the panel title also names the layer shown (the slider's value).
        unit: what a cell is (e.g. ``raw norm``), added to each colour legend's title: ``ATTN-N (raw norm)``.

    Returns:
        An ``hconcat`` (slider) or ``vconcat`` of ``hconcat`` rows (no slider) chart.
    """
    panels = list(panel_order) if panel_order is not None else sorted(df[panel].unique())
    labels = token_labels(
        pd.concat([df[i], df[j]], ignore_index=True), pd.concat([df[token_i], df[token_j]], ignore_index=True)
    )
    order = labels["label"].tolist()
    n = max(len(order), 1)
    size = max(size, int(n * (theme.FONT_SIZE + 2)))  # a token label per row at full text size
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
    fsize = theme.FONT_SIZE
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
                        axis=alt.Axis(labelFontSize=fsize, labelAngle=-90, orient="top", labelLimit=110)),
                y=alt.Y("row:N", sort=order, title="output token i",
                        axis=alt.Axis(labelFontSize=fsize, labelLimit=110)),
                color=alt.Color(f"{field(pcol)}:Q", title=f"{pcol} ({unit})" if unit else pcol,
                                scale=alt.Scale(scheme=scheme),
                                legend=alt.Legend(orient="bottom", gradientLength=min(size, 200))),
                tooltip=[
                    alt.Tooltip("layer:O", title="layer"),
                    alt.Tooltip("row:N", title="output i"),
                    alt.Tooltip("col:N", title="input j"),
                    alt.Tooltip(f"{field(pcol)}:Q", title=pcol, format=value_format),
                ],
            )
            .properties(width=size, height=size,
                        title=alt.Title(alt.ExprRef(f"{json.dumps(label + pcol + ', layer ')} + layer_sel"))
                        if slider else f"{label}{pcol}")
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
                title=f"{label}{pc}, layer {int(lay)}") for pc in pcols], spacing=16))
        out = alt.vconcat(*rows, spacing=16, data=data)
    if independent:
        out = out.resolve_scale(color="independent")
    return out


def _compact(maps: pd.DataFrame, keys: list[str], digits: int = 3) -> list[dict]:
    """One record per (keys…, i) holding the arrays ``j`` and ``v`` (values rounded), expanded in the
    spec by a Vega-Lite ``flatten`` — about 4× smaller than one record per cell.

    Vectorised: rows sorted by (keys…, i, j) are cut where the group key changes (the same records,
    in the same order, as a ``groupby`` over the sorted frame)."""
    cols = keys + ["i"]
    d = maps.sort_values(cols + ["j"]).dropna(subset=cols)
    if d.empty:
        return []
    change = np.zeros(len(d), dtype=bool)
    change[0] = True
    for c in cols:
        a = d[c].to_numpy()
        change[1:] |= a[1:] != a[:-1]
    starts = np.flatnonzero(change)
    key_vals = [d[c].iloc[starts].tolist() for c in cols]
    js = np.split(d["j"].astype(int).to_numpy(), starts[1:])
    vs = np.split(d["value"].round(digits).to_numpy(), starts[1:])
    out = []
    for g in range(len(starts)):
        rec = {c: key_vals[k][g] for k, c in enumerate(cols)}
        rec["j"] = js[g].tolist()
        rec["v"] = vs[g].tolist()
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


def _map_encoding(cell: int, title_axes: bool, show_labels: bool = True,
                  value_title: str = "row-normalised value", legend_below: bool = False) -> dict:
    axis = (alt.Axis(labelFontSize=theme.FONT_SIZE, labelLimit=110,
                     title=None if not title_axes else alt.Undefined) if show_labels else None)
    return dict(
        x=alt.X("label_j:N", sort=alt.EncodingSortField("j", op="min"),
                title="j (source token)" if title_axes else None, axis=axis),
        y=alt.Y("label_i:N", sort=alt.EncodingSortField("i", op="min"),
                title="i (query token)" if title_axes else None, axis=axis),
        color=alt.Color("value:Q", scale=alt.Scale(scheme=theme.SEQUENTIAL), title=value_title,
                        legend=alt.Legend(orient="bottom") if legend_below else alt.Undefined),
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
        facet=alt.Facet("scope:N", sort=list(scopes), title=None, header=alt.Header(labelFontSize=theme.FONT_SIZE + 1)),
        columns=2 if show_labels else len(scopes),
    ).properties(title=title)


MAP_FIT_PX = theme.PAGE_WIDTH - 140
"""Width the explorer's cells may take so that the map, its token labels (110 px) and axis title fit
`theme.PAGE_WIDTH` (wider, the page scales the chart and its text down)."""


def map_explorer(maps: pd.DataFrame, scopes: Sequence[str], title: str, key: str = "m0",
                 cell: int | None = None, *, value_title: str = "row-normalised value",
                 start: tuple[int, str, int] | None = None, token_limit: int | None = None) -> alt.Chart:
    """Heatmap of one (example, layer, scope) map at a time, chosen by widgets.

    Args:
        maps: rows of ``k24_maps`` for one model: example, layer, scope, i, j, token_i, token_j, value.
        scopes: this model's scopes in order (options of the scope selector).
        title: chart title (model name).
        key: suffix that makes the parameter names unique when several explorers are concatenated.
        cell: pixel size of one cell (default: 14 px, shrunk so the longest example fits `MAP_FIT_PX`, never
            below the 12 px text: one token label per row). The map is sized by its cells (a Vega-Lite
            ``step``), so it is as large as the example shown, and a phone scrolls it at full size instead of
            squeezing 64 labels into 280 px.
        token_limit: the token limit the examples were cut to (`schema.EXAMPLE_TOKENS`): an example that
            reaches it is said to be its text's first ``token_limit`` tokens under the title.
        value_title: the colour legend's title (what ``value`` is: row-normalised or raw norms).
        start: the (layer shown 1-based, scope, example index) shown first (default: the middle
            layer, the first scope, the first example). Layers that are not consecutive get a
            selector instead of the slider.

    Data: one record per (example, layer, scope, i) with arrays over ``j`` (see `_compact`); token
    labels come from a small lookup table keyed by ``example_index*10000 + pos``.
    """
    examples = example_order(maps["example"].unique().tolist())
    ex_index = {e: k for k, e in enumerate(examples)}
    n_layers = int(maps["layer"].max()) + 1
    n_max = int(maps["i"].max()) + 1
    cell = cell or min(theme.FONT_SIZE + 2, max(theme.FONT_SIZE, MAP_FIT_PX // max(n_max, 1)))
    main = shown(maps[["example", "layer", "scope", "i", "j", "value"]])
    main["example"] = main["example"].map(ex_index)
    present = sorted(int(x) + 1 for x in maps["layer"].unique())
    first_layer, first_scope, first_example = start or (n_layers // 2 + 1, scopes[0], 0)
    layer_name = f"{title} layer (1 = first) "
    layer = alt.param(name=f"layer_{key}", value=first_layer,
                      bind=alt.binding_range(min=present[0], max=n_layers, step=1, name=layer_name)
                      if present == list(range(present[0], n_layers + 1))
                      else alt.binding_select(options=present, name=layer_name))
    scope = alt.param(name=f"scope_{key}", value=first_scope,
                      bind=alt.binding_select(options=list(scopes), name=f"{title} scope "))
    example = alt.param(name=f"example_{key}", value=first_example,
                        bind=alt.binding_select(options=list(range(len(examples))),
                                                labels=[visible_controls(str(e)) for e in examples],  # text: no
                                                name=f"{title} example "))  # bidi override or invisible character
    base = alt.Chart(inline_data(_compact(main, ["example", "layer", "scope"]))).mark_rect().add_params(
        layer, scope, example).transform_filter(
        (alt.datum.layer == layer) & (alt.datum.scope == scope) & (alt.datum.example == example))
    return _expand(base, _token_lookup(maps, ex_index), "example").encode(
        **_map_encoding(cell, True, value_title=value_title, legend_below=True),
        tooltip=[alt.Tooltip("layer:O", title=LAYER_TITLE), alt.Tooltip("scope:N"),
                 alt.Tooltip("label_i:N", title="i (query)"), alt.Tooltip("label_j:N", title="j (source)"),
                 alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=alt.Step(cell), height=alt.Step(cell),
                 title=alt.Title(alt.ExprRef(f"[{json.dumps(title + ' — scope ')} + scope_{key} + ', layer ' + layer_{key}"
                                             f" + ', example ' + (example_{key} + 1), "
                                             f"{_length_note(maps, ex_index, f'example_{key}', token_limit)}]")))


def _length_note(maps: pd.DataFrame, ex_index: dict, param: str, limit: int | None) -> str:
    """The title's second line (an expression) for the example shown: its number of tokens, and, when it
    reaches ``limit``, that these are the first ``limit`` tokens of its text (the rest is not drawn)."""
    n = (maps.groupby("example")["i"].max() + 1).astype(int)
    counts = json.dumps({str(ex_index[e]): int(v) for e, v in n.items()})
    text = f"{counts}[{param}] + ' tokens'"
    if limit:
        text = (f"{counts}[{param}] >= {int(limit)} ? 'the first {int(limit)} tokens of its text (the limit of "
                f"the examples; the rest is not drawn)' : {text}")
    return f"({text})"
