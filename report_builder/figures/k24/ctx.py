"""K24 contextualization-change figures: through FF, through each component, cumulative, every model.

Change = 1 − Spearman ρ between two scopes' maps (``k24_ctx``). Component order and colours come from
the layouts in `report_builder.schema`; the cancellation numbers from `stats.k24_figures`.
Pitfall: a model's "after FF" and "whole layer" scopes differ by layout; ask its `Layout`.
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from report_builder import schema
from report_builder.stats import headlines, k24_figures as figstats
from report_builder.figures import snippets, theme
from report_builder.figures.charts import lines
from report_builder.figures.k24 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured

#: Every component of every layout, in layout order (FF, RES, LN, …), with its colour; a chart's
#: legend lists those present in its data, in this order.
COMPONENTS: tuple[str, ...] = tuple(dict.fromkeys(c for lay in schema.LAYOUTS for c in lay.components))
COMPONENT_COLOURS = dict(zip(COMPONENTS, theme.CATEGORICAL))


def _ctx(ctx: FigureContext) -> pd.DataFrame:
    return sel.result_table(ctx, "k24_ctx")


def _ctx_ff_chart(c: pd.DataFrame, models, datasets, title=""):
    d = c[(c["kind"] == "component") & (c["component"] == "FF")].copy()
    d["lo"] = (d["change"] - d["change_sd"].fillna(0)).clip(lower=0)
    d["hi"] = d["change"] + d["change_sd"].fillna(0)
    ch = lines.per_layer_lines(d, "change", "model", y_title="change through FF (1 − ρ)", color_sort=models,
                            column="dataset", column_sort=datasets, band=("lo", "hi"), title=title,
                            tooltip=["model:N", "dataset:N", "layer:Q", alt.Tooltip("change:Q", format=".3f"),
                                     alt.Tooltip("change_sd:Q", format=".3f"), "n_seqs:Q"])
    return d, ch


def build_ctx_ff(ctx: FigureContext) -> FigureResult:
    """k24-ctx-ff: change of the maps through FF per layer, every model, one panel per dataset."""
    c = _ctx(ctx)
    models = sel.model_order(ctx, c["model"].unique())
    d, chart = _ctx_ff_chart(c, models, sel.dataset_order(ctx, c["dataset"].unique()))
    reading = readings.ff_change_reading(d.groupby("model")["change"].mean(), d.loc[d["change"].idxmax()], models)
    return FigureResult(data=d.drop(columns=["lo", "hi"]), chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(sel.dataset_order(ctx, d["dataset"].unique())),
                        params={"band": "± 1 SD over sequences"})


def _components_chart(c: pd.DataFrame, models, datasets, title=""):
    d = c[(c["kind"] == "component") & c["model"].isin(models)].copy()
    shown = [k for k in COMPONENTS if k in set(d["component"])]
    ch = lines.per_layer_lines(d, "change", "component", y_title="change (1 − ρ)", color_sort=shown,
                            color_range=[COMPONENT_COLOURS[k] for k in shown],
                            row="model", column="dataset", title=title, independent_x=True,
                            row_sort=models, column_sort=datasets,
                            tooltip=["model:N", "dataset:N", "layer:Q", "component:N", "from_scope:N",
                                     "to_scope:N", alt.Tooltip("change:Q", format=".3f"), "n_seqs:Q"])
    return d, ch


def build_ctx_components(ctx: FigureContext) -> FigureResult:
    """k24-ctx-components: change through each component per layer, primary models × datasets."""
    c = _ctx(ctx)
    models = sel.primaries(ctx, c["model"].unique())
    d, chart = _components_chart(c, models, sel.dataset_order(ctx, c["dataset"].unique()))
    lays = sel.layouts(ctx, c)
    reading = readings.components_reading([(m, figstats.component_means(d, m), lays[m]) for m in models])
    return FigureResult(data=d, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(sel.dataset_order(ctx, d["dataset"].unique())))


def _cumulative_chart(c: pd.DataFrame, models, lays, datasets, title=""):
    d = c[(c["kind"] == "cumulative") & c["model"].isin(models)].copy()
    starts = {lay.scopes[0] for lay in schema.LAYOUTS}
    sort = [s for s in sel.scope_sort([lays[m] for m in models]) if s not in starts]
    d = d.rename(columns={"to_scope": "scope"})
    ch = lines.per_layer_lines(d, "change", "scope", y_title="change from ATB (1 − ρ)", color_sort=sort,
                            row="model", column="dataset", title=title, independent_x=True,
                            row_sort=models, column_sort=datasets,
                            tooltip=["model:N", "dataset:N", "layer:Q", "component:N",
                                     alt.Tooltip("change:Q", format=".3f"), "n_seqs:Q"])
    return d.rename(columns={"scope": "to_scope"}), ch


def _cancellation_reading(ctx: FigureContext, c: pd.DataFrame, models, lays, datasets) -> str:
    """Per model, on the primary dataset (the Home page's headline, from the same function)."""
    rows = []
    for m in models:
        cm = c[c["model"] == m]
        ds = next((d for d in datasets if (cm["dataset"] == d).any()), None)
        if ds is None:
            continue
        cum = cm[(cm["kind"] == "cumulative") & (cm["dataset"] == ds)].groupby("to_scope")["change"].mean()
        path = {**cum.to_dict(), lays[m].scopes[0]: 0.0}
        rows.append((m, lays[m], ds, headlines.cancellation({"models": ctx.tables.get("models"), "k24_ctx": c}, m, [ds]), path))
    return readings.cancellation_reading(rows)


def build_ctx_cumulative(ctx: FigureContext) -> FigureResult:
    """k24-ctx-cumulative: change from ATB to each later scope per layer (the cancellation)."""
    c = _ctx(ctx)
    models = sel.primaries(ctx, c["model"].unique())
    lays = sel.layouts(ctx, c)
    d, chart = _cumulative_chart(c, models, lays, sel.dataset_order(ctx, c["dataset"].unique()))
    return FigureResult(data=d, chart=chart, reading=_cancellation_reading(ctx, c, models, lays, sel.dataset_order(ctx, c["dataset"].unique())), models=tuple(models),
                        datasets=tuple(sel.dataset_order(ctx, d["dataset"].unique())))


def build_models(ctx: FigureContext) -> FigureResult:
    """k24-models: the three contextualization figures for every configured model and dataset."""
    c = _ctx(ctx)
    models = sel.model_order(ctx, c["model"].unique())
    if len(models) < 1:
        raise NotConfigured("k24-models needs K24 results for at least one model", snippets.K24_MANY)
    lays = sel.layouts(ctx, c)
    ds = sel.dataset_order(ctx, c["dataset"].unique())
    _, ff = _ctx_ff_chart(c, models, ds, title="Change through FF")
    _, comp = _components_chart(c, models, ds, title="Change through each component")
    _, cum = _cumulative_chart(c, models, lays, ds, title="Cumulative change from ATB")
    chart = alt.vconcat(ff, comp, cum, spacing=28).resolve_scale(color="independent")
    d = c[c["model"].isin(models)]
    return FigureResult(data=d, chart=chart, reading=_cancellation_reading(ctx, c, models, lays, sel.dataset_order(ctx, c["dataset"].unique())), models=tuple(models),
                        datasets=tuple(sel.dataset_order(ctx, d["dataset"].unique())))
