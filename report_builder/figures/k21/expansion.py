"""K21 Table 8: the expansion rate of each layer's value→output map, with its per-layer chart.

Numbers come from `stats.k21_figures.expansion_rows` (a seed group of ≥ 2 models is one summary row
and one mean line); under the ``paper`` preset the authors' per-layer values are added as dashed
lines. Pitfall: the paper's numbers are matched on model *source*, never on the configured name.
"""
from __future__ import annotations

import pandas as pd

from report_builder.stats import k21_figures as figstats
from report_builder.figures import reported, snippets
from report_builder.figures.charts.lines import per_layer_chart
from report_builder.figures.k21 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult
from report_builder.precision import published as pub


def build_tab8(ctx: FigureContext) -> FigureResult:
    """K21 Table 8: expansion rate per model (mean, SD, min, max over layers) and per layer.

    The data is one row per (model, layer) the chart draws (a seed group: its per-layer mean), with the
    model's summary (``mean``, ``sd``, ``min``, ``max``, ``n_layers``) on each of its rows."""
    exp = sel.result_table(ctx, "k21_expansion", snippets.primary_yaml())
    g = set(ctx.roles.seed_group) if len(ctx.roles.seed_group) >= 2 else set()
    order = {k: n for n, k in enumerate(ctx.roles.encoders)}
    summ, lines, group_name = figstats.expansion_rows(exp, ctx.roles.seed_group, order)
    paper = None
    if ctx.roles.preset == "paper":
        frames = []
        for mname in summ.loc[~summ["group"], "model"]:
            src = sel.source(ctx, mname)
            p = reported.paper_numbers("k21-tab8", src, None, ctx.reported or None)
            if p is not None:
                frames.append(p.assign(model=mname))
            pl = reported.expansion_per_layer(src or "", ctx.reported or None)
            if pl is not None:
                lines = pd.concat([lines, pl.assign(model=mname, report="paper (authors' run)")], ignore_index=True)
        if group_name is not None:
            p = sel.paper_seed_group(ctx, "k21-tab8", sorted(g), None)
            if p is not None:
                frames.append(p.assign(model=group_name))
        paper = pd.concat(frames, ignore_index=True) if frames else None
    table = pd.DataFrame({
        "Model": summ["model"],
        "Mean (SD)": [f"{pub(a, '.3f')} ({pub(b, '.3f')})" if not pd.isna(b) else f"{pub(a, '.3f')}" for a, b in zip(summ["mean"], summ["sd"])],
        "Min": summ["min"].round(3), "Max": summ["max"].round(3), "Layers": summ["n_layers"],
    })
    pos = lines["expansion_rate"][lines["expansion_rate"] > 0]
    log = bool(len(pos) == len(lines) and len(pos) and pos.max() / pos.min() > 10)  # spans decades
    chart = per_layer_chart(
        lines, y="expansion_rate", color="model", color_order=list(dict.fromkeys(lines["model"])),
        strokedash="report" if lines["report"].nunique() > 1 else None,
        y_title="expansion rate" + (" (log)" if log else "") + "; dashed: 1", tooltip=("report",), rule_at=1.0,
        log_y=log,
    )
    # what the chart draws (this build's per-layer rates), each row with its model's summary (the table's numbers)
    data = lines[lines["report"] == "this build"][["model", "layer", "expansion_rate"]].merge(
        summ.drop(columns="group"), on="model", how="left").reset_index(drop=True)
    return FigureResult(data=data, chart=chart, table=table, reading=readings.expansion_reading(summ.iloc[0]),
                        paper=paper, models=tuple(exp["model"].unique()), params={"seed_group_summarised": sorted(g)})
