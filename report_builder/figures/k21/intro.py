"""K21 introduction and method figures: Fig. 1 (token maps of the example pair) and Fig. 2 (diagram).

Fig. 2 is a diagram: ``FigureResult.svg`` holds a standalone SVG string (embed it inline);
``chart`` is ``None``. Pitfall: Fig. 1 shows the *first* example of ``k21_maps`` (the K21 sentence
pair); the maps analysis writes it first, so never sort examples here.
"""
from __future__ import annotations

import pandas as pd

from report_builder import schema
from report_builder.stats import k21_figures as figstats
from report_builder.figures import snippets
from report_builder.figures.charts import diagrams, token_maps
from report_builder.figures.k21 import readings, selection as sel
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured


FIG1_METHODS = ("ATTN-N", "ATTNRESLN-N")
FIG1_UNITS = schema.UNITS["k21_maps"]
"""Fig. 1's data is a slice of ``k21_maps``: its ``value`` has that table's unit (so the two join by name)."""


def build_fig1(ctx: FigureContext) -> FigureResult:
    """K21 Fig. 1: token maps of the example pair, ATTN-N vs ATTNRESLN-N, primary encoder."""
    model = ctx.roles.primary_encoder
    if not model:
        raise NotConfigured("no primary encoder configured", snippets.primary_yaml())
    maps = sel.rows(ctx, "k21_maps", model, None)
    example = maps["example"].iloc[0]
    data = maps[(maps["example"] == example) & (maps["method"].isin(FIG1_METHODS))]
    if set(FIG1_METHODS) - set(data["method"]):
        raise NotConfigured(f"k21_maps for {model!r} lacks {FIG1_METHODS}", snippets.primary_yaml())
    data = data.reset_index(drop=True)
    chart = token_maps.token_map_heatmap(data, panel="method", panel_order=FIG1_METHODS, size=300, label=f"{model}: ",
                                         unit="raw norm")
    reading = readings.self_share_reading(figstats.self_share(data))
    n_tok = int(data["i"].max()) + 1
    return FigureResult(
        data=data, chart=chart, reading=reading, models=(model,), datasets=(),
        params={"example": str(example), "methods": list(FIG1_METHODS), "tokens": n_tok,
                "layers": int(data["layer"].nunique())},
    )


def attention_block_svg() -> str:
    """The K21 Fig. 2 diagram (ATTN → RES → LN) with the decomposed term at each point."""
    stages = [
        diagrams.Stage("ATTN", "box", ("Σ_h α^h_ij f^h(x_j)", "ATTN-W: ᾱ_ij   ATTN-N: ‖·‖")),
        diagrams.Stage("RES", "add", ("+ δ_ij x_i", "ATTNRES-N: ‖·‖")),
        diagrams.Stage("LN", "box", ("γ⊙(t − mean t)/s_i", "ATTNRESLN-N: ‖·‖")),
    ]
    return diagrams.chain_diagram_svg(
        stages,
        skips=[(0, 1)],
        spans=[("ATTN-W, ATTN-N", 0, 0), ("ATTNRES-W, ATTNRES-N", 0, 1), ("ATTNRESLN-N (= ATB)", 0, 2)],
        input_label="x_j",
        output_label="x̃_i",
        title="K21 Fig. 2: the attention block decomposed",
        description=("Input vectors pass through multi-head attention (ATTN), the residual connection adds "
                     "each token's own input (RES), and layer normalisation (LN) rescales the sum. Each "
                     "output vector is written exactly as a sum of per-input-token terms plus a bias term; "
                     "the five methods measure those terms after ATTN, after RES and after LN."),
    )


def build_fig2(ctx: FigureContext) -> FigureResult:
    """K21 Fig. 2: the attention-block diagram (`FigureResult.svg`) and its formulas as a table, shown below it."""
    data = pd.DataFrame(
        {
            "stage": ["ATTN", "RES", "LN"],
            "operation": ["multi-head attention", "residual connection", "layer normalisation"],
            "term_i_from_j": [
                "Σ_h α^h_ij (x_j W_V^h + b_V^h) W_O^h",
                "ATTN_{i←j} + δ_ij x_i",
                "γ ⊙ (t_{i←j} − mean(t_{i←j})) / s_i",
            ],
            "bias_term": ["b_O", "b_O", "γ ⊙ (b_O − mean b_O) / s_i + β"],
            "methods": ["ATTN-W (ᾱ_ij), ATTN-N", "ATTNRES-W (½ᾱ + ½I), ATTNRES-N", "ATTNRESLN-N"],
        }
    )
    shown = data.rename(columns={"stage": "Stage", "operation": "Operation", "term_i_from_j": "Term z_{i←j}",
                                 "bias_term": "Bias term z_{i←bias}", "methods": "Methods measured here"})
    return FigureResult(
        data=data, chart=None, table=shown,
        reading="The three methods differ only in where the decomposed vector is measured: after ATTN, after RES, or after LN.",
        svg=attention_block_svg(),
    )
