"""The one vocabulary of report_builder: layer layouts, scopes, K21 methods, categories, table columns.

Torch-free and dependency-free, so compute (models/, decompose/, analyses/, data/) and render
(figures/, site/) read the same facts. Nothing else declares a scope list, a method list or a
category order, and nothing derives a scope from its name: ask this module.

A **layout** is how one layer wires its blocks (SPEC §7): post-LN (BERT family), pre-LN (GPT-2,
Llama), sandwich norms (Gemma-2/3) and parallel attention + FF (GPT-NeoX, Phi); a new topology is one
more `Layout` row in `LAYOUTS` plus its mathematics in `decompose/layouts/` (its row in
`decompose.layouts.MATHS`). Which families use a layout is the adapters' to say
(`models.registry.layout_families`), not this module's. Multipliers on the residual branches
(Granite) are not a layout of their own: they scale a block's output linearly, a property of the
family (`Adapter.multipliers`) folded into the block's weights.

Pitfall: a layout's ``id`` is stored in result tables (``models.ln_position``) and cache entries;
renaming one changes cached results and cache keys. Add rows, never rename them.
"""
from __future__ import annotations

from dataclasses import dataclass

ERROR_BOUND = 1e-4
"""Largest relative reconstruction error ``max_i ||ours_i - ref_i|| / ||ref_i||`` a float32 result may
have at a check point; the build refuses results above it (SPEC, Captum's convergence delta). A reduced
precision mode has its own bound (`PRECISIONS`)."""

EXAMPLE_TOKENS = 64
"""Token limit of the K24 example texts (their maps are drawn n x n): each is cut to its first
``min(dataset max_length, EXAMPLE_TOKENS)`` tokens (`analyses.inputs.examples`), and k24-maps says so."""


@dataclass(frozen=True)
class Precision:
    """A precision mode of the decomposition's pair GEMMs (config ``dtype``, ``--dtype``).

    In every mode the forward pass, the norms, the IG factors, every sum and the reconstruction check run
    in float32; a reduced mode rounds the two inputs of the second FF matmul (the ``2 P d' d`` GEMM over
    the P token pairs, the one that dominates a layer) to its format, multiplies them exactly and
    accumulates in float32 (tensor cores: TF32, bfloat16, float16 with float32 accumulation).

    Attributes:
        id: the mode's name (``dtype``). label: for pages and logs.
        mantissa_bits: explicit significand bits of the GEMM inputs (float32 23, TF32 10, bfloat16 7,
            float16 10); the unit roundoff is ``u = 2^-(mantissa_bits + 1)``.
        bound: the largest relative reconstruction error a result of this mode may have at a check
            point (`ERROR_BOUND` for float32). Derivation (reduced modes): each product in the GEMM
            carries a relative error <= 2u (both inputs rounded once; the product and the float32
            accumulation are exact to float32 rounding, ~1e-7); these errors are independent with mean
            0, so the error of the check point's sum over sources and neurons is ~ (2u / sqrt 3) times
            the root of the summed squares of its terms, which is the size of the sum itself when the
            terms do not cancel systematically (measured: the ratio is 1-3 on the tiny models and the
            BERT-base and SmolLM2 shapes). The largest row of a batch adds a Gaussian tail (<= 4.5
            standard deviations for 10^5 rows), so the bound is ``16 u``: TF32 and float16 7.8e-3,
            bfloat16 6.3e-2. The measured errors are in docs/guide/performance.md.
        tensor_cores: the mode runs on GPU tensor cores (faster than float32 there); on a CPU no mode
            is faster than float32 (`bench` says so; a build refuses it).
    """

    id: str
    label: str
    mantissa_bits: int
    bound: float
    tensor_cores: bool

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -(self.mantissa_bits + 1)


def _reduced(id_: str, label: str, bits: int) -> Precision:
    return Precision(id_, label, bits, 16 * 2.0 ** -(bits + 1), True)


PRECISIONS: dict[str, Precision] = {p.id: p for p in (
    Precision("float32", "float32", 23, ERROR_BOUND, False),
    _reduced("tf32", "TF32 (float32 accumulation)", 10),
    _reduced("bfloat16", "bfloat16 (float32 accumulation)", 7),
    _reduced("float16", "float16 (float32 accumulation)", 10),
)}
"""The precision modes, float32 first: the one declaration of each mode's format and bound."""


def precision(id_: str) -> Precision:
    """The mode named ``id_`` (a KeyError names the known ones)."""
    try:
        return PRECISIONS[id_]
    except KeyError:
        raise KeyError(f"unknown precision {id_!r}; known: {', '.join(PRECISIONS)}") from None


CHUNK_RULES = ("auto", "cpu", "gpu")
"""How the decomposition cuts its FF step (`decompose.chunks`): ``cpu`` (cache-sized chunks, the
deterministic path's rule), ``gpu`` (few large blocks sized from the device's memory), ``auto`` (the
device's own class)."""


@dataclass(frozen=True)
class Layout:
    """How one layer is wired, as data.

    Attributes:
        id: stored name (``models.ln_position``): ``"post"``, ``"pre"``, ``"sandwich"`` or ``"parallel"``.
        label: human name, e.g. ``"post-LN"``.
        formula: the layer in one line, for captions and docs.
        norm_first: True when each block reads a normalised copy of the residual stream (pre-LN);
            False when the norms sit after each residual addition (post-LN).
        blocks: the layer's operations in forward order (``ATTN``, ``RES``, ``LN1``, ``FF``, ``LN2``);
            diagrams draw these boxes.
        scopes: K24 scopes in forward order; the first is the attention block ``ATB``.
        components: the block between consecutive scopes (``components[k]`` goes
            ``scopes[k] -> scopes[k + 1]``).
        whole_layer: the scope whose terms sum to the layer's output.
        attn_res: the check point holding ATTN + RES (the residual stream after attention).
        ff_input: the scope whose terms are FF's input (the output of the norm in front of FF).
        ff_scopes: scopes whose maps need the FF decomposition (the expensive ``n^2 d d'`` step).
        ff_before, ff_after: the scopes just before and just after FF (K24 FF-amp, FF change).
        checks: points compared with the HF model's own tensors, in forward order.
        scope_labels: scope -> short human description.
        scope_blocks: for each scope, the index in `blocks` after which it is read, where that is not
            simply "the first residual addition, then one block per scope" (parallel layers); empty
            otherwise. Diagrams place the scope markers with `scope_block_indexes`.
    """

    id: str
    label: str
    formula: str
    norm_first: bool
    blocks: tuple[str, ...]
    scopes: tuple[str, ...]
    components: tuple[str, ...]
    whole_layer: str
    attn_res: str
    ff_input: str
    ff_scopes: tuple[str, ...]
    ff_before: str
    ff_after: str
    checks: tuple[str, ...]
    scope_labels: dict
    scope_blocks: tuple[int, ...] = ()

    def scope_block_indexes(self) -> tuple[int, ...]:
        """Index in `blocks` after which each scope is read (in `scopes` order)."""
        if self.scope_blocks:
            return self.scope_blocks
        first = self.blocks.index("RES")
        if not self.norm_first and first + 1 < len(self.blocks) and self.blocks[first + 1].startswith("LN"):
            first += 1  # post-LN: the attention block ends after the norm that follows the addition
        return tuple(first + k for k in range(len(self.scopes)))

    def __hash__(self) -> int:  # scope_labels is a dict; a layout is identified by its id
        return hash(self.id)

    @property
    def pre_ff_checks(self) -> tuple[str, ...]:
        """Check points up to FF's input: they do not depend on the FF integrated gradients (a
        numerical IG is not complete, so only these are enforced under it)."""
        return self.checks[: self.checks.index(self.ff_input) + 1]

    @property
    def ln_positions(self) -> tuple[int, ...]:
        """Indexes in `blocks` of the layer's norms (``LN1``, ``LN2``)."""
        return tuple(k for k, b in enumerate(self.blocks) if b.startswith("LN"))

    @property
    def k21_points(self) -> dict[str, str]:
        """K21 norm-based method -> the check point whose terms it measures (ATTN, ATTN + RES, and
        ATTN + RES + the norm in front of FF)."""
        points = {"ATTN-N": "ATTN", "ATTNRES-N": self.attn_res}
        if self.ff_input in self.scopes:  # a parallel layer has no norm after ATTN + RES: not defined there
            points["ATTNRESLN-N"] = self.ff_input
        return points

    def scope_after(self, component: str) -> str:
        """The scope reached by the first `components` entry equal to ``component``."""
        return self.scopes[self.components.index(component) + 1]

    def cumulative(self) -> tuple[tuple[str, str], ...]:
        """(from, to) scope pairs of the K24 cumulative changes: from ``ATB`` to every later scope."""
        return tuple((self.scopes[0], t) for t in self.scopes[1:])


POST_LN = Layout(
    id="post",
    label="post-LN",
    formula="x' = LN1(x + ATTN(x)),  y = LN2(x' + FF(x'))",
    norm_first=False,
    blocks=("ATTN", "RES", "LN1", "FF", "RES", "LN2"),
    scopes=("ATB", "ATBFF", "ATBFFRES", "ATBFFRESLN"),
    components=("FF", "RES", "LN"),
    whole_layer="ATBFFRESLN",
    attn_res="ATTNRES",
    ff_input="ATB",
    ff_scopes=("ATBFF", "ATBFFRES", "ATBFFRESLN"),
    ff_before="ATB",
    ff_after="ATBFF",
    checks=("ATTN", "ATTNRES", "ATB", "ATBFF", "ATBFFRES", "ATBFFRESLN"),
    scope_labels={"ATB": "attention block (ATTN + RES + LN1)", "ATBFF": "after FF",
                  "ATBFFRES": "after FF + RES", "ATBFFRESLN": "whole layer (after LN2)"},
)

PRE_LN = Layout(
    id="pre",
    label="pre-LN",
    formula="x' = x + ATTN(LN1(x)),  y = x' + FF(LN2(x'))",
    norm_first=True,
    blocks=("LN1", "ATTN", "RES", "LN2", "FF", "RES"),
    scopes=("ATB", "ATBLN", "ATBLNFF", "ATBLNFFRES"),
    components=("LN", "FF", "RES"),
    whole_layer="ATBLNFFRES",
    attn_res="ATB",
    ff_input="ATBLN",
    ff_scopes=("ATBLNFF", "ATBLNFFRES"),
    ff_before="ATBLN",
    ff_after="ATBLNFF",
    checks=("LN1", "ATTN", "ATB", "ATBLN", "ATBLNFF", "ATBLNFFRES"),
    scope_labels={"ATB": "attention block (LN1 + ATTN + RES)", "ATBLN": "after LN2 (FF's input)",
                  "ATBLNFF": "after FF", "ATBLNFFRES": "whole layer (after FF + RES)"},
)

SANDWICH = Layout(
    id="sandwich",
    label="sandwich-norm",
    formula="h = x + N_pa(ATTN(N_in(x))),  y = h + N_po(FF(N_pf(h)))",
    norm_first=True,
    blocks=("LN1", "ATTN", "LNA", "RES", "LN2", "FF", "LNF", "RES"),
    scopes=("ATB", "ATBLN", "ATBLNFF", "ATBLNFFLN", "ATBLNFFLNRES"),
    components=("LN", "FF", "post-FF LN", "RES"),
    whole_layer="ATBLNFFLNRES",
    attn_res="ATB",
    ff_input="ATBLN",
    ff_scopes=("ATBLNFF", "ATBLNFFLN", "ATBLNFFLNRES"),
    ff_before="ATBLN",
    ff_after="ATBLNFF",
    checks=("LN1", "ATTN", "ATTNLN", "ATB", "ATBLN", "ATBLNFF", "ATBLNFFLN", "ATBLNFFLNRES"),
    scope_labels={"ATB": "attention block (N_in + ATTN + N_post-attn + RES)", "ATBLN": "after the pre-FF norm (FF's input)",
                  "ATBLNFF": "after FF", "ATBLNFFLN": "after the post-FF norm",
                  "ATBLNFFLNRES": "whole layer (after the post-FF norm + RES)"},
)
"""Gemma-2/3 (and OLMo-2): a norm on each block's input and on its output before the residual addition.
Every norm is linear once its per-token scale is frozen at the real vector it normalises."""

PARALLEL = Layout(
    id="parallel",
    label="parallel attention + FF",
    formula="y = x + ATTN(LN1(x)) + FF(LN2(x))",
    norm_first=True,
    blocks=("LN1", "ATTN", "RES", "LN2(x)", "FF", "RES"),  # LN2 reads the layer input x, not ATB
    scopes=("ATB", "ATBPFF"),
    components=("FF",),
    whole_layer="ATBPFF",
    attn_res="ATB",
    ff_input="LN2",
    ff_scopes=("ATBPFF",),
    ff_before="ATB",
    ff_after="ATBPFF",
    checks=("LN1", "ATTN", "LN2", "FF", "ATBPFF"),
    scope_labels={"ATB": "attention block (x + attention branch)",
                  "ATBPFF": "whole layer (+ the FF branch, which reads x_i alone: its map is diagonal)"},
    scope_blocks=(2, 5),  # ATB after the first addition, the whole layer after the FF branch's addition
)
"""GPT-NeoX/Pythia (``use_parallel_residual``), Phi: attention and FF read the same layer input. In the
per-layer view FF at position i sees only x_i, so its whole output is attributed to token i (a
diagonal map); there is no norm after the attention block, so K21's ATTNRESLN-N is not defined."""

LAYOUTS: tuple[Layout, ...] = (POST_LN, PRE_LN, SANDWICH, PARALLEL)
"""Every layout, in display order."""

_BY_ID = {lay.id: lay for lay in LAYOUTS}


def layout(layout_id: str) -> Layout:
    """The layout stored as ``layout_id`` (``models.ln_position``); unknown ids fail with the known ones."""
    try:
        return _BY_ID[layout_id]
    except KeyError:
        raise KeyError(f"unknown layer layout {layout_id!r}; known: {', '.join(_BY_ID)}") from None


def layout_ids() -> tuple[str, ...]:
    return tuple(_BY_ID)


def layout_for_scopes(scopes) -> Layout | None:
    """The layout whose K24 scopes include every scope in ``scopes`` beyond the shared ``ATB``, or None
    (for tables that lack the ``models`` table; ambiguous or unknown sets give None)."""
    seen = set(scopes)
    hits = [lay for lay in LAYOUTS if seen <= set(lay.scopes) and seen - {lay.scopes[0]}]
    return hits[0] if len(hits) == 1 else None


# ------------------------------------------------------------------------------------------- K21

K21_METHODS: tuple[str, ...] = ("ATTN-W", "ATTN-N", "ATTNRES-W", "ATTNRES-N", "ATTNRESLN-N")
"""The five K21 context-mixing methods, in the paper's order."""

K21_METHOD_LABELS: dict[str, str] = {
    "ATTN-W": "attention weights",
    "ATTN-N": "attention norm ||alpha f(x)||",
    "ATTNRES-W": "attention weights + residual (0.5 alpha + 0.5 I)",
    "ATTNRES-N": "norm of attention + residual",
    "ATTNRESLN-N": "norm of attention + residual + layer norm",
}

TOKEN_CATEGORIES: tuple[str, ...] = ("Normal", "[MASK]", "[CLS]", "[SEP]")
"""K21 token categories (``k21_tokens.category``); RoBERTa's ``<mask>``, ``<s>``, ``</s>`` map to these."""
OVERALL = "Overall"
"""The pseudo-category of all tokens in K21 Fig. 3 statistics."""
SPECIAL_TOKEN_CATEGORIES: tuple[str, ...] = ("[CLS]", "[SEP]")
"""Categories dropped for the "without [CLS], [SEP]" frequency correlation."""

PAIR_CATEGORIES: tuple[str, ...] = ("special token", "same word", "multi-word name", "adjacent",
                                    "identical token", "punctuation", "other")
"""K24 pair categories; a pair gets the **first** that applies, in exactly this order."""

# --------------------------------------------------------------------------------- result tables

MODELS = ["model", "source", "family", "class_name", "ln_position", "norm", "activation", "gated", "d_model",
          "layers", "heads", "kv_heads", "ff_size", "params", "fingerprint", "dtype", "device", "multipliers", "licence"]
RECON_ERRORS = ["model", "dataset", "layer", "scope", "max_rel_error"]
DATASETS = ["dataset", "model", "name", "n_samples", "mean_tokens", "domain", "source", "licence", "hash", "built"]
K21 = {
    "k21_tokens": ["model", "dataset", "seq", "layer", "pos", "token", "category", *K21_METHODS],
    "k21_freq": ["model", "dataset", "seq", "pos", "token", "category", "freq_rank", *K21_METHODS],
    "k21_expansion": ["model", "layer", "expansion_rate"],
    "k21_maps": ["model", "example", "layer", "method", "i", "j", "token_i", "token_j", "value"],
    "recon_errors": RECON_ERRORS,
}
K24 = {
    "k24_ctx": ["model", "dataset", "layer", "kind", "component", "from_scope", "to_scope", "change",
                "change_sd", "n_seqs"],
    "k24_ffamp_pairs": ["model", "dataset", "layer", "rank", "seq", "i", "j", "token_i", "token_j", "amp",
                        "before", "after", "category", "context"],
    "k24_ffamp_base": ["model", "dataset", "layer", "category", "top_count", "top_share", "base_count",
                       "base_share"],
    "k24_res_norms": ["model", "dataset", "layer", "ff_norm_mean", "res_norm_mean", "ratio_mean", "ratio_q10",
                      "ratio_q50", "ratio_q90"],
    "k24_ln_dims": ["model", "dataset", "layer", "dim", "ff_change", "ln_weight", "ln_out_change", "kept_ratio"],
    "k24_maps": ["model", "example", "layer", "scope", "i", "j", "token_i", "token_j", "value"],
}
TABLES: dict[str, list[str]] = {"models": MODELS, "datasets": DATASETS, **K21, **K24}
"""Every result table's columns, in order (ARCHITECTURE.md documents the same)."""

# ------------------------------------------------------------ conventions a user sees (SPEC §8)

FIRST_LAYER = 1
"""Layers count from 1 wherever a user reads or passes one (API arguments and results, notebook frames,
`load_results`, `check`, CSVs, plot titles, pages), as in both papers. The engine's indices and the
cache's parquet tables are 0-based; `user_layers` is the one shift between a table and what a user reads."""


def user_layers(frame):
    """A result table as a user reads it: its integer ``layer`` column counted from `FIRST_LAYER`.

    Returns a shifted copy; a frame without an integer ``layer`` column is returned as it is. Used by
    ``data.csv`` (`site.figure_files.csv_frame`) and `notebook.load_results`, so both count alike.
    """
    col = frame["layer"] if "layer" in getattr(frame, "columns", ()) else None
    if col is not None and getattr(col.dtype, "kind", "") in "iu":
        return frame.assign(layer=col + FIRST_LAYER)
    return frame


def example_label(number: int, text: str) -> str:
    """The ``example`` label of a K24 map example (``k24_maps``, notebook frames and charts):
    ``"<number>: <first six words>…"``, numbered from 1 like layers."""
    return f"{number}: {' '.join(str(text).split()[:6])}…"


def example_order(labels) -> list:
    """The distinct example ``labels`` in the order they were numbered (`example_label`): by the number
    before the first ``:`` (``"2: …"`` before ``"10: …"``), then as text; labels without a number follow,
    as text. The one order of examples in widgets and "the first example" (fewer than ten examples sort
    as their text did)."""
    def key(label):
        head, sep, _ = str(label).partition(":")
        return (0, int(head), str(label)) if sep and head.strip().isdigit() else (1, 0, str(label))

    return sorted(set(labels), key=key)


PERCENT = "%"
"""Unit of every K21 mixing ratio a user reads (0-100), wherever it is shown."""
RAW_NORM = "raw norm ||z_{i<-j}||"
"""Unit of a map value that is the norm of one token's term (K21 maps; `normalise=None` in the notebook)."""
ROW_NORMALISED = "row-normalised ||z_{i<-j}|| / sum_j ||z_{i<-j}|| (each row sums to 1)"
"""Unit of a map value divided by its row's sum (K24 maps; the notebook's default, `normalise="row"`)."""
K21_MAP_VALUE = ("raw norm ||z_{i<-j}|| for the -N methods; for ATTN-W the attention weight (mean over heads), "
                 "for ATTNRES-W 0.5 weight + 0.5 identity (each row sums to 1)")
"""Unit of a K21 map's ``value``: it depends on the row's ``method`` (the -W methods are weights, not norms)."""
FRACTION = "fraction (0-1)"
"""Unit of a share that is not a mixing ratio (K24 pair-category shares: a count over a count)."""

UNIT_TAGS: dict[str, str] = {
    PERCENT: "%",
    RAW_NORM: "raw norm",
    ROW_NORMALISED: "row-normalised",
    K21_MAP_VALUE: "raw norm; weight for -W methods",
    FRACTION: "fraction",
}
"""Unit -> the short tag a column name carries (`unit_column`): ``value (%)``, ``value (row-normalised)``."""

UNITS: dict[str, dict[str, str]] = {
    "k21_tokens": {m: PERCENT for m in K21_METHODS},
    "k21_freq": {m: PERCENT for m in K21_METHODS},
    "k21_maps": {"value": K21_MAP_VALUE},
    "k24_maps": {"value": ROW_NORMALISED},
    "k24_ffamp_pairs": {"amp": ROW_NORMALISED, "before": ROW_NORMALISED, "after": ROW_NORMALISED},
    "k24_ffamp_base": {"top_share": FRACTION, "base_share": FRACTION},
}
"""Result table -> column -> unit, for the measured columns a user reads with a unit (a mixing ratio, a
map value, a share). The cache's parquet tables keep the bare names; every table or figure data a user
reads (`load_results`, notebook frames, ``data.csv``) names the column with its unit (`unit_columns`).
Unitless measures (Spearman ρ, 1 − ρ, norm ratios, expansion rates, counts, ids) have none."""


def unit_column(name: str, unit: str) -> str:
    """The name a user reads for column ``name`` holding ``unit``: ``"<name> (<tag>)"`` (`UNIT_TAGS`)."""
    return f"{name} ({UNIT_TAGS[unit]})"


def unit_columns(frame, units):
    """``frame`` with each column of ``units`` (column -> unit) renamed `unit_column` (others as they
    are), and ``attrs["units"]``: new name -> unit, for the columns it has. The one rename shared by
    ``data.csv`` (`site.figure_files.csv_frame`), `notebook.load_results` and the notebook's frames,
    so a frame joins a figure's data by the same names. Returns a shallow copy."""
    names = {c: unit_column(c, u) for c, u in units.items() if c in frame.columns}
    out = frame.rename(columns=names)
    out.attrs = {**frame.attrs, "units": {names[c]: u for c, u in units.items() if c in names}}
    return out


__all__ = ["ERROR_BOUND", "Precision", "PRECISIONS", "precision", "CHUNK_RULES", "Layout", "POST_LN", "PRE_LN", "LAYOUTS", "layout", "layout_ids", "layout_for_scopes",
           "K21_METHODS", "K21_METHOD_LABELS", "TOKEN_CATEGORIES", "OVERALL", "SPECIAL_TOKEN_CATEGORIES",
           "PAIR_CATEGORIES", "MODELS", "RECON_ERRORS", "DATASETS", "K21", "K24", "TABLES", "FIRST_LAYER",
           "user_layers", "example_label", "example_order", "PERCENT", "RAW_NORM", "ROW_NORMALISED",
           "K21_MAP_VALUE", "FRACTION", "UNIT_TAGS", "UNITS", "unit_column", "unit_columns", "CONFIG_KEYS"]

CONFIG_KEYS = {"max_length": "datasets[].max_length", "k24_n": "datasets[].k24_n", "mask_rate": "k21.mask_rate",
               "seed": "k21.seed", "example": "k21.example", "examples": "k24.examples", "top_k": "k24.top_k",
               "include_special": "k24.include_special", "ffamp": "k24.ffamp_normalise", "ig": "ig"}
"""The configuration key a user sets for each analysis parameter (`analyses.base.input_params`) of the analyses' ``_params``:
what a figure diff names (``datasets[]``: the entry of the task's dataset). A test checks that every
parameter an analysis declares is here."""
