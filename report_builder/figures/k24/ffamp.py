"""K24 FF-amplified token pairs: the top pairs (table + strip chart) and their categories vs base rates.

FF-amp[i, j] = Â_after − Â_before with the layout's ``ff_before`` / ``ff_after`` scopes (computed in
`report_builder.stats.maps`; the top pairs in `stats.top_pairs`). Categories and their order come from
`schema.PAIR_CATEGORIES`.
Pitfall: category shares are pooled from counts (`stats.k24_figures.category_lift`), not averaged
over layers, so a layer with few pairs does not weigh as much as one with many.
"""
from __future__ import annotations

import altair as alt

from report_builder import schema
from report_builder.stats import k24_figures as figstats
from report_builder.figures.charts import bars, heatmap, points
from report_builder.figures.k24 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult


def build_ffamp_top(ctx: FigureContext, per_layer: int = 10) -> FigureResult:
    """k24-ffamp-top: the top FF-amplified pairs (table: top ``per_layer`` per layer; chart: all kept)."""
    p = sel.result_table(ctx, "k24_ffamp_pairs")
    models = sel.model_order(ctx, p["model"].unique())
    datasets = sel.dataset_order(ctx, p["dataset"].unique())
    p = p.assign(_m=p["model"].map(models.index), _d=p["dataset"].map(datasets.index))
    p = p.sort_values(["_m", "_d", "layer", "rank"]).drop(columns=["_m", "_d"]).reset_index(drop=True)
    strip = points.top_pairs_strip(p, schema.PAIR_CATEGORIES, models=models, datasets=datasets)
    # the pairs themselves: one (model, dataset, layer) at a time, chosen with widgets; the CSV has every row
    table = points.top_pairs_table(p, models=models, datasets=datasets, per_layer=per_layer)
    chart = alt.vconcat(table, strip, spacing=24)
    reading = readings.top_pairs_reading(p["category"].value_counts(normalize=True), p.loc[p["amp"].idxmax()])
    return FigureResult(data=p, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(datasets), params={"rows_per_layer_in_table": per_layer,
                                                         "k": int(p.groupby(["model", "dataset", "layer"]).size().max())})


def build_ffamp_categories(ctx: FigureContext) -> FigureResult:
    """k24-ffamp-categories: pair categories among FF-amplified pairs vs their base rates."""
    b = sel.result_table(ctx, "k24_ffamp_base")
    models = sel.model_order(ctx, b["model"].unique())
    cats = list(schema.PAIR_CATEGORIES)
    chart = alt.vconcat(
        bars.pooled_share_bars(b, cats, title="Pooled over layers and datasets", models=models),
        heatmap.category_lift_heatmap(b, cats, title="Per layer: log2(share among top pairs / base rate); text = count; grey = no top pair (no data)",
                                 models=models, datasets=sel.dataset_order(ctx, b["dataset"].unique())),
        spacing=20,
    ).resolve_scale(color="independent")
    reading = readings.lift_reading([(m, *figstats.category_lift(b, m)) for m in models])
    return FigureResult(data=b, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(sel.dataset_order(ctx, b["dataset"].unique())),
                        params={"categories": cats, "lift_clip_log2": 3.0})
