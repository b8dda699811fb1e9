"""The K24 figure declarations (Kobayashi et al., ICLR 2024), in the order of SPEC §3.

k24-fig1, k24-maps, k24-ctx-ff, k24-ctx-components, k24-ctx-cumulative, k24-ffamp-top,
k24-ffamp-categories, k24-res-norms, k24-ln-dims, k24-models, k24-ffamp-example; `report_builder.figures.registry`
collects `SPECS`. Each builder reads the result tables named in ``analysis`` (see ARCHITECTURE.md).
Pitfall: ids are permanent (anchors, files, citations); never rename one, add a new one.
"""
from __future__ import annotations

from report_builder import papers, schema
from report_builder.figures.k24 import ctx, ffamp, ffamp_example, maps, res_ln
from report_builder.figures.spec import FINDING, FigureSpec

PAPER = "K24"
#: The models the paper's K24 figures use (BERT-base and GPT-2), named as in the paper preset.
PAPER_MODELS = f"the paper's models: {papers.PRIMARY_ENCODER.source} and {papers.PRIMARY_CAUSAL.source}"

IG_NOTE = ("FF terms use the closed-form Integrated Gradients attribution (zero baseline; exact "
           "completeness) unless the build was configured for numerical IG.")


CTX_NOTE = ("Change = 1 − Spearman ρ between the two maps A[i, j] = ‖z_{i←j}‖ of one sequence, over all "
            "non-pad pairs (only j ≤ i for causal models; bias terms excluded), averaged over the "
            "sequences of the dataset (sequences where ρ is undefined are dropped).")


SECTION = "K24: feed-forward blocks through attention maps"


SPECS: list[FigureSpec] = [
    FigureSpec(
        id="k24-fig1", paper=PAPER, reproduces="the paper's Fig. 1 (the layer schematic with its scopes)", kind="diagram", section=SECTION,
        title="Where the scopes are read in a post-LN and a pre-LN layer",
        caption=("Layer diagrams of a post-LN layer (x' = LN₁(x + ATTN(x)), y = LN₂(x' + FF(x'))) and a pre-LN "
                 "layer (x' = x + ATTN(LN₁(x)), y = x' + FF(LN₂(x'))); dashed markers show where each scope's "
                 "decomposition z_i = Σ_j z_{i←j} + z_{i←bias} is read (post-LN: ATB, ATBFF, ATBFFRES, "
                 "ATBFFRESLN; pre-LN: ATB, ATBLN, ATBLNFF, ATBLNFFRES). Under each diagram, the real map "
                 "A[i, j] = ‖z_{i←j}‖ at every scope for the first example sequence at the middle layer "
                 "(⌊L/2⌋ + 1 of L, counting from 1) of the primary encoder and the primary causal model, each row normalised "
                 "to sum to 1 (bias excluded; causal models only j ≤ i). " + IG_NOTE),
        analysis=("k24_maps", "models"), build=maps.build_fig1, units=schema.UNITS["k24_maps"],
    ),
    FigureSpec(
        id="k24-maps", paper=PAPER, reproduces="the paper's appendix scope maps", section=SECTION,
        title="Scope maps explorer",
        caption=("Contribution maps A[i, j] = ‖z_{i←j}‖ (row i = query/output token, column j = source token; "
                 "rows normalised to sum to 1, bias excluded) at each scope from ATB to the whole layer, for "
                 "a few example sequences, every layer, every configured model. Each example is its text's "
                 f"first {schema.EXAMPLE_TOKENS} tokens at most (fewer when the dataset's max_length is lower); "
                 "the line under a map's title says when the example shown reaches that limit. Use the layer "
                 "slider, the scope selector and the example selector; axis labels are position:token. " + IG_NOTE),
        analysis=("k24_maps", "models"), build=maps.build_maps, units=schema.UNITS["k24_maps"],
    ),
    FigureSpec(
        id="k24-ctx-ff", paper=PAPER, reproduces=f"{FINDING}: FF changes the token-to-token contribution maps ({PAPER_MODELS})", section=SECTION,
        title="Contextualization change through FF",
        caption=("Per layer, how much the FF block changes the token-to-token map: ATB → ATBFF (post-LN) or "
                 "ATBLN → ATBLNFF (pre-LN). " + CTX_NOTE + " Band: ±1 SD over sequences. Colour = model; "
                 "one panel per dataset. " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=ctx.build_ctx_ff,
    ),
    FigureSpec(
        id="k24-ctx-components", paper=PAPER, reproduces=f"the paper's per-component change figure ({PAPER_MODELS})", section=SECTION,
        title="Contextualization change through each component",
        caption=("Per layer, the change between consecutive scopes, i.e. through each component after the "
                 "attention block: post-LN FF (ATB→ATBFF), RES (ATBFF→ATBFFRES), LN (ATBFFRES→ATBFFRESLN); "
                 "pre-LN LN (ATB→ATBLN), FF (ATBLN→ATBLNFF), RES (ATBLNFF→ATBLNFFRES). " + CTX_NOTE +
                 " Rows: the primary encoder and the primary causal model; columns: datasets. " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=ctx.build_ctx_components,
    ),
    FigureSpec(
        id="k24-ctx-cumulative", paper=PAPER, reproduces=f"{FINDING}: RES and LN largely cancel FF's change of the maps ({PAPER_MODELS})", section=SECTION,
        title="Cumulative change from the attention block (cancellation)",
        caption=("Per layer, the change from the ATB map to each later scope (post-LN: ATBFF, ATBFFRES, "
                 "ATBFFRESLN; pre-LN: ATBLN, ATBLNFF, ATBLNFFRES). If the whole-layer curve lies below the "
                 "after-FF curve, RES (and LN) undo part of what FF changed. " + CTX_NOTE +
                 " Rows: primary models; columns: datasets. " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=ctx.build_ctx_cumulative,
    ),
    FigureSpec(
        id="k24-ffamp-top", paper=PAPER, reproduces="the paper's Table 1 (sampled FF-amplified pairs)",
        section=SECTION,
        title="Top FF-amplified token pairs",
        caption=("FF-amp[i, j] = Â_after[i, j] − Â_before[i, j], where Â is the map with rows normalised to sum "
                 "to 1, before = ATB (post-LN) or ATBLN (pre-LN) and after = the scope right after FF. Per "
                 "(model, dataset, layer) the k largest values over all sequences and pairs i ≠ j (j ≤ i for "
                 "causal models) are kept. The table shows the top pairs of one model, dataset and layer at a time "
                 "(choose them above it; its title says how many it shows) with the query ← source tokens "
                 "(▁ marks a word-initial space), the text "
                 "around them (⟦…⟧ marks both tokens; … where text is left out, also between two distant tokens) and the pair's linguistic category; the chart below shows "
                 "every kept pair, and the CSV lists them all. " + IG_NOTE),
        analysis=("k24_ffamp_pairs", "models"), build=ffamp.build_ffamp_top,
        units=schema.UNITS["k24_ffamp_pairs"],
    ),
    FigureSpec(
        id="k24-ffamp-categories", paper=PAPER, reproduces=f"{FINDING}: FF emphasises linguistic compositions — subwords of one word, multi-word names ({PAPER_MODELS})", section=SECTION,
        title="Linguistic categories of FF-amplified pairs vs base rates",
        caption=("Share of each pair category among the top-k FF-amplified pairs vs its base rate among all "
                 "valid pairs i ≠ j of the dataset (j ≤ i for causal models). Categories, first that applies: "
                 "special token (either token), same word (subword pieces of one word: WordPiece ##, BPE "
                 "pieces without a leading-space marker), multi-word name (both tokens in one span of ≥ 2 "
                 "capitalised words of the source text, found through the tokenizer's offsets; spaCy NER "
                 "when installed), adjacent (|i − j| = 1), identical token (same string, different words), "
                 "punctuation, other. Top: pooled over layers and datasets; bottom: log₂(top share / base "
                 "share) per layer, clipped to ±3, with the number of top pairs in each cell."),
        analysis=("k24_ffamp_base", "models"), build=ffamp.build_ffamp_categories,
        units=schema.UNITS["k24_ffamp_base"],
    ),
    FigureSpec(
        id="k24-res-norms", paper=PAPER, reproduces=f"{FINDING}: RES largely cancels FF's change of the maps, seen here through the norms of FF's output and of the residual it is added to ({PAPER_MODELS})", section=SECTION,
        title="FF output norm vs residual norm",
        caption=("Per layer, the ratio ‖FF output_i‖ / ‖residual input_i‖ over all non-pad tokens of the "
                 "dataset, where the residual is the vector FF's output is added to (post-LN: the LN₁ output; "
                 "pre-LN: the stream after attention). Line: median; band: 10th–90th percentile; dashed line: "
                 "ratio 1 (below it the residual dominates the sum). The axis is logarithmic when the values span "
                 "more than a decade. Colour = model; one panel per dataset."),
        analysis=("k24_res_norms", "models"), build=res_ln.build_res_norms,
    ),
    FigureSpec(
        id="k24-ln-dims", paper=PAPER, reproduces=f"{FINDING}: LN suppresses the outlier dimensions FF writes to ({PAPER_MODELS})", section=SECTION,
        title="FF's change per dimension vs the LN weight",
        caption=("For the primary dataset, per hidden dimension: FF change = mean |FF output| in that "
                 "dimension over tokens, LN weight = γ of the norm that follows (post-LN LN₂; pre-LN the next "
                 "layer's LN₁), LN-output change = mean |change of the LN output that FF causes| in that "
                 "dimension; colour = kept ratio (LN-output change / FF change). The slider picks the layer. "
                 "Bottom: per layer, the Spearman ρ between FF change and |γ| across dimensions (left) and "
                 "Σ LN-output change / Σ FF change over dimensions (right)."),
        analysis=("k24_ln_dims", "models"), build=res_ln.build_ln_dims,
    ),
    FigureSpec(
        id="k24-models", paper=PAPER, reproduces="the paper's appendix figures repeating the analyses for other BERT sizes and seeds", section=SECTION,
        title="Contextualization change for every configured model",
        caption=("k24-ctx-ff, k24-ctx-components and k24-ctx-cumulative for every configured model (rows) and "
                 "dataset (columns). " + CTX_NOTE + " " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=ctx.build_models,
    ),
    FigureSpec(
        id="k24-ffamp-example", paper=PAPER, section=SECTION,
        reproduces="the paper's linguistic-evidence figure (FF-amplified pairs shown in sentences)",
        title="FF-amplified pairs in one example sentence",
        caption=("FF-amp = Â^{after FF} − Â^{before FF} (rows of each map normalised to sum 1; post-LN ATBFF − ATB, "
                 "pre-LN ATBLNFF − ATBLN) for the first example sequence (the K21 example pair) of the primary "
                 "model, at the layer whose top pair FF amplifies most. Red: FF lowers the share of source token j "
                 "in query token i's vector; blue: FF raises it. Numbers mark the top pairs (i ≠ j, positive "
                 "FF-amp), listed below with their linguistic category (word ids from the subword markers; no "
                 "name search here)."),
        analysis=("k24_maps", "models"), build=ffamp_example.build_ffamp_example,
        units=ffamp_example.UNITS,
    ),
]


#: All K24 ids in declaration order.
K24_IDS: tuple[str, ...] = tuple(s.id for s in SPECS)
