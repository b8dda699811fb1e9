"""The K21 figure and table declarations, in paper order: id, title, caption, tables read, builder.

Every id of SPEC §3 is declared here and nowhere else; `report_builder.figures.registry` collects
`SPECS`. Role mapping (which configured model/dataset each figure uses):

* fig1 — ``roles.primary_encoder``, first example of ``k21_maps`` (the K21 sentence pair).
* tab2 — every model of ``roles.encoders`` on ``roles.datasets[0]``.
* fig3, tab3, fig4 — ``roles.primary_encoder`` on ``roles.datasets[0]``.
* tab5 — every model of ``roles.variants``; fig5+k — ``roles.variants[k]`` (k = 0…6), on ``datasets[0]``.
* tab6, tab10 — ``roles.primary_encoder`` on every dataset; fig12+k — ``roles.datasets[1 + k]``.
* tab7, tab11 — the models of ``roles.seed_group`` (at least two); fig15+k — ``roles.seed_group[k]``.
* tab8 — every model with ``k21_expansion`` rows (seed-group members summarised as one group row).
* tab9 — tab3 for every model of ``roles.encoders``.

Pitfall: ids are permanent (anchors, files, citations); captions are part of the page, so a caption
edit changes the page but not the figure's content hash.
"""
from __future__ import annotations

from report_builder import papers
from report_builder.figures.k21 import categories, expansion, frequency, intro, mixing, setup
from report_builder.figures.spec import FigureSpec

PAPER = "K21"

_POOLED = ("pooled over every (sequence, layer, non-pad token) on masked inputs (12% of non-special tokens "
           "masked; a causal model's inputs are never masked), special and mask tokens included; ratios ×100.")
_FIG3_CAPTION = (
    "Context-mixing ratio (%) per layer (rows, 1 = first) and token category (columns: Normal, [MASK], [CLS], "
    "[SEP], Overall; a special category is named by the model's own token, e.g. RoBERTa's <mask>, <s>, </s>; a "
    "causal model is never masked and has no separator, so its columns are Normal, BOS (its first token) and "
    "Overall), one panel per method (ATTN-W, ATTN-N, ATTNRES-W, ATTNRES-N, ATTNRESLN-N). Each cell is the "
    "mean over the tokens of that category within a sequence, then the mean over the sequences containing "
    "the category (Overall: all tokens). Fixed colour scale 0–100. {who}"
)
_SPEARMAN = ("Spearman ρ between each token occurrence's corpus-frequency rank (1 = most frequent) and its "
             "mixing ratio averaged over layers, over all non-pad occurrences on unmasked inputs, and again "
             "without [CLS] and [SEP].")


def _spec(fid: str, title: str, caption: str, analysis: tuple[str, ...], build, kind: str = "chart",
          section: str = "", units: dict[str, str] | None = None, **params) -> FigureSpec:
    return FigureSpec(id=fid, paper=PAPER, title=title, caption=caption, analysis=analysis, build=build,
                      kind=kind, section=section, params=params, units=dict(units or {}))


SPECS: list[FigureSpec] = []
SPECS.append(_spec(
    "k21-fig1", "Token maps of the example sentence pair, ATTN-N vs ATTNRESLN-N",
    "Token-to-token contribution maps of one layer at a time (slider) for the K21 example pair \"The man went to "
    "the store.\" / \"He bought a gallon of milk.\" (first example of k21_maps), primary encoder. Rows are "
    "output tokens i, columns input tokens j (labels pos:token); cell = ‖z_{i←j}‖₂: (a) ATTN-N, the "
    "attention output term; (b) ATTNRESLN-N, after residual and LayerNorm. Bias terms excluded; each panel "
    "has its own colour scale.", ("k21_maps",), intro.build_fig1, section="Introduction",
    units=intro.FIG1_UNITS))
SPECS.append(_spec(
    "k21-fig2", "The attention block: ATTN → RES → LN",
    "Diagram of the attention block of a post-LN layer: multi-head attention (ATTN), residual connection (RES), "
    "layer normalisation (LN). Each output is decomposed exactly into per-input-token terms z_{i←j} plus a bias "
    "term; brackets show which part of the block each method measures, and the table lists each stage's "
    "term and bias term.", (), intro.build_fig2, kind="diagram", section="Method"))
SPECS.append(_spec(
    "k21-tab1", "Datasets",
    "Evaluation sets of this build: number of samples, mean length in tokens under each model's tokenizer "
    "(non-pad tokens, special tokens included; a seed group shows its first member only), domain, source and "
    "licence.", ("datasets",), setup.build_tab1,
    kind="table", section="Experimental setup"))
SPECS.append(_spec(
    "k21-tab2", "Context-mixing ratio: mean, max, min per method",
    "Mixing ratio r_i = ‖Σ_{j≠i} t_{i←j}‖ / (‖Σ_{j≠i} t_{i←j}‖ + ‖t_{i←i}‖) (%) for the five methods, for every "
    "analysed model (roles.encoders) on the primary dataset, " + _POOLED, ("k21_tokens",), mixing.build_tab2,
    kind="table", section="Mixing ratio", units=mixing.UNITS))
SPECS.append(_spec(
    "k21-fig3", "Mixing ratio per layer and token category",
    _FIG3_CAPTION.format(who="Primary encoder on the primary (Wikipedia) dataset."), ("k21_tokens",), categories.build_fig3,
    section="Mixing ratio", units=categories.UNITS))
SPECS.append(_spec(
    "k21-tab3", "Frequency rank vs mixing ratio (Spearman ρ)",
    _SPEARMAN + " Primary encoder on the primary dataset.", ("k21_freq",), frequency.build_tab3, kind="table",
    section="Word frequency"))
SPECS.append(_spec(
    "k21-fig4", "Frequency rank vs ATTNRESLN-N mixing ratio",
    "One point per token occurrence (unmasked inputs, primary encoder, primary dataset): frequency rank on a log "
    "axis (1 = most frequent) vs ATTNRESLN-N mixing ratio averaged over layers (%). '.' and ',' are coloured; "
    "[CLS] and [SEP] are left out of the chart (they have no word frequency; the paper ranks them 1) but counted in ρ "
    f"with specials; 'other' occurrences are subsampled uniformly (seed 0) to at most {frequency.FIG4_MAX_OTHER} points, "
    "ρ in the reading uses all occurrences.", ("k21_freq",), frequency.build_fig4, section="Word frequency",
    units=frequency.FIG4_UNITS))
SPECS.append(_spec(
    "k21-tab4", "Analysed models",
    "Architecture of every analysed model: class, layers, hidden size d, attention heads (key/value heads where "
    "grouped), FF inner size, LayerNorm position and kind, FF activation, parameter count.", ("models",),
    setup.build_tab4, kind="table", section="Models"))
SPECS.append(_spec(
    "k21-tab5", "Mixing ratio for every model variant",
    "Table 2 statistics (mean, max, min of the mixing ratio, %) for every model variant (roles.variants) on the "
    "primary dataset, " + _POOLED, ("k21_tokens",), mixing.build_tab5, kind="table", section="Appendix: model variants",
    units=mixing.UNITS))
for _k in range(7):
    SPECS.append(_spec(
        f"k21-fig{5 + _k}", f"Mixing ratio per layer and category: model variant {_k + 1}",
        _FIG3_CAPTION.format(who=f"Model variant #{_k + 1} (roles.variants[{_k}]; the paper's "
                             f"{papers.K21_VARIANTS[_k].source}) on the primary dataset."),
        ("k21_tokens",), categories.variant_builder(_k), section="Appendix: model variants",
        units=categories.UNITS))
SPECS.append(_spec(
    "k21-tab6", "Mixing ratio on every dataset",
    "Table 2 statistics (mean, max, min of the mixing ratio, %) for the primary encoder on each configured "
    "dataset, " + _POOLED, ("k21_tokens",), mixing.build_tab6, kind="table", section="Appendix: datasets",
    units=mixing.UNITS))
for _k in range(3):
    SPECS.append(_spec(
        f"k21-fig{12 + _k}", f"Mixing ratio per layer and category: dataset {_k + 2}",
        _FIG3_CAPTION.format(who=f"Primary encoder on non-primary dataset #{_k + 1} (roles.datasets[{_k + 1}]; "
                             f"the paper's {papers.EXTRA_DATASETS[_k].id})."),
        ("k21_tokens",), categories.dataset_builder(_k), section="Appendix: datasets",
        units=categories.UNITS))
SPECS.append(_spec(
    "k21-tab7", "Mixing ratio over a seed group",
    "Table 2 statistics over the seed group (roles.seed_group; 25 MultiBERTs in the paper) on the primary "
    "dataset: per model, mean/max/min " + _POOLED + " Then mean (sample SD) over models of the per-model means, "
    "max of the maxes, min of the mins.", ("k21_tokens",), mixing.build_tab7, kind="table", section="Appendix: seed group",
    units=mixing.SEED_GROUP_UNITS))
for _k in range(3):
    SPECS.append(_spec(
        f"k21-fig{15 + _k}", f"Mixing ratio per layer and category: seed {_k + 1} of the seed group",
        _FIG3_CAPTION.format(who=f"Seed-group model #{_k + 1} (roles.seed_group[{_k}]) on the primary dataset."),
        ("k21_tokens",), categories.seed_builder(_k), section="Appendix: seed group",
        units=categories.UNITS))
SPECS.append(_spec(
    "k21-tab8", "Expansion rate of the value→output map",
    "Expansion rate ‖T‖_F / √(d+1) of the augmented (d+1)×(d+1) matrix of each layer's affine map "
    "f(x) = x W_V W_O + b_V W_O (≈ RMS singular value): per model mean (sample SD over layers), min and max over "
    "layers; a seed group (≥ 2 models) is summarised as one row: mean (SD over models) of the per-model means, "
    "min of mins, max of maxes. Chart: the value per layer (1 = first); the seed group as its per-layer mean; dashed line: 1 "
    "(no expansion); a logarithmic axis when the values span more than a decade.",
    ("k21_expansion",), expansion.build_tab8, kind="table", section="Appendix: expansion rate"))
SPECS.append(_spec(
    "k21-tab9", "Frequency correlation for every model",
    _SPEARMAN + " Every analysed model (roles.encoders) on the primary dataset.", ("k21_freq",), frequency.build_tab9,
    kind="table", section="Appendix: frequency correlation"))
SPECS.append(_spec(
    "k21-tab10", "Frequency correlation on every dataset",
    _SPEARMAN + " Primary encoder on each configured dataset.", ("k21_freq",), frequency.build_tab10, kind="table",
    section="Appendix: frequency correlation"))
SPECS.append(_spec(
    "k21-tab11", "Frequency correlation over a seed group",
    _SPEARMAN + " Computed per seed-group model on the primary dataset, then mean (sample SD) over models.",
    ("k21_freq",), frequency.build_tab11, kind="table", section="Appendix: frequency correlation"))

#: All K21 ids in paper order.
K21_IDS: tuple[str, ...] = tuple(s.id for s in SPECS)
