"""K21 mixing-ratio tables: Table 2 (every model), Table 5 (variants), Table 6 (datasets), Table 7 (seeds).

Statistics come from `report_builder.stats.k21`; formatting from `k21.tables`; prose from
`k21.readings`. Pitfall: Table 2 always includes the primary encoder, even when it is not in
``roles.encoders``, and lists configured models without rows under ``params["missing"]``.
"""
from __future__ import annotations

import pandas as pd

from report_builder import papers, schema
from report_builder.stats import k21 as st
from report_builder.figures import snippets
from report_builder.figures.k21 import readings, selection as sel, tables
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured
from report_builder.precision import published as pub


UNITS = {c: schema.PERCENT for c in ("mean", "max", "min")}
"""The units of the mixing-ratio statistics tables' data (tab2, tab5, tab6)."""
SEED_GROUP_UNITS = {**UNITS, "sd": schema.PERCENT}
"""The units of tab7's data: the statistics and their SD over the seed group."""


def build_tab2(ctx: FigureContext) -> FigureResult:
    """K21 Table 2: mean/max/min mixing ratio per method for every analysed model, primary dataset."""
    primary, ds = sel.primary(ctx)
    sel.rows(ctx, "k21_tokens", primary, ds)  # raises NotConfigured if the primary encoder has no rows
    all_tok = ctx.tables["k21_tokens"]
    all_tok = all_tok[all_tok["dataset"] == ds]
    models = [m for m in (ctx.roles.encoders or (primary,)) if (all_tok["model"] == m).any()]
    if primary not in models:
        models.insert(0, primary)
    stats = st.per_model_stats(all_tok, models).assign(dataset=ds)
    reading = readings.mixing_reading(stats[stats["model"] == primary], primary)
    return FigureResult(
        data=stats, table=tables.stats_table(stats, "model", "Model"), reading=reading,
        paper=sel.paper(ctx, "k21-tab2", [(m, ds) for m in models]), models=tuple(models), datasets=(ds,),
        params={"missing": [m for m in ctx.roles.encoders if m not in models]},
    )


def build_tab5(ctx: FigureContext) -> FigureResult:
    """K21 Table 5: Table 2 statistics for every model variant (roles.variants)."""
    v = ctx.roles.variants
    if not v:
        raise NotConfigured("no model variants configured (role: variant)",
                            snippets.paper_models_yaml(papers.K21_VARIANTS))
    if not ctx.roles.datasets:
        raise NotConfigured("no dataset configured", snippets.primary_dataset_yaml())
    ds = ctx.roles.datasets[0]
    tok = sel.result_table(ctx, "k21_tokens", snippets.paper_models_yaml(papers.K21_VARIANTS))
    tok = tok[tok["dataset"] == ds]
    models = [x for x in v if (tok["model"] == x).any()]
    if not models:
        raise NotConfigured(f"no k21_tokens rows for the variants {list(v)} on {ds!r}",
                            snippets.models_yaml([(x, sel.source(ctx, x) or x, "variant") for x in v]))
    stats = st.per_model_stats(tok, models).assign(dataset=ds)
    r = stats[stats["method"] == "ATTNRESLN-N"].set_index("model")["mean"]
    reading = readings.variants_reading(r)
    return FigureResult(data=stats, table=tables.stats_table(stats, "model", "Model"), reading=reading,
                        paper=sel.paper(ctx, "k21-tab5", [(x, ds) for x in models]), models=tuple(models), datasets=(ds,),
                        params={"missing": [x for x in v if x not in models]})


def build_tab6(ctx: FigureContext) -> FigureResult:
    """K21 Table 6: Table 2 statistics for the primary encoder on every dataset."""
    model, _ = sel.primary(ctx)
    sel.need_datasets(ctx, "k21-tab6")
    frames = []
    for ds in ctx.roles.datasets:
        frames.append(st.pooled_stats(sel.rows(ctx, "k21_tokens", model, ds)).assign(model=model, dataset=ds))
    stats = pd.concat(frames, ignore_index=True)
    r = stats[stats["method"] == "ATTNRESLN-N"].set_index("dataset")["mean"]
    reading = readings.datasets_reading(model, r)
    return FigureResult(data=stats, table=tables.stats_table(stats, "dataset", "Dataset"), reading=reading,
                        paper=sel.paper(ctx, "k21-tab6", [(model, ds) for ds in ctx.roles.datasets]),
                        models=(model,), datasets=tuple(ctx.roles.datasets))


def build_tab7(ctx: FigureContext) -> FigureResult:
    """K21 Table 7: Table 2 statistics over a seed group (mean and SD over models)."""
    tok, g, ds = sel.seed_group_rows(ctx, "k21-tab7", "k21_tokens")
    stats = st.seed_group_stats(tok, g).assign(dataset=ds)
    table = pd.DataFrame({
        "Method": stats["method"],
        "Mean (SD) (%)": [f"{pub(a, '.2f')} ({pub(b, '.2f')})" for a, b in zip(stats["mean"], stats["sd"])],
        "Max (%)": stats["max"].round(2), "Min (%)": stats["min"].round(2), "Models": stats["n_models"],
    })
    reading = readings.seed_group_reading(stats)
    paper = sel.paper_seed_group(ctx, "k21-tab7", g, ds)
    return FigureResult(data=stats, table=table, reading=reading, paper=paper, models=tuple(g), datasets=(ds,))
