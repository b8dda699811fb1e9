"""Point charts: frequency scatter (K21 Fig. 4), top FF-amplified pairs and the LN-dimension scatter (K24).

Pitfall: callers subsample large point sets (inline data stays in the page); `scatter` draws the
first group of ``color_order`` on top by sorting the rows, so the row order is part of the spec.
"""
from __future__ import annotations

import json

from typing import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from report_builder.figures.charts.data import DEFAULT_WIDTH, field, inline_data, layer_x, shown, typed
from report_builder.precision import published as pub


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
    legend_labels: Mapping[str, str] | None = None,
) -> alt.Chart:
    """Scatter plot with optional colour groups (later groups in ``color_order`` are drawn first).

    Args:
        df: one row per point.
        x, y: numeric columns; ``log_x`` / ``log_y`` put the axis on a log scale.
        color: optional nominal column; color_order: legend order (the first group is drawn on top);
            color_range: colours in that order (default: the theme palette).
        tooltip: extra columns for the tooltip (x, y and colour are always shown).
        legend_labels: a colour group -> the words its legend entry shows (a group that is one glyph, "."),
            the data keeping the group itself.
    """
    data = df
    if color is not None and color_order is not None:
        rank = {c: k for k, c in enumerate(color_order)}
        data = df.assign(_z=df[color].map(lambda c: -rank.get(c, len(rank)))).sort_values("_z", kind="stable")
        data = data.drop(columns="_z")
    x_axis = alt.Undefined
    if log_x and len(df) and (df[x] > 0).any():  # one label per decade: 1, 10, 100, … (never colliding)
        top = int(np.ceil(np.log10(float(df[x].max()))))
        x_axis = alt.Axis(values=[10 ** k for k in range(0, top + 1)], format=",")
    enc = {
        "x": alt.X(f"{field(x)}:Q", title=x_title or x, axis=x_axis,
                   scale=alt.Scale(type="log") if log_x else alt.Scale(zero=False)),
        "y": alt.Y(f"{field(y)}:Q", title=y_title or y,
                   scale=alt.Scale(type="log") if log_y else alt.Scale(domain=list(y_domain)) if y_domain
                   else alt.Scale(zero=False, nice=True)),  # fitted to the data
        "tooltip": [alt.Tooltip(typed(df, c), title=c) for c in tooltip]
        + [alt.Tooltip(f"{field(x)}:Q", title=x_title or x), alt.Tooltip(f"{field(y)}:Q", title=y_title or y, format=".2f")],
    }
    if color is not None:
        scale = alt.Scale(domain=list(color_order), range=list(color_range)) if color_order and color_range else (
            alt.Scale(domain=list(color_order)) if color_order else alt.Scale())
        enc["color"] = alt.Color(f"{field(color)}:N", title=color, scale=scale,
                                 legend=alt.Legend(orient="right", symbolOpacity=1,
                                                   labelExpr=_label_expr(legend_labels) if legend_labels else alt.Undefined))
        enc["tooltip"].insert(0, alt.Tooltip(f"{field(color)}:N", title=color))
    return (
        alt.Chart(inline_data(data))
        .mark_circle(size=point_size, opacity=opacity)
        .encode(**enc)
        .properties(width=width, height=height)
    )


def _label_expr(labels: Mapping[str, str]) -> str:
    """A Vega expression showing ``labels[label]`` for each label it names, else the label."""
    expr = "datum.label"
    for value, shown_as in reversed(list(labels.items())):
        expr = f"datum.label === {json.dumps(value)} ? {json.dumps(shown_as)} : ({expr})"
    return expr


def top_pairs_strip(df: pd.DataFrame, categories: Sequence[str], title: str = "",
                    models: Sequence[str] | None = None, datasets: Sequence[str] | None = None):
    """Each top pair as a point: layer × amp, coloured by category; facets model × dataset. Points carry
    `theme.OUTLINE` (the palette's yellow is faint on white, its blue on the dark scheme)."""
    from report_builder.figures import theme

    ch = alt.Chart(inline_data(shown(df))).mark_point(
        filled=True, size=36, fillOpacity=0.8, stroke=theme.OUTLINE, strokeWidth=0.6).encode(
        x=layer_x(),
        y=alt.Y("amp:Q", title="FF-amp"),
        color=alt.Color("category:N", sort=list(categories), scale=alt.Scale(domain=list(categories)),
                        legend=alt.Legend(orient="bottom", columns=4)),
        tooltip=["layer:Q", "rank:Q", "token_i:N", "token_j:N", "category:N", alt.Tooltip("amp:Q", format=".3f"),
                 "context:N"],
    ).properties(width=220, height=150).facet(
        row=alt.Row("model:N", title=None, sort=list(models) if models else "ascending"),
        column=alt.Column("dataset:N", title=None, sort=list(datasets) if datasets else "ascending"))
    return ch.properties(title=title) if title else ch


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
    from report_builder.figures import theme

    layer = alt.param(name=f"layer_{key}", value=n_layers // 2 + 1,
                      bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer (1 = first) "))
    d = shown(df[["model", "layer", "dim", "ff_change", "ln_weight", "ln_out_change", "kept_ratio"]])
    d[["ff_change", "ln_weight", "ln_out_change", "kept_ratio"]] = d[
        ["ff_change", "ln_weight", "ln_out_change", "kept_ratio"]].round(4)
    models = list(models) if models else list(dict.fromkeys(d["model"]))
    panels = []
    for m in models:
        dm = d[d["model"] == m]
        last = int(dm["layer"].max()) if len(dm) else 1
        panels.append(alt.Chart(inline_data(dm)).mark_point(
                filled=True, size=26, fillOpacity=0.75, stroke=theme.OUTLINE, strokeWidth=0.6).encode(
            x=alt.X("ff_change:Q", title="FF change (mean |FF output| in dim)"),
            y=alt.Y("ln_weight:Q", title="LN weight γ"),
            color=alt.Color("kept_ratio:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1], clamp=True),
                            title="kept ratio"),
            tooltip=["model:N", "layer:Q", "dim:Q", alt.Tooltip("ff_change:Q", format=".3f"),
                     alt.Tooltip("ln_weight:Q", format=".3f"), alt.Tooltip("ln_out_change:Q", format=".3f"),
                     alt.Tooltip("kept_ratio:Q", format=".2f")],
        ).transform_filter(alt.datum.layer == alt.expr.min(layer, last)).properties(
            width=240, height=200, title=alt.Title(_shown_layer_title(m, f"layer_{key}", last))))
    ch = alt.hconcat(*panels).add_params(layer)
    return ch.properties(title=title) if title else ch


def _shown_layer_title(model: str, param: str, last: int) -> alt.ExprRef:
    """``"<model>, layer k of n"`` for the layer a slider-driven panel shows (its last layer when the slider
    is beyond it), so a static export (chart.svg/png, drawn at the slider's first value) says which layer
    it is. The model name is a JSON string literal in the expression (quotes and backslashes escaped)."""
    return alt.ExprRef(f"{json.dumps(str(model))} + ', layer ' + min({param}, {int(last)})"
                       f" + ' of {int(last)}'")


def _window(text: str, lo: int, hi: int, n: int) -> str:
    """``text`` cut to at most ``n`` characters around ``text[lo:hi]`` (kept whole), ``…`` where cut."""
    if len(text) <= n:
        return text
    keep = max(n - 2, hi - lo)  # room for an ellipsis at each end
    start = max(0, min(lo - (keep - (hi - lo)) // 2, len(text) - keep))
    end = min(len(text), start + keep)
    return ("…" if start > 0 else "") + text[start:end] + ("…" if end < len(text) else "")


def fit_context(text: str, n: int) -> str:
    """A pair's context (`stats.context_snippet`) in at most ``n`` characters, keeping both ``⟦…⟧`` marks: cut
    at the ends around them, and also between them (``…``) where the two tokens lie farther apart than fit."""
    if len(text) <= n:
        return text
    opens, closes = text.find("⟦"), text.rfind("⟧")
    if opens < 0 or closes < 0:
        return text[: n - 1] + "…"
    first_end, last_start = text.find("⟧", opens) + 1, text.rfind("⟦")
    if closes + 1 - opens + 2 <= n or last_start < first_end:  # both marks fit in one window
        return _window(text, opens, closes + 1, n)
    left = _window(text[:last_start], opens, first_end, n // 2)
    left = left if left.endswith("…") else left + "…"
    right = _window(text[first_end:], last_start - first_end, closes + 1 - first_end, n - len(left) + 1)
    return left + (right[1:] if right.startswith("…") else right)


def top_pairs_table(df: pd.DataFrame, *, models: Sequence[str], datasets: Sequence[str], per_layer: int,
                    key: str = "top", context_chars: int = 64) -> alt.Chart:
    """The top ``per_layer`` pairs of one (model, dataset, layer) at a time, as a text table with widgets.

    ``df``: ``k24_ffamp_pairs`` rows (0-based ``layer``); the model, dataset and layer (1-based) are
    chosen with a select / select / slider, so the page shows a few rows instead of every layer's,
    and the title of the (static) table names what it shows.
    """
    from report_builder.figures import theme

    d = shown(df[df["rank"] <= per_layer])
    ctxt = d["context"].astype(str)
    rows = pd.DataFrame({
        "model": d["model"].astype(str), "dataset": d["dataset"].astype(str), "layer": d["layer"].astype(int),
        "rank": d["rank"].astype(int).astype(str),
        "pair": d["token_i"].astype(str) + " ← " + d["token_j"].astype(str),
        "category": d["category"].astype(str), "amp": d["amp"].map(lambda v: f"{pub(v, '.3f')}"),
        "context": ctxt.map(lambda t: fit_context(t, context_chars)),
    })
    # the rows a (model, dataset, layer) has: top_k of the build may be below per_layer, and a layer may
    # keep fewer pairs than top_k; the title says the number shown, never a constant
    nested: dict = {}
    for (m, ds, lay), g in rows.groupby(["model", "dataset", "layer"]):
        nested.setdefault(str(m), {}).setdefault(str(ds), {})[str(int(lay))] = int(len(g))
    shown_rows = max((n for per in nested.values() for by in per.values() for n in by.values()), default=1)
    # a model with fewer layers than the slider shows its last layer (never an empty table)
    rows["last"] = rows.groupby(["model", "dataset"])["layer"].transform("max")
    n_layers = int(d["layer"].max()) if len(d) else 1
    layer = alt.param(name=f"layer_{key}", value=n_layers // 2 + 1,
                      bind=alt.binding_range(min=1, max=n_layers, step=1, name="layer (1 = first) "))
    model = alt.param(name=f"model_{key}", value=models[0], bind=alt.binding_select(options=list(models), name="model "))
    dataset = alt.param(name=f"dataset_{key}", value=datasets[0],
                        bind=alt.binding_select(options=list(datasets), name="dataset "))
    cols = [("rank", 24, "right"), ("pair", 40, "left"), ("category", 250, "left"), ("amp", 400, "right"),
            ("context", 420, "left")]
    width = 420 + int(context_chars * 0.55 * theme.FONT_SIZE)
    y = alt.Y("rank:O", axis=None, sort=[str(k) for k in range(1, shown_rows + 1)],
              scale=alt.Scale(domain=[str(k) for k in range(1, shown_rows + 1)]))
    base = alt.Chart(inline_data(rows)).transform_filter(
        (alt.datum.layer == alt.expr.min(layer, alt.datum.last)) & (alt.datum.model == model)
        & (alt.datum.dataset == dataset))
    # token text (▁, ⟦…⟧) in `theme.TOKEN_FONT`: with the plain font the static PNG set it in a serif fallback
    cells = [base.mark_text(align=align, baseline="middle", fontSize=theme.FONT_SIZE, x=x,
                            **({"font": theme.TOKEN_FONT} if name in ("pair", "context") else {}),
                            limit=(width - x) if name == "context" else (205 if name == "pair" else 0)).encode(
        y=y, text=f"{name}:N") for name, x, align in cols]
    heads = [alt.Chart(inline_data([{"t": name}])).mark_text(
        align=align, baseline="bottom", fontSize=theme.FONT_SIZE, fontWeight="bold", x=x, y=-6).encode(text="t:N")
        for name, x, align in cols]
    last = json.dumps({str(m): int(g["layer"].max()) for m, g in rows.groupby("model")})
    at = f"min(layer_{key}, {last}[model_{key}])"
    n_expr = f"((({json.dumps(nested)}[model_{key}] || {{}})[dataset_{key}] || {{}})[{at}] || 0)"
    title = alt.Title(alt.ExprRef(f"'Top ' + {n_expr} + ' FF-amplified pairs: ' + model_{key} + ' on ' + dataset_{key}"
                                  f" + ', layer ' + {at}"))
    return alt.layer(*cells, *heads).add_params(layer, model, dataset).properties(
        width=width, height=20 * shown_rows, title=title)
