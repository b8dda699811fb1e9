"""K21 Fig. 3 and its appendix siblings (fig5–fig17): mixing ratio per layer × token category.

`category_heatmap_result` draws one model on one dataset; the factories return the builders of the
model-variant (fig5+k), dataset (fig12+k) and seed (fig15+k) figures, each naming in its
`NotConfigured` message which role is missing and the paper entries that would fill it.
Pitfall: variants and seeds are taken in configuration order; k is a position, not a model name.
"""
from __future__ import annotations

from typing import Callable

from report_builder import papers, schema
from report_builder import tokens as token_display
from report_builder.stats import k21 as st
from report_builder.figures import display, snippets, theme
from report_builder.figures.charts import heatmap
from report_builder.figures.charts.data import LAYER_TITLE
from report_builder.figures.k21 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured


UNITS = {"value": schema.PERCENT}
"""The units of every category figure's data (fig3, fig5–17): ``value`` is a mean mixing ratio."""
PAGE_WIDTH = theme.PAGE_WIDTH
CELL_WIDTH = 40


def panel_columns(n_panels: int, n_categories: int) -> int:
    """Panels per row: all in one row when they fit `theme.PAGE_WIDTH`, else as few rows as fit, balanced (3 + 2)."""
    fits = max(1, (PAGE_WIDTH - 60) // (n_categories * CELL_WIDTH + 12))  # 60 px: the y axis; 12 px: spacing
    rows = -(-n_panels // fits)
    return -(-n_panels // rows)


def category_labels(tokens, causal: bool) -> Callable[[str], str]:
    """How a K21 category is shown for one model: a special category by the model's own token where all its
    occurrences are one token (RoBERTa's ``<s>``, ``</s>``, ``<mask>``; BERT's ``[CLS]`` …), a causal model's
    ``[CLS]`` as ``BOS`` (`tokens.category_label`); the data keeps the K21 names."""
    names: dict[str, str] = {}
    special = tokens[tokens["category"].isin([*schema.SPECIAL_TOKEN_CATEGORIES, "[MASK]"])]
    for cat, toks in special.groupby("category")["token"]:
        one = toks.unique()
        if len(one) == 1 and isinstance(one[0], str) and one[0].strip():
            names[str(cat)] = one[0]

    def label(category: str) -> str:
        shown = token_display.category_label(category, causal)
        return shown if shown != category else names.get(category, category)
    return label


def category_heatmap_result(ctx: FigureContext, model: str, dataset: str, role: str) -> FigureResult:
    """Fig. 3-style result for one model and dataset (used by fig3, fig5–17)."""
    tokens = sel.rows(ctx, "k21_tokens", model, dataset, role)
    means = st.layer_category_means(tokens)
    means.insert(0, "dataset", dataset)
    means.insert(0, "model", model)
    plot = means.assign(Layer=means["layer"] + 1, value=means["value"].round(2))
    causal = display.is_causal(ctx.tables, model)
    cats = [c for c in st.CATEGORIES if c in set(plot["category"])]
    cats += sorted(set(plot["category"]) - set(cats))
    label = category_labels(tokens, causal)
    plot["category"] = plot["category"].map(label)
    cats = [label(c) for c in cats]
    chart = heatmap.annotated_heatmap(
        plot, x="category", y="Layer", value="value", facet="method", facet_order=st.METHODS,
        x_order=cats, y_order=sorted(plot["Layer"].unique()), domain=(0, 100), fmt=".1f",
        cell_width=CELL_WIDTH, cell_height=20 if plot["Layer"].max() <= 16 else 16,
        columns=panel_columns(len(st.METHODS), len(cats)),
        x_title="token category", y_title=LAYER_TITLE, value_title="mixing ratio (%)", tooltip_extra=("n_seqs",),
        legend_orient="bottom",
    )
    reading = readings.category_reading(means, label)
    if causal and token_display.BOS in cats:
        reading += (f" {model} is causal: its first token (BOS) can attend only to itself, so its mixing ratio "
                    "is 0 by construction in every layer and method.")
    return FigureResult(data=means, chart=chart, reading=reading, models=(model,), datasets=(dataset,),
                        params={"layers": int(means["layer"].nunique()), "categories": cats})


def build_fig3(ctx: FigureContext) -> FigureResult:
    """K21 Fig. 3: mixing ratio per layer and category, primary encoder on the primary dataset."""
    model, ds = sel.primary(ctx)
    return category_heatmap_result(ctx, model, ds, "primary_encoder")


def variant_builder(k: int) -> Callable[[FigureContext], FigureResult]:
    """The builder of k21-fig{5+k}: model variant k on the primary dataset."""
    def build(ctx: FigureContext) -> FigureResult:
        v = ctx.roles.variants
        if len(v) <= k or not ctx.roles.datasets:
            need = papers.K21_VARIANTS[len(v): k + 1] if len(v) <= k else ()
            entry = snippets.paper_models_yaml(need) if need else snippets.primary_yaml()
            raise NotConfigured(
                f"k21-fig{5 + k} shows model variant #{k + 1} (roles.variants[{k}]); {len(v)} variant(s) configured. "
                "Variants are taken in configuration order; add these entries to the models list.", entry)
        res = category_heatmap_result(ctx, v[k], ctx.roles.datasets[0], "variant")
        res.title = f"Mixing ratio per layer and category: {v[k]} (model variant {k + 1})"
        return res
    return build


def dataset_builder(k: int) -> Callable[[FigureContext], FigureResult]:
    """The builder of k21-fig{12+k}: the primary encoder on non-primary dataset k."""
    def build(ctx: FigureContext) -> FigureResult:
        model, _ = sel.primary(ctx)
        d = ctx.roles.datasets
        if len(d) <= k + 1:
            need = snippets.dataset_slots(d, k)
            raise NotConfigured(
                f"k21-fig{12 + k} shows non-primary dataset #{k + 1} (roles.datasets[{k + 1}]; the paper's "
                f"{papers.EXTRA_DATASETS[k].id}); "
                f"{max(len(d) - 1, 0)} configured. Add these entries to the datasets list.", snippets.datasets_yaml(need))
        res = category_heatmap_result(ctx, model, d[k + 1], "primary_encoder")
        res.title = f"Mixing ratio per layer and category: {sel.dataset_label(ctx, d[k + 1])}"
        return res
    return build


def seed_builder(k: int) -> Callable[[FigureContext], FigureResult]:
    """The builder of k21-fig{15+k}: seed-group model k on the primary dataset."""
    def build(ctx: FigureContext) -> FigureResult:
        g = ctx.roles.seed_group
        if len(g) <= k or not ctx.roles.datasets:
            raise NotConfigured(
                f"k21-fig{15 + k} shows seed #{k + 1} of the seed group (roles.seed_group[{k}]); "
                f"{len(g)} seed model(s) configured. The paper used {papers.N_SEEDS} MultiBERTs seeds.", snippets.seed_group_yaml())
        res = category_heatmap_result(ctx, g[k], ctx.roles.datasets[0], "seed_group")
        res.title = f"Mixing ratio per layer and category: {g[k]} (seed {k + 1} of the seed group)"
        return res
    return build
