"""K24 residual and norm figures: FF output vs residual norm, and FF's per-dimension change vs LN's γ.

Pitfall: ``k24-ln-dims`` reads one dataset (the first configured one with rows); the norm that
follows FF differs by layout (post-LN LN₂, pre-LN the next layer's LN₁), which the analysis resolved.
"""
from __future__ import annotations

import altair as alt

from report_builder.stats import k24_figures as figstats
from report_builder.figures.charts import lines, points
from report_builder.figures.k24 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult


def build_res_norms(ctx: FigureContext) -> FigureResult:
    """k24-res-norms: ‖FF output‖ / ‖residual‖ per layer (median and 10–90 % band), every model."""
    r = sel.result_table(ctx, "k24_res_norms")
    models = sel.model_order(ctx, r["model"].unique())
    lo, hi = float(r["ratio_q10"].min()), float(r["ratio_q90"].max())
    log = bool(lo > 0 and hi / lo > 10)  # values spanning decades: a log axis keeps the ones near 1 readable
    chart = lines.per_layer_lines(r, "ratio_q50", "model", y_title="FF / residual norm" + (" (log)" if log else "") + "; dashed: 1", rule_at=1.0, log_y=log, y_zero=False,
                               color_sort=models, column="dataset", band=("ratio_q10", "ratio_q90"),
                               column_sort=sel.dataset_order(ctx, r["dataset"].unique()),
                               tooltip=["model:N", "dataset:N", "layer:Q",
                                        alt.Tooltip("ratio_q10:Q", format=".3f"),
                                        alt.Tooltip("ratio_q50:Q", format=".3f"),
                                        alt.Tooltip("ratio_q90:Q", format=".3f"),
                                        alt.Tooltip("ratio_mean:Q", format=".3f"),
                                        alt.Tooltip("ff_norm_mean:Q", format=".2f"),
                                        alt.Tooltip("res_norm_mean:Q", format=".2f")])
    reading = readings.res_norms_reading([(m, r[r["model"] == m]) for m in models])
    return FigureResult(data=r, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(sel.dataset_order(ctx, r["dataset"].unique())))


def build_ln_dims(ctx: FigureContext) -> FigureResult:
    """k24-ln-dims: FF's change per dimension vs the following norm's weight, on the primary dataset."""
    t = sel.result_table(ctx, "k24_ln_dims")
    models = sel.model_order(ctx, t["model"].unique())
    dataset = sel.dataset_order(ctx, t["dataset"].unique())[0]
    d = t[t["dataset"] == dataset]
    summ = figstats.ln_dims_summary(d)
    n_layers = int(d["layer"].max()) + 1
    scatter = points.ln_dims_scatter(d, n_layers, title=f"Per dimension, one layer ({dataset})", models=models)
    long = summ.melt(id_vars=["model", "layer"], value_vars=["kept_share", "rho_ff_gamma"], var_name="statistic")
    long["statistic"] = long["statistic"].map({"kept_share": "Σ LN-output change / Σ FF change",
                                               "rho_ff_gamma": "Spearman ρ(FF change, |γ|)"})
    per_layer = lines.per_layer_lines(long, "value", "model", y_title="", color_sort=models, column="statistic",
                               y_zero=False, width=220, height=150, title="Per layer summary",
                               tooltip=["model:N", "layer:Q", "statistic:N", alt.Tooltip("value:Q", format=".3f")])
    chart = alt.vconcat(scatter, per_layer, spacing=20).resolve_scale(color="independent")
    reading = readings.ln_dims_reading(dataset, [(m, summ[summ["model"] == m]) for m in models])
    return FigureResult(data=d, chart=chart, reading=reading, models=tuple(models), datasets=(dataset,),
                        params={"dataset": dataset, "kept_share": "Σ_dim ln_out_change / Σ_dim ff_change"})
