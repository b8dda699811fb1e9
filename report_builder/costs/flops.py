"""The FLOP model of the decomposition, the kind of work each analysis does, and how fast each kind
runs relative to a plain matmul.

The FLOP model, one sequence of ``n`` tokens and one layer (d model size, H query heads of d_h, H_kv
key/value heads, d' FF size, k = 2 for gated FFs, else 1; multiply-add = 2 FLOPs; element-wise work
is not counted except the IG path points). P is the number of token pairs an n^2 step covers
(`decompose.chunks.pair_count`): ``n^2`` for a bidirectional model; for a causal one the pairs
j <= i as the decomposition cuts them (SPEC §8) — query-row blocks over their source prefix, so a
little more than the minimum ``n (n+1) / 2`` (P_a: blocks of `chunks.BLOCK_ROWS` rows in the
attention step; P_f: the FF chunk's rows, `chunks.ff_tiles` at the default budget):

- forward (the HF forward pass every decomposition starts from; eager attention scores every pair):
  ``2 n d (H d_h + 2 H_kv d_h) + 2 n H d_h d + 4 n^2 H d_h + 2 (k+1) n d d'``
- attention step (`decompose_layer` up to the norm in front of FF; the K21 ratios):
  ``2 n d H_kv d_h + 2 n H d_h d + 2 P_a H d + 2 n H d`` (value vectors through W_V and each head's
  W_O, head sums, self terms)
- one map through Gram matrices (SPEC §6.1): ``2 n H^2 d + 2 P_a H^2``
- FF decomposition (`ff_flops`, SPEC §6.2): ``2 P_f d' d + k [2 n (H+1) d d' + 2 P_f H d']`` (the
  gated FF's two projections are one GEMM of width 2 d'), plus the residual terms ``2 P_f H d``, the
  bias and total pre-activations ``4 k n d d'``, the bias term through W2 ``2 n d' d``, the
  un-decomposed FF from the same pre-activations ``2 n d d'`` and the IG path points
  ``IG_POINT_FLOPS x points x n d'``.

Checked against `torch.utils.flop_counter.FlopCounterMode` on tiny models (tests/test_costs.py).

Each kind of work also pays a fixed time per sequence and layer (`OVERHEAD_S`), which dominates for
short sequences; each analysis its own statistics on the host CPU (`Work`), and each model its load.
"""
from __future__ import annotations

from dataclasses import dataclass

from report_builder import schema
from report_builder.decompose.chunks import BLOCK_ROWS, ff_tiles, pair_count

FLOP_COUNT_DOC = ("FF FLOPs per sequence and layer = 2 P d' d (second matmul over the P token pairs: n^2, or "
                  "for a causal model the pairs j <= i, minimal P = n (n+1) / 2) + k [2 n (H+1) d d' + 2 P H d'] "
                  "(first matmul through the heads: U = M w W1 for the H head vectors and the residual, then "
                  "the head sums; k = 2 for gated FFs); element-wise work not counted")

IG_POINT_FLOPS = 20
"""FLOPs per neuron and IG path point (activation and derivative, element-wise): an assumption; the
term is < 1 % of the FF decomposition at 64 numerical steps."""


@dataclass(frozen=True)
class Shape:
    """What the cost model needs of a model, from its config alone.

    Attributes:
        d: model size. layers: layer count. heads, kv_heads, head_dim: attention shape.
        d_ff: FF inner size. gated: SwiGLU/GeGLU FF. post_ln: post-LN layout (one Gram map to ATB).
        params: parameter count (estimated from the shape and the vocabulary).
        scopes: the layout's K24 scopes (maps per layer).
        causal: a decoder (each token attends to itself and earlier ones): the n^2 steps cover the
            pairs j <= i only (`pairs`).
        layout: the layout id (`schema.Layout.id`; empty when unknown).
    """

    d: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    gated: bool
    post_ln: bool
    params: int
    scopes: int = 4
    causal: bool = False
    layout: str = ""


def shape_of(config, adapter) -> Shape:
    """The `Shape` of a model from its HF config and adapter (no weights)."""
    f = adapter.facts(config)
    d, L, H = int(f["d_model"]), int(f["layers"]), int(f["heads"])
    kv = int(f.get("kv_heads") or H)
    dh = int(getattr(config, "head_dim", None) or d // H)
    dff, gated = int(f["ff_size"]), bool(f["gated"])
    per_layer = d * H * dh + 2 * d * kv * dh + H * dh * d + (3 if gated else 2) * d * dff + 4 * d
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    pos = int(getattr(config, "max_position_embeddings", 0) or getattr(config, "n_positions", 0) or 0)
    rope = getattr(config, "rope_theta", None) is not None or getattr(config, "rope_scaling", None) is not None
    params = L * per_layer + vocab * d + (0 if rope else pos * d)
    return Shape(d, L, H, kv, dh, dff, gated, adapter.layout.id == schema.POST_LN.id, params,
                 len(adapter.layout.scopes), bool(adapter.causal), adapter.layout.id)


def ff_rows(s: Shape, n: int, budget_bytes: int = 512 << 20, itemsize: int = 4) -> int:
    """Query rows per FF chunk for one sequence (`decompose.chunks.ff_tiles`; the sandwich layout's
    chunks count one projection's terms, `decompose.layouts.sandwich`)."""
    return ff_tiles(n, s.d, s.d_ff, budget_bytes=budget_bytes, itemsize=itemsize,
                    gated=s.gated and s.layout != schema.SANDWICH.id)[0]


def pairs(s: Shape, n: int, step: str = "ff", minimal: bool = False) -> int:
    """Token pairs an n^2 step of one sequence covers: ``n^2``; causal: the pairs j <= i as the
    ``step`` (``"ff"``: the FF chunks, ``"attention"``: the attention step's blocks) cuts them, or
    with ``minimal`` the ``n (n+1) / 2`` pairs j <= i themselves (`decompose.chunks.pair_count`)."""
    if minimal or not s.causal:
        return pair_count(n, s.causal)
    return pair_count(n, True, ff_rows(s, n) if step == "ff" else BLOCK_ROWS)


def forward_flops(s: Shape, n: int) -> int:
    """The HF forward pass of one sequence, one layer."""
    k = 2 if s.gated else 1
    return (2 * n * s.d * (s.heads * s.head_dim + 2 * s.kv_heads * s.head_dim) + 2 * n * s.heads * s.head_dim * s.d
            + 4 * n * n * s.heads * s.head_dim + 2 * (k + 1) * n * s.d * s.d_ff)


def attention_flops(s: Shape, n: int) -> int:
    """The attention step of the decomposition (value vectors, head sums): the K21 ratios."""
    p = pairs(s, n, "attention")
    return (2 * n * s.d * s.kv_heads * s.head_dim + 2 * n * s.heads * s.head_dim * s.d + 2 * p * s.heads * s.d
            + 2 * n * s.heads * s.d)


def gram_map_flops(s: Shape, n: int) -> int:
    """One n x n norm map through per-source H x H Gram matrices (SPEC §6.1)."""
    return 2 * n * s.heads * s.heads * s.d + 2 * pairs(s, n, "attention") * s.heads * s.heads


def ff_flops(n: int, d: int, d_ff: int, heads: int, gated: bool, pairs: int | None = None) -> int:
    """FLOPs of the FF decomposition of one sequence and layer over ``pairs`` token pairs (default
    ``n^2``; see `FLOP_COUNT_DOC` and `pairs`)."""
    k = 2 if gated else 1
    p = n * n if pairs is None else pairs
    return 2 * p * d_ff * d + k * (2 * n * (heads + 1) * d * d_ff + 2 * p * heads * d_ff)


def ig_points(gated: bool, method: str = "closed", steps: int = 64, gl_nodes: int = 16) -> int:
    """Activation evaluations per neuron of the FF IG: 1 (closed form), ``steps`` (numerical), or
    ``gl_nodes`` (gated closed form, one Gauss-Legendre panel: a lower bound)."""
    if method != "closed":
        return steps
    return gl_nodes if gated else 1


def full_layer_flops(s: Shape, n: int, ig_pts: int = 1) -> int:
    """Every scope's map of one layer (the K24 pass): attention step, Gram maps, FF decomposition."""
    k = 2 if s.gated else 1
    grams = 1 if s.post_ln else 2
    p = pairs(s, n, "ff")
    return (attention_flops(s, n) + grams * gram_map_flops(s, n) + ff_flops(n, s.d, s.d_ff, s.heads, s.gated, p)
            + 2 * p * s.heads * s.d + 4 * k * n * s.d * s.d_ff + 2 * n * s.d_ff * s.d + 2 * n * s.d * s.d_ff
            + IG_POINT_FLOPS * ig_pts * n * s.d_ff)


def expansion_flops(s: Shape) -> int:
    """K21 expansion rates: each layer's value->output map applied to the identity (weights only)."""
    return s.layers * (2 * s.d * s.d * s.kv_heads * s.head_dim + 2 * s.d * s.heads * s.head_dim * s.d)


def work_flops(work: str, s: Shape, n: int, ig_pts: int = 1) -> int:
    """Decomposition FLOPs of one sequence and layer for a kind of work (forward pass excluded).

    ``work``: one of `analyses.base.WORKS`, an analysis' ``work.kind`` (each analysis declares its
    `analyses.base.Work` on itself)."""
    if work == "ratios":
        return attention_flops(s, n)
    if work == "maps":
        return attention_flops(s, n) + 2 * gram_map_flops(s, n)
    if work == "full":
        return full_layer_flops(s, n, ig_pts)
    return 0


EFFICIENCY: dict[str, float] = {"forward": 0.6, "ratios": 0.3, "maps": 0.3, "full": 0.65, "weights": 0.6}
"""Achieved FLOP/s of each kind of work as a fraction of a plain matmul measured in the same run
(the FLOP-proportional part; `OVERHEAD_S` is the fixed part).

Provenance: ``report-builder bench --threads 1`` timings (per layer, medians of 3 interleaved
repeats, the matmul measured in the same run) on the development machine (2 shared CPU cores,
float32, one thread) for shapes ``base`` (BERT-base) and ``llama-small`` (SmolLM2-135M) at n = 128
and n = 32, fitted per kind as ``t = FLOPs / (matmul x e) + c`` with this module's FLOP model:
forward e 0.61 / 1.2, ratios (``fast_ratios``) 0.24 / 0.50, maps (``fast_k21_maps``) 0.28 / 0.50,
full (``fast_full``) 0.58 / 0.91 for base / llama-small; the constants sit between the two, nearer
BERT-base. ``weights`` (k21_expansion: one GEMM per layer) takes the forward pass's factor. With
causal pairs counted as done (`pairs`), the same bench gave full 0.62 for SmolLM2 at n = 128 (0.89 at
n = 4096, one layer) and 0.88 for the BERT-base shape at n = 128 (``--threads 1``, load 1-2): the
factor still holds.
"""

OVERHEAD_S: dict[str, dict[str, float]] = {
    "cpu": {"forward": 3.0e-3, "ratios": 2.0e-3, "maps": 1.5e-3, "full": 2.0e-3},
    "cuda": {"forward": 1.0e-4, "ratios": 1.0e-4, "maps": 1.0e-4, "full": 2.0e-4},
}
"""Fixed seconds per (sequence, layer) of each kind of work, whatever the length (Python and per-op
costs around the GEMMs). CPU: the ``c`` of the same fits (forward 2.9 / 3.3 ms, ratios 4.3 / 1.3,
maps 2.5 / 1.1, full -2.4 / 20 for base / llama-small: noisy on a shared machine). CUDA: an
assumption (~10-20 kernel launches of ~10 µs per layer), not measured."""


def default_factors(kind: str) -> tuple[dict[str, float], dict[str, float], tuple[str, ...]]:
    """The factors a plan prices a ``kind`` of device (``cpu``, ``cuda``) with when no GPU check measured it:
    (efficiency per kind of work, fixed seconds per (sequence, layer) per kind, the kinds whose fixed time
    includes their host statistics: none). The one place `estimate` reads `EFFICIENCY` and `OVERHEAD_S`."""
    return dict(EFFICIENCY), dict(OVERHEAD_S[kind]), ()
