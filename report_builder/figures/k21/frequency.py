"""K21 word-frequency results: Table 3, Fig. 4 and the appendix Tables 9–11 (Spearman ρ).

ρ is between each token occurrence's corpus-frequency rank and its mixing ratio averaged over layers
(`stats.k21.frequency_spearman`), on unmasked inputs. Pitfall: Fig. 4 subsamples the 'other' points
for the page (`stats.k21_figures.frequency_points`, seed 0) but its reading uses every occurrence.
"""
from __future__ import annotations

import pandas as pd

from report_builder import schema
from report_builder.stats import k21 as st
from report_builder.stats import k21_figures as figstats
from report_builder.figures.charts import points
from report_builder.figures.k21 import readings, selection as sel, tables
from report_builder.figures.spec import FigureContext, FigureResult
from report_builder.precision import published as pub


def build_tab3(ctx: FigureContext) -> FigureResult:
    """K21 Table 3: Spearman ρ(frequency rank, mixing ratio), primary encoder and dataset."""
    model, ds = sel.primary(ctx)
    fs = st.frequency_spearman(sel.rows(ctx, "k21_freq", model, ds))
    fs.insert(0, "dataset", ds)
    fs.insert(0, "model", model)
    return FigureResult(data=fs, table=tables.spearman_table(fs, None, None), reading=readings.rho_reading(fs, model),
                        paper=sel.paper(ctx, "k21-tab3", [(model, ds)]), models=(model,), datasets=(ds,))


FIG4_COLOURS = ("#D55E00", "#CC79A7", "#009E73", "#E69F00", "#0072B2")


FIG4_LEGEND = {".": "period (.)", ",": "comma (,)"}
"""Fig. 4's legend words for the groups that are one glyph (hard to see beside a dot of colour)."""
FIG4_MAX_OTHER = 5000
FIG4_UNITS = {"ATTNRESLN-N": schema.PERCENT}
"""The units of Fig. 4's data: each occurrence's mixing ratio, mean over layers."""


def _unseen_note(freq) -> str:
    """Tokens wordfreq does not list share the worst rank (`data.frequency`): a column of points at the right
    of Fig. 4 that the reading names (how many occurrences, which tokens), or "" when no two tokens share it."""
    words = freq[~freq["category"].isin(schema.SPECIAL_TOKEN_CATEGORIES)]
    if words.empty:
        return ""
    worst = words["freq_rank"].max()
    at = words[words["freq_rank"] == worst]
    tokens = at["token"].astype(str).value_counts()
    if len(tokens) < 2:
        return ""
    examples = ", ".join(f"'{t}'" for t in tokens.index[:3])
    return (f" {len(at)} occurrences of {len(tokens)} tokens that the word-frequency list does not hold (e.g. "
            f"{examples}) share the worst rank, {int(worst):,}: the column of points at the right.")


def build_fig4(ctx: FigureContext) -> FigureResult:
    """K21 Fig. 4: frequency rank vs ATTNRESLN-N per token occurrence, primary encoder and dataset."""
    model, ds = sel.primary(ctx)
    freq = sel.rows(ctx, "k21_freq", model, ds)
    pts, n_other = figstats.frequency_points(freq, FIG4_MAX_OTHER, seed=0)
    # [CLS]/[SEP] have no word frequency (their rank 1 is assigned), so the chart leaves them out
    specials = pts["group"].isin(schema.SPECIAL_TOKEN_CATEGORIES)
    n_special = int(specials.sum())
    shown_pts = pts[~specials].reset_index(drop=True)
    groups = [g for g in figstats.FIG4_GROUPS if g not in schema.SPECIAL_TOKEN_CATEGORIES]
    colours = [c for g, c in zip(figstats.FIG4_GROUPS, FIG4_COLOURS) if g in groups]
    chart = points.scatter(
        shown_pts, x="freq_rank", y="ATTNRESLN-N", color="group", color_order=groups, color_range=colours,
        log_x=True, x_title="frequency rank (log; 1 = most frequent)",
        y_title="ATTNRESLN-N mixing ratio, mean over layers (%)", tooltip=("token",),
        legend_labels=FIG4_LEGEND,
    )
    rho = st.frequency_spearman(freq)
    note = (f" The chart leaves out the {n_special} [CLS]/[SEP] occurrences: special tokens have no word "
            "frequency (their rank 1 is assigned); ρ is given with and without them." if n_special else "")
    note += _unseen_note(freq)
    return FigureResult(
        data=shown_pts, chart=chart, reading=readings.rho_reading(rho, model) + note,
        paper=sel.paper(ctx, "k21-fig4", [(model, ds)]), models=(model,), datasets=(ds,),
        params={"other_points_shown": int(min(n_other, FIG4_MAX_OTHER)), "other_points_total": int(n_other),
                "subsample_seed": 0, "special_tokens_left_out": n_special},
    )


def build_tab9(ctx: FigureContext) -> FigureResult:
    """K21 Table 9: Table 3 for every analysed model (roles.encoders)."""
    primary, ds = sel.primary(ctx)
    sel.rows(ctx, "k21_freq", primary, ds)
    freq = ctx.tables["k21_freq"]
    freq = freq[freq["dataset"] == ds]
    models = [m for m in (ctx.roles.encoders or (primary,)) if (freq["model"] == m).any()]
    frames = [st.frequency_spearman(freq[freq["model"] == m]).assign(model=m, dataset=ds) for m in models]
    fs = pd.concat(frames, ignore_index=True)
    r = fs[fs["method"] == "ATTNRESLN-N"].set_index("model")["rho_all"]
    reading = readings.rho_by_model_reading(r)
    return FigureResult(data=fs, table=tables.spearman_table(fs, "model", "Model"), reading=reading,
                        paper=sel.paper(ctx, "k21-tab9", [(m, ds) for m in models]), models=tuple(models), datasets=(ds,))


def build_tab10(ctx: FigureContext) -> FigureResult:
    """K21 Table 10: Table 3 for the primary encoder on every dataset."""
    model, _ = sel.primary(ctx)
    sel.need_datasets(ctx, "k21-tab10")
    frames = [st.frequency_spearman(sel.rows(ctx, "k21_freq", model, ds)).assign(model=model, dataset=ds)
              for ds in ctx.roles.datasets]
    fs = pd.concat(frames, ignore_index=True)
    r = fs[fs["method"] == "ATTNRESLN-N"].set_index("dataset")["rho_all"]
    reading = readings.rho_by_dataset_reading(model, r)
    return FigureResult(data=fs, table=tables.spearman_table(fs, "dataset", "Dataset"), reading=reading,
                        paper=sel.paper(ctx, "k21-tab10", [(model, ds) for ds in ctx.roles.datasets]),
                        models=(model,), datasets=tuple(ctx.roles.datasets))


def build_tab11(ctx: FigureContext) -> FigureResult:
    """K21 Table 11: Table 3 over a seed group (mean and SD of ρ over models)."""
    freq, g, ds = sel.seed_group_rows(ctx, "k21-tab11", "k21_freq")
    fs = st.seed_group_spearman(freq, g).assign(dataset=ds)
    table = pd.DataFrame({
        "Method": fs["method"],
        "ρ all: mean (SD)": [f"{pub(a, '.3f')} ({pub(b, '.3f')})" for a, b in zip(fs["rho_all_mean"], fs["rho_all_sd"])],
        "ρ without [CLS], [SEP]: mean (SD)": [f"{pub(a, '.3f')} ({pub(b, '.3f')})" for a, b in
                                              zip(fs["rho_no_special_mean"], fs["rho_no_special_sd"])],
        "Models": fs["n_models"],
    })
    reading = readings.seed_rho_reading(fs)
    paper = sel.paper_seed_group(ctx, "k21-tab11", g, ds)
    return FigureResult(data=fs, table=table, reading=reading, paper=paper, models=tuple(g), datasets=(ds,))
