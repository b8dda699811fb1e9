"""K24 map figures: Fig. 1 (layer diagrams over real scope maps) and the scope-map explorer.

Maps are ``k24_maps`` rows (row-normalised, bias excluded); each model's scopes come from its layout.
Pitfall: Fig. 1 draws the *middle* layer (0-based ``n_layers // 2``) of the first example; the
explorer cuts examples longer than `MAX_EXPLORER_TOKENS` (= `schema.EXAMPLE_TOKENS`, where the analysis
cuts them) and says so in its reading and under each map's title.
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from report_builder.stats import k24_figures as figstats
from report_builder.figures import snippets
from report_builder.figures.charts import diagrams, token_maps
from report_builder.figures.k24 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured
from report_builder.schema import EXAMPLE_TOKENS, example_order


def build_fig1(ctx: FigureContext) -> FigureResult:
    """K24 Fig. 1: a post-LN and a pre-LN layer diagram, each over its primary model's scope maps."""
    maps = sel.result_table(ctx, "k24_maps")
    lays = sel.layouts(ctx, maps)
    wanted = [(getattr(ctx.roles, role), lay) for role, lay in sel.ROLE_LAYOUTS]
    have = [(m, lays.get(m, lay)) for m, lay in wanted if m and m in set(maps["model"])]
    if not have:
        raise NotConfigured("k24-fig1 needs K24 maps of a primary encoder (post-LN) or a primary causal "
                            "(pre-LN) model; neither is configured", snippets.K24_BOTH)
    panels, used, parts, data = [], [], [], []
    for m, lay in have:
        mm = maps[maps["model"] == m]
        example = example_order(mm["example"].unique().tolist())[0]
        n_layers = int(mm["layer"].max()) + 1
        layer = n_layers // 2
        cut = mm[(mm["example"] == example) & (mm["layer"] == layer)]
        scopes = list(lay.scopes)
        panels.append(diagrams.layer_diagram(lay, f"{lay.label} layer ({m}): where each scope is read"))
        n_tok = int(cut["i"].max()) + 1
        panels.append(token_maps.scope_map_strip(cut, scopes, f"{m}, example {example}, layer {layer + 1} of {n_layers}",
                                                 cell=14 if n_tok <= 30 else max(4, 240 // max(n_tok, 1)),
                                                 show_labels=n_tok <= 30))
        parts.append(readings.self_attribution(m, layer, figstats.diagonal_means(cut), scopes))
        used.append(m)
        data.append(cut)
    missing = [(role, lay) for (role, lay), (m, _) in zip(sel.ROLE_LAYOUTS, wanted) if m not in used]
    reading = "; ".join(parts) + "."
    params = {"layer": "middle layer (0-based n_layers // 2, shown 1-based)", "example": "first example",
              "diagram": "altair (rect/text/line marks)"}
    if missing:
        role, lay = missing[0]
        reading += (f" No {role.replace('_', ' ')} ({lay.label}) model is configured, so only the "
                    f"{have[0][1].label} diagram is shown (add a model with role {role}).")
        params["missing_config"] = snippets.K24_CAUSAL if role == "primary_causal" else snippets.K24_ENCODER
    chart = alt.vconcat(*panels, spacing=12).resolve_scale(color="independent")
    return FigureResult(data=pd.concat(data, ignore_index=True), chart=chart, reading=reading, models=tuple(used),
                        params=params)


MAX_EXPLORER_TOKENS = EXAMPLE_TOKENS


def build_maps(ctx: FigureContext, max_tokens: int = MAX_EXPLORER_TOKENS) -> FigureResult:
    """K24 scope-map explorer: every configured model's maps, one (example, layer, scope) at a time."""
    maps = sel.result_table(ctx, "k24_maps")
    # examples reaching the limit: cut to it by the analysis (`schema.EXAMPLE_TOKENS`), or here (a table of
    # an older build, a lower max_tokens); their maps are the first max_tokens tokens of their text
    n_long = int((maps.groupby(["model", "example"])["i"].max() >= max_tokens - 1).sum())
    if n_long:  # keep the page light: long examples are cut to their first max_tokens positions
        maps = maps[(maps["i"] < max_tokens) & (maps["j"] < max_tokens)]
    lays = sel.layouts(ctx, maps)
    models = sel.model_order(ctx, maps["model"].unique())
    panels, parts = [], []
    for k, m in enumerate(models):
        mm = maps[maps["model"] == m]
        scopes = [s for s in lays[m].scopes if s in set(mm["scope"])]
        panels.append(token_maps.map_explorer(mm, scopes, m, key=f"m{k}", token_limit=max_tokens))
        parts.append(readings.scope_path(m, figstats.diagonal_means(mm), scopes))
    chart = alt.vconcat(*panels, spacing=24).resolve_scale(color="independent") if len(panels) > 1 else panels[0]
    n_ex = maps.groupby("model")["example"].nunique().max()
    reading = readings.explorer_reading(parts, n_long, max_tokens)
    return FigureResult(data=maps, chart=chart, reading=reading, models=tuple(models),
                        params={"examples_per_model": int(n_ex), "max_tokens": max_tokens})
