"""What a build will cost before it runs: FLOPs, seconds, peak memory and disk of every planned task.

`estimate` prices the tasks of `analyses.runner.plan` without loading any weights: model sizes come
from the config (through the adapter's facts), token lengths from the real evaluation sets encoded
with each model's tokenizer (the sequences each task decomposes: the first ``task.size`` items of
its set, the K21 pair or the K24 examples). Seconds = FLOPs / (matmul FLOP/s x efficiency), where
the matmul rate is measured on the spot on the chosen device (`calibrate`) — or, for a GPU that is
not here, taken from a named GPU's datasheet peak (`GPUS`) or ``--gpu-flops`` — and the efficiency
of each kind of work relative to that matmul is what ``report-builder bench`` measured (`EFFICIENCY`).

The FLOP model, one sequence of ``n`` tokens and one layer (d model size, H query heads of d_h, H_kv
key/value heads, d' FF size, k = 2 for gated FFs, else 1; multiply-add = 2 FLOPs; element-wise work
is not counted except the IG path points):

- forward (the HF forward pass every decomposition starts from):
  ``2 n d (H d_h + 2 H_kv d_h) + 2 n H d_h d + 4 n^2 H d_h + 2 (k+1) n d d'``
- attention step (`decompose_layer` up to the norm in front of FF; the K21 ratios):
  ``2 n d H_kv d_h + 2 n H d_h d + 2 n^2 H d + 2 n H d`` (value vectors through W_V and each head's
  W_O, head sums, self terms)
- one map through Gram matrices (SPEC §6.1): ``2 n H^2 d + 2 n^2 H^2``
- FF decomposition (`ff_flops`, SPEC §6.2): ``2 n^2 d' d + k [2 n (H+1) d d' + 2 n^2 H d']``, plus the
  residual terms ``2 n^2 H d``, the bias and total pre-activations ``4 k n d d'``, the bias term
  through W2 ``2 n d' d``, the un-decomposed FF ``2 (k+1) n d d'`` and the IG path points
  ``IG_POINT_FLOPS x points x n d'``.

Checked against `torch.utils.flop_counter.FlopCounterMode` on tiny models (tests/test_costs.py).

Each kind of work also pays a fixed time per sequence and layer (`OVERHEAD_S`), which dominates for
short sequences; each analysis its own statistics on the host CPU (`Work`), and each model its load.

Pitfall: the estimate is only as good as the efficiency factors; they were measured on one CPU
(see `EFFICIENCY`), and a GPU runs short sequences far below its matmul rate (kernel launches), so a
GPU estimate is a lower bound until ``bench --device cuda`` has measured its factors.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.analyses.runner import Plan, Task
    from report_builder.cache import Cache

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

# ------------------------------------------------------------------ the FLOP model

FLOP_COUNT_DOC = ("FF FLOPs per sequence and layer = 2 n^2 d' d (second matmul over all n^2 terms) "
                  "+ k [2 n (H+1) d d' + 2 n^2 H d'] (first matmul through the heads: U = M w W1 for the "
                  "H head vectors and the residual, then the head sums; k = 2 for gated FFs); "
                  "element-wise work not counted")

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
    return Shape(d, L, H, kv, dh, dff, gated, adapter.layout.id == "post", params, len(adapter.layout.scopes))


def forward_flops(s: Shape, n: int) -> int:
    """The HF forward pass of one sequence, one layer."""
    k = 2 if s.gated else 1
    return (2 * n * s.d * (s.heads * s.head_dim + 2 * s.kv_heads * s.head_dim) + 2 * n * s.heads * s.head_dim * s.d
            + 4 * n * n * s.heads * s.head_dim + 2 * (k + 1) * n * s.d * s.d_ff)


def attention_flops(s: Shape, n: int) -> int:
    """The attention step of the decomposition (value vectors, head sums): the K21 ratios."""
    return (2 * n * s.d * s.kv_heads * s.head_dim + 2 * n * s.heads * s.head_dim * s.d + 2 * n * n * s.heads * s.d
            + 2 * n * s.heads * s.d)


def gram_map_flops(s: Shape, n: int) -> int:
    """One n x n norm map through per-source H x H Gram matrices (SPEC §6.1)."""
    return 2 * n * s.heads * s.heads * s.d + 2 * n * n * s.heads * s.heads


def ff_flops(n: int, d: int, d_ff: int, heads: int, gated: bool) -> int:
    """FLOPs of the FF decomposition of one sequence and layer (see `FLOP_COUNT_DOC`)."""
    k = 2 if gated else 1
    return 2 * n * n * d_ff * d + k * (2 * n * (heads + 1) * d * d_ff + 2 * n * n * heads * d_ff)


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
    return (attention_flops(s, n) + grams * gram_map_flops(s, n) + ff_flops(n, s.d, s.d_ff, s.heads, s.gated)
            + 2 * n * n * s.heads * s.d + 4 * k * n * s.d * s.d_ff + 2 * n * s.d_ff * s.d + 2 * (k + 1) * n * s.d * s.d_ff
            + IG_POINT_FLOPS * ig_pts * n * s.d_ff)


def expansion_flops(s: Shape) -> int:
    """K21 expansion rates: each layer's value->output map applied to the identity (weights only)."""
    return s.layers * (2 * s.d * s.d * s.kv_heads * s.head_dim + 2 * s.d * s.heads * s.head_dim * s.d)


WORKS = ("none", "weights", "ratios", "maps", "full")
"""Kinds of work: nothing to compute, weights only, K21 ratios (attention step), K21 maps (attention
step + two Gram maps), every scope's map (the full layer)."""

@dataclass(frozen=True)
class Work:
    """What one analysis costs besides its FLOPs.

    Attributes:
        kind: one of `WORKS`.
        host_s, host_pair_s: seconds per (sequence, layer), fixed and per token pair, of the
            analysis' own statistics and tables on the host CPU (numpy/pandas; also on GPU builds).
        task_s: fixed host seconds per task (k21_frequency maps the word frequencies to the vocabulary).
        whole_set_rows: its tables have a row per token of the whole set even when it decomposes
            nothing (k21_frequency of a causal model reuses k21_mixing's pass).
    """

    kind: str
    host_s: float = 0.0
    host_pair_s: float = 0.0
    task_s: float = 0.0
    whole_set_rows: bool = False


WORK_OF: dict[str, Work] = {
    "architecture": Work("none"),
    "k21_expansion": Work("weights"),
    "k21_example": Work("maps", 2e-3, 3e-6),
    "k21_mixing": Work("ratios", 3e-4),
    "k21_frequency": Work("ratios", 3e-4, task_s=0.2, whole_set_rows=True),
    "k24_scopes": Work("full", 4e-3, 1.2e-6),
    "k24_examples": Work("full", 5e-3, 3e-6),
}
"""Analysis id -> its kind of work and host-side costs (a test checks every registered analysis has
one). Host costs: timed on the development machine with the decomposition results precomputed
(`k24_compute.scope_analyses` and `k21_compute.mixing_ratios` fed cached `LayerResult`s, MiniLM and
SmolLM2, n = 16-128): K24 statistics 3-29 ms per sequence and layer, ~4 ms + 1.2 µs per token pair
(Spearman over the n^2 pairs of each scope pair, FF-amp top pairs); the K21 tables 0.1-0.7 ms. The
example maps' tables (one row per pair, scope and layer) and k21_frequency's rank table (0.1-0.3 s
per task, also for causal models, which decompose nothing for it) from the smoke build's task times."""


def work_flops(work: str, s: Shape, n: int, ig_pts: int = 1) -> int:
    """Decomposition FLOPs of one sequence and layer for a kind of work (forward pass excluded)."""
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
BERT-base. ``weights`` (k21_expansion: one GEMM per layer) takes the forward pass's factor.
"""

OVERHEAD_S: dict[str, dict[str, float]] = {
    "cpu": {"forward": 3.0e-3, "ratios": 2.0e-3, "maps": 1.5e-3, "full": 2.0e-3},
    "cuda": {"forward": 1.0e-4, "ratios": 1.0e-4, "maps": 1.0e-4, "full": 2.0e-4},
}
"""Fixed seconds per (sequence, layer) of each kind of work, whatever the length (Python and per-op
costs around the GEMMs). CPU: the ``c`` of the same fits (forward 2.9 / 3.3 ms, ratios 4.3 / 1.3,
maps 2.5 / 1.1, full -2.4 / 20 for base / llama-small: noisy on a shared machine). CUDA: an
assumption (~10-20 kernel launches of ~10 µs per layer), not measured."""


# ------------------------------------------------------------------ memory and disk


def capture_bytes(s: Shape, n: int, itemsize: int) -> int:
    """What the forward pass and the capture hold for one sequence: every layer's probabilities
    (returned and captured) and the layer input plus 6 check-point tensors."""
    return sequence_capture_bytes(n, s.d, s.heads, s.layers, itemsize)


def sequence_capture_bytes(n: int, d: int, heads: int, layers: int, itemsize: int) -> int:
    """`capture_bytes` from the sizes alone (``bench.batch_for_budget`` sizes forward batches by it)."""
    return itemsize * layers * (2 * heads * n * n + 8 * n * d)


def layer_fixed_bytes(n: int, d: int, d_ff: int, heads: int, gated: bool, itemsize: int) -> int:
    """Numbers `decompose_layer` holds outside the chunk loop (probabilities, Gram products, per-head
    vectors through W1, per-token vectors, maps), in bytes."""
    k = 2 if gated else 1
    numbers = 4 * heads * n * n + 12 * n * n + n * heads * (2 * d + k * d_ff) + 24 * n * d + 8 * k * n * d_ff
    return numbers * itemsize


def chunk_bytes(s: Shape, n: int, budget: int, itemsize: int, batch: int = 1) -> int:
    """The FF chunk loop's numbers: rows per chunk as `decompose.layer.default_chunk_rows` picks them."""
    from report_builder.decompose.layer import default_chunk_rows

    rows = default_chunk_rows(n, s.d, s.d_ff, budget_bytes=budget, itemsize=itemsize, gated=s.gated, batch=batch)
    return batch * rows * n * (3 * s.d_ff + 5 * s.d) * itemsize


ROW_BYTES: dict[str, float] = {"k21_tokens": 28, "k21_maps": 3.2, "k21_freq": 48, "k24_ffamp_pairs": 52,
                               "k24_ln_dims": 30, "k24_maps": 6.3}
"""Parquet bytes per row of the long result tables, measured on the smoke build's cache entries
((file sizes - `PARQUET_FILE_BYTES` each) / rows; runs and dictionaries compress well: a map row is
3-6 bytes). Other tables are estimated from their columns (`_row_bytes`); they are small, so their
files' fixed size dominates."""

# bytes per stored cell where a table has no measured row size (uncompressed widths)
_CELL = {"str": 1, "token": 6, "num": 4, "int": 2, "context": 60}


def _row_bytes(cols: Iterable[str]) -> int:
    b = 0
    for c in cols:
        if c in ("model", "dataset", "scope", "method", "category", "example", "source", "family", "norm"):
            b += _CELL["str"]
        elif c.startswith("token"):
            b += _CELL["token"]
        elif c == "context":
            b += _CELL["context"]
        elif c in ("seq", "layer", "pos", "i", "j", "rank", "dim", "freq_rank"):
            b += _CELL["int"]
        else:
            b += _CELL["num"]
    return b


PARQUET_FILE_BYTES = 8 * KIB
"""Fixed size of one small parquet file (schema, statistics, footer): the smoke build's one-row
tables are 5-11 KiB."""


def table_rows(analysis: str, s: Shape, lengths: list[int], causal: bool, top_k: int, n_scopes: int) -> dict[str, int]:
    """Rows of each table an analysis writes (estimates where the count depends on the data)."""
    L = s.layers
    tok = sum(lengths)
    pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lengths)
    if analysis == "architecture":
        return {"models": 1}
    if analysis == "k21_expansion":
        return {"k21_expansion": L}
    if analysis == "k21_example":
        return {"k21_maps": 5 * L * sum(n * n for n in lengths)}
    if analysis == "k21_mixing":
        return {"k21_tokens": L * tok, "recon_errors": 3 * L, "dataset_stats": 1}
    if analysis == "k21_frequency":
        return {"k21_freq": tok}
    if analysis == "k24_scopes":
        return {"k24_ctx": 2 * n_scopes * L, "k24_ffamp_pairs": top_k * L, "k24_ffamp_base": 8 * L,
                "k24_res_norms": L, "k24_ln_dims": L * s.d, "recon_errors": n_scopes * L}
    if analysis == "k24_examples":
        return {"k24_maps": n_scopes * L * pairs}
    return {}


def disk_bytes(rows: dict[str, int]) -> int:
    """Bytes of a cache entry with these table rows (columns from `schema.TABLES`)."""
    from report_builder.schema import TABLES

    return int(sum(PARQUET_FILE_BYTES + r * ROW_BYTES.get(t, _row_bytes(TABLES.get(t, ()))) for t, r in rows.items())
               + 2 * KIB)


# ------------------------------------------------------------------ devices


@dataclass(frozen=True)
class GPU:
    """A named GPU's datasheet numbers (dense, i.e. without the 2:4 sparsity factor), TFLOP/s."""

    name: str
    memory_bytes: int
    tflops: dict[str, float]


GPUS: dict[str, GPU] = {
    "A100": GPU("NVIDIA A100 SXM4 80GB", 80 * 10**9, {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    "H100": GPU("NVIDIA H100 SXM5 80GB", 80 * 10**9, {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    "H200": GPU("NVIDIA H200 SXM 141GB", 141 * 10**9, {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
}
"""Peak dense throughput from NVIDIA's datasheets (TF32/BF16/FP16 tensor-core figures are half the
datasheet's "with sparsity" numbers). The H200 has the H100 SXM's compute and more memory."""

ASSUMED_GPU_MATMUL_EFFICIENCY = 0.7
"""Fraction of a named GPU's peak a large matmul reaches (cuBLAS commonly gets 60-80 %): an
assumption standing in for the calibration matmul on a GPU that is not here."""


def precision_of(dtype: str, tf32: bool = False) -> str:
    """The GPU peak a dtype runs at: ``fp32`` (``tf32`` when TF32 matmuls are on), ``bf16``, ``fp16``."""
    if dtype in ("bfloat16", "bf16"):
        return "bf16"
    if dtype in ("float16", "fp16", "half"):
        return "fp16"
    return "tf32" if tf32 or dtype == "tf32" else "fp32"


def _itemsize(dtype: str) -> int:
    return 2 if precision_of(dtype) in ("bf16", "fp16") else 4


def calibrate(device: str = "cpu", dtype: str = "float32", threads: int = 1, seconds: float = 0.4) -> dict[str, Any]:
    """Measure a plain matmul's FLOP/s now, on ``device``, as a build there would run it.

    CPU: ``threads`` worker threads each run single-threaded GEMMs of the FF chunk's shape at once
    (the build's deterministic path runs sequences in parallel the same way). CUDA: one large GEMM
    in the build's dtype. Returns the rate and how it was measured.
    """
    import torch

    dev = torch.device(device)
    tdt = torch.bfloat16 if precision_of(dtype) == "bf16" else torch.float16 if precision_of(dtype) == "fp16" \
        else torch.float32
    if dev.type == "cuda":
        m = k = nn = 8192
        a = torch.randn(m, k, device=dev, dtype=tdt)
        b = torch.randn(k, nn, device=dev, dtype=tdt)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        calls, t0 = 0, time.perf_counter()
        while True:
            a @ b
            calls += 1
            if calls % 5 == 0:
                torch.cuda.synchronize()
                if time.perf_counter() - t0 >= seconds:
                    break
        wall = time.perf_counter() - t0
        return {"flops_per_s": 2 * m * k * nn * calls / wall, "shape": [m, k, nn], "calls": calls, "seconds": wall,
                "device": torch.cuda.get_device_name(dev), "workers": 1, "dtype": str(tdt).replace("torch.", ""),
                "tf32": bool(torch.backends.cuda.matmul.allow_tf32), "how": "measured now: one GEMM on the device"}
    m, k, nn = 1024, 3072, 768  # an FF chunk GEMM of BERT-base shape: (rows x d') @ (d' x d)
    workers = max(1, int(threads))
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g, dtype=torch.float32).to(tdt)
    b = torch.randn(k, nn, generator=g, dtype=torch.float32).to(tdt)
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    counts = [0] * workers
    start = threading.Barrier(workers + 1)
    stop = threading.Event()

    def work(w: int) -> None:
        torch.set_num_threads(1)
        a @ b  # warm-up
        start.wait()
        while not stop.is_set():
            a @ b
            counts[w] += 1

    try:
        ts = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(workers)]
        for t in ts:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join()
        wall = time.perf_counter() - t0
    finally:
        torch.set_num_threads(prev)
    calls = sum(counts)
    return {"flops_per_s": 2 * m * k * nn * calls / wall, "shape": [m, k, nn], "calls": calls, "seconds": wall,
            "device": "cpu", "workers": workers, "dtype": str(tdt).replace("torch.", ""), "tf32": False,
            "how": f"measured now: {workers} worker thread(s), single-threaded GEMMs, as the build runs"}


def device_rate(device: str, dtype: str, *, threads: int = 1, gpu: str | None = None,
                gpu_flops: float | None = None) -> dict[str, Any]:
    """The matmul FLOP/s the estimate divides by, and where it comes from.

    ``gpu_flops`` (TFLOP/s a matmul reaches) or ``gpu`` (a name in `GPUS`: its dense peak for the
    dtype x `ASSUMED_GPU_MATMUL_EFFICIENCY`) override the measurement; otherwise the calibration
    matmul runs on ``device`` when it is here. Returns ``flops_per_s`` None (no estimate) with a
    ``note`` when the device is absent and neither was given.
    """
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    if gpu_flops is not None:
        return {"flops_per_s": float(gpu_flops) * 1e12, "kind": "cuda", "source": "given",
                "how": f"--gpu-flops {gpu_flops:g} TFLOP/s (a matmul's rate, as given)", "memory_bytes": None}
    if gpu is not None:
        g = _gpu(gpu)
        prec = precision_of(dtype)
        peak = g.tflops[prec]
        return {"flops_per_s": peak * 1e12 * ASSUMED_GPU_MATMUL_EFFICIENCY, "kind": "cuda", "source": "named",
                "gpu": g.name, "precision": prec, "peak_tflops": peak, "memory_bytes": g.memory_bytes,
                "how": f"{g.name}: {prec} dense peak {peak:g} TFLOP/s (datasheet) x assumed matmul efficiency "
                       f"{ASSUMED_GPU_MATMUL_EFFICIENCY:g}"}
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            return {"flops_per_s": None, "kind": "cuda", "source": None, "memory_bytes": None,
                    "note": f"no CUDA device here, so no time estimate for --device {device}: pass --gpu "
                            f"{'|'.join(GPUS)} (datasheet peak x {ASSUMED_GPU_MATMUL_EFFICIENCY:g}) or --gpu-flops "
                            "TFLOPS (a matmul's rate)"}
        cal = calibrate(device, dtype)
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        return {"flops_per_s": cal["flops_per_s"], "kind": "cuda", "source": "calibrated", "calibration": cal,
                "memory_bytes": int(total), "how": f"{cal['device']}: {cal['how']}"}
    cal = calibrate("cpu", dtype, threads=threads)
    return {"flops_per_s": cal["flops_per_s"], "kind": "cpu", "source": "calibrated", "calibration": cal,
            "memory_bytes": _available_bytes(), "how": f"CPU: {cal['how']}"}


def _gpu(name: str) -> GPU:
    from report_builder.errors import UsageError

    for k, g in GPUS.items():
        if name.lower() == k.lower():
            return g
    raise UsageError(f"--gpu: unknown GPU {name!r}; known: {', '.join(GPUS)} (or give --gpu-flops TFLOPS)")


def _available_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover
        return None


# ------------------------------------------------------------------ per task


@dataclass
class TaskCost:
    """The cost of one task; ``cached`` tasks cost nothing to compute (their disk is already used)."""

    analysis: str
    model: str
    dataset: str | None
    shard: list[int] | None
    reduces: int
    sequences: int
    tokens: int
    max_tokens: int
    cached: bool
    key: str
    work: str
    flops: int
    forward_flops: int
    seconds: float | None
    device_seconds: float | None
    host_seconds: float
    load_seconds: float
    peak_bytes: int
    disk_bytes: int
    rows: dict[str, int] = field(default_factory=dict)


def balance(seconds: list[float], n: int) -> tuple[float, list[float]]:
    """Greedy balanced assignment (longest first, each to the least-loaded of ``n`` workers):
    the makespan and each worker's load. A task is never split."""
    loads = [0.0] * max(1, n)
    for s in sorted(seconds, reverse=True):
        k = min(range(len(loads)), key=loads.__getitem__)
        loads[k] += s
    return max(loads), loads


class _TokenRun:
    """The part of `analyses.base.Run` the input functions read: the subject, its set, a tokenizer."""

    def __init__(self, subject, tokenizer, eval_set):
        self.subject, self._tok, self._set = subject, tokenizer, eval_set

    def lm(self):
        return self

    @property
    def tokenizer(self):
        return self._tok

    def eval_set(self):
        return self._set


class _Lengths:
    """Token lengths of the sequences each task decomposes: the real sets encoded with each model's
    tokenizer by the same `analyses.inputs` functions the analyses call."""

    def __init__(self, plan: "Plan"):
        self.plan = plan
        self._tok: dict[tuple, Any] = {}
        self._sets: dict[tuple, list[int]] = {}

    def config_and_tokenizer(self, mc):
        key = (mc.source, mc.revision)
        if key not in self._tok:
            from report_builder.models.loading import config_and_tokenizer

            self._tok[key] = config_and_tokenizer(mc.source, mc.revision)
        return self._tok[key]

    def tokenizer_key(self, mc) -> str:
        """What identifies a tokenizer's output (models sharing a vocabulary share their lengths)."""
        import hashlib

        key = ("tokenizer", mc.source, mc.revision)
        if key not in self._tok:
            tok = self.config_and_tokenizer(mc)[1]
            backend = getattr(tok, "backend_tokenizer", None)
            text = backend.to_str() if backend is not None else repr(sorted(tok.get_vocab().items()))
            self._tok[key] = type(tok).__name__ + hashlib.sha256(text.encode()).hexdigest()[:16]
        return self._tok[key]

    def of(self, task: "Task") -> list[int]:
        from report_builder.analyses import registry

        a = registry.get(task.base)
        s = task.subject
        if a.inputs == "weights" or task.size == 0:
            return []
        return self.items(task, *(task.shard or (0, task.size)))

    def items(self, task: "Task", lo: int, hi: int) -> list[int]:
        """Lengths of items ``[lo, hi)`` of the task's input (the pair and the examples: all of them)."""
        from report_builder.analyses import inputs, registry

        a = registry.get(task.base)
        s = task.subject
        es = self.plan.sets[s.dataset.id] if s.dataset is not None else None
        run = _TokenRun(s, self.config_and_tokenizer(s.model)[1], es)
        if a.inputs == "pair":
            return [len(inputs.pair(run))]
        if a.inputs == "examples":
            return [len(e) for e in inputs.examples(run)[0]]
        key = (self.tokenizer_key(s.model), s.dataset.id, s.dataset.max_length, s.causal)
        if key not in self._sets:  # masking never changes a length: one encoding serves both inputs
            self._sets[key] = [len(e) for e in inputs.unmasked(run)]
        return self._sets[key][lo:hi]


def _batch_size(task: "Task") -> int:
    """Sequences per padded batch on the batched (GPU) path, as each analysis asks the engine."""
    b = task.subject.cfg.batch_size
    return {"k21_mixing": b, "k21_frequency": b, "k24_scopes": max(1, b // 2)}.get(task.base, 8)


LOAD_S = 1.0
"""Seconds to load a model besides reading its weights (imports, building the module): the smoke
build's MiniLM took 2.0 s, SmolLM2 (converted copy) 0.5 s."""
LOAD_BYTES_PER_S = 1 * GIB
"""Weight bytes read per second when a model loads (an assumption: a local SSD or the page cache)."""


def load_seconds(s: Shape, dtype: str) -> float:
    """Seconds to load a model: charged to its first task that computes (the executor loads it then)."""
    return LOAD_S + s.params * _itemsize(dtype) / LOAD_BYTES_PER_S


def task_cost(task: "Task", shape: Shape, lengths: list[int], *, cached: bool, rate: float | None, kind: str,
              workers: int, base_bytes: int, table_lengths: list[int] | None = None) -> TaskCost:
    """FLOPs, seconds, peak memory and disk of one task (a cached one computes nothing).

    ``lengths``: the sequences it decomposes (a shard: its range; a reduce: none); ``table_lengths``:
    those its tables cover when they differ (a reduce writes the whole analysis' tables).

    Seconds = device (FLOPs / (rate x efficiency) + `OVERHEAD_S` per sequence and layer) + host (the
    analysis' statistics, `Work.host_s`); the model load is added by `estimate`.
    """
    cfg = task.subject.cfg
    work = WORK_OF[task.base]
    pts = ig_points(shape.gated, cfg.ig.method, cfg.ig.steps)
    itemsize = _itemsize(cfg.dtype)
    causal = task.subject.causal
    fwd = sum(forward_flops(shape, n) for n in lengths) * shape.layers
    dec = sum(work_flops(work.kind, shape, n, pts) for n in lengths) * shape.layers
    if work.kind == "weights":
        dec = expansion_flops(shape)
    rows = table_rows(task.base, shape, table_lengths if table_lengths is not None else lengths, causal,
                      cfg.k24.top_k, shape.scopes)
    disk = disk_bytes(rows)
    weights = shape.params * itemsize
    budget = cfg.budget_bytes()
    n_max = max(lengths, default=0)
    if task.reduce:  # concatenates its shards' tables; loads no model
        peak = base_bytes
    elif work.kind == "none":
        peak = base_bytes + weights
    elif not lengths:
        peak = base_bytes + weights + (shape.d * shape.d * 8 if work.kind == "weights" else 0)
    elif kind == "cpu":  # deterministic path: `workers` sequences at once, each alone
        w = max(1, min(workers, len(lengths)))
        per = capture_bytes(shape, n_max, itemsize) + layer_fixed_bytes(n_max, shape.d, shape.d_ff, shape.heads,
                                                                         shape.gated, itemsize)
        if work.kind == "full":
            per += chunk_bytes(shape, n_max, max(1, budget // w), itemsize)
        peak = base_bytes + weights + w * per
    else:  # batched path: batches of sequences of similar length, padded
        b = min(_batch_size(task), len(lengths))
        per = b * (capture_bytes(shape, n_max, itemsize)
                   + layer_fixed_bytes(n_max, shape.d, shape.d_ff, shape.heads, shape.gated, itemsize))
        if work.kind == "full":
            per += chunk_bytes(shape, n_max, budget, itemsize, batch=b)
        peak = base_bytes + weights + per
    flops, fwd_out, dev_s, host_s = 0, 0, 0.0, 0.0
    if not cached:
        flops, fwd_out = fwd + dec, fwd
        pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lengths)
        host_s = (0.0 if task.shard is not None else work.task_s) + shape.layers * (
            work.host_s * len(lengths) + work.host_pair_s * pairs)
        dev_s = None
        if rate:
            dev_s = (fwd / (rate * EFFICIENCY["forward"]) if fwd else 0.0) + (dec / (rate * EFFICIENCY[work.kind])
                                                                             if dec else 0.0)
            over = OVERHEAD_S[kind]
            dev_s += (over["forward"] + over.get(work.kind, 0.0)) * len(lengths) * shape.layers
    sub = task.subject
    return TaskCost(task.base, sub.model.name, sub.dataset.id if sub.dataset is not None else None,
                    list(task.shard) if task.shard is not None else None, task.shards, task.size,
                    sum(lengths), n_max, cached, task.key, work.kind, int(flops), int(fwd_out),
                    None if dev_s is None else dev_s + host_s, dev_s, host_s, 0.0, int(peak), int(disk), rows)


# ------------------------------------------------------------------ the whole plan


def estimate(plan: "Plan", cache: "Cache | None" = None, *, gpu: str | None = None, gpu_flops: float | None = None,
             gpus: int = 1, threads: int | None = None) -> dict[str, Any]:
    """Price every task of ``plan`` and total them (see the module docstring).

    Args:
        cache: where cached tasks are looked up (a cached task costs 0 and is marked).
        gpu, gpu_flops: a named GPU or a matmul rate in TFLOP/s, for a GPU that is not here.
        gpus: also give the time on this many GPUs (tasks assigned greedily, never split).
        threads: CPU worker threads of the build (default as the build picks them).
    Returns:
        ``device`` (the rate and how it was found), ``tasks`` (one dict per task, every number),
        ``totals``, ``gpus`` (1 and N GPU times where a GPU is estimated) and ``notes``.
    """
    from report_builder.analyses import registry
    from report_builder.models.loading import adapter_of

    from report_builder.errors import UsageError

    if int(gpus) < 1:
        raise UsageError(f"--gpus: {gpus} is not a number of GPUs; give 1 or more")
    if gpu_flops is not None and not gpu_flops > 0:
        raise UsageError(f"--gpu-flops: {gpu_flops:g} TFLOP/s is not a rate; give a positive number, e.g. 50")
    cfg = plan.cfg
    kind = "cuda" if (gpu or gpu_flops is not None or str(cfg.device).startswith("cuda")) else "cpu"
    if threads is None:
        from report_builder.api import choose_threads

        threads = choose_threads(cfg.threads)
    workers = threads if kind == "cpu" else 1
    dev = device_rate(cfg.device if kind == "cpu" or not (gpu or gpu_flops) else "cuda", cfg.dtype, threads=workers,
                      gpu=gpu, gpu_flops=gpu_flops)
    rate = dev["flops_per_s"]
    base = _process_base_bytes() if kind == "cpu" else 0
    lengths = _Lengths(plan)
    shapes: dict[tuple, Shape] = {}
    loaded: set[tuple] = set()
    rows: list[TaskCost] = []
    for t in plan.tasks:
        mc = t.subject.model
        key = (mc.source, mc.revision)
        if key not in shapes:
            config = lengths.config_and_tokenizer(mc)[0]
            shapes[key] = shape_of(config, adapter_of(mc.source, mc.revision).for_config(config))
        cached = bool(cache is not None and cache.path(t.analysis, t.key).is_dir())
        whole = None
        if t.reduce:  # its tables cover every item of the analysis
            whole = lengths.items(t, 0, registry.get(t.base).size(t.subject))
        elif WORK_OF[t.base].whole_set_rows and t.shard is None and t.size == 0:
            whole = lengths.items(t, 0, t.subject.n_items)
        r = task_cost(t, shapes[key], lengths.of(t), cached=cached, rate=rate, kind=kind, workers=workers,
                      base_bytes=base, table_lengths=whole)
        if not cached and not t.reduce and key not in loaded:  # the executor loads a model on its first task that computes
            loaded.add(key)
            r.load_seconds = load_seconds(shapes[key], cfg.dtype)
            if r.seconds is not None:
                r.seconds += r.load_seconds
        rows.append(r)
    todo = [r for r in rows if not r.cached]
    secs = [r.seconds for r in todo] if rate else []
    total_s = sum(secs) if rate else None
    totals = {"tasks": len(rows), "cached": len(rows) - len(todo), "to_compute": len(todo),
              "sequences": sum(r.sequences for r in todo), "tokens": sum(r.tokens for r in todo),
              "flops": sum(r.flops for r in todo), "seconds": total_s,
              "device_seconds": sum(r.device_seconds for r in todo) if rate else None,
              "host_seconds": sum(r.host_seconds for r in todo), "load_seconds": sum(r.load_seconds for r in todo),
              "peak_bytes": max((r.peak_bytes for r in todo), default=0),
              "disk_bytes": sum(r.disk_bytes for r in todo), "disk_bytes_cached": sum(r.disk_bytes for r in rows if r.cached)}
    multi = None
    if kind == "cuda" and rate:
        n = max(1, int(gpus))
        span, loads = balance(secs, n)
        multi = {"n": n, "seconds_1": total_s, "seconds_n": span, "loads": loads,
                 "largest_task_seconds": max(secs, default=0.0),
                 "how": "tasks assigned longest first to the least-loaded GPU; a task is never split, so the "
                        "largest task bounds the N-GPU time"}
    notes = []
    if dev.get("note"):
        notes.append(dev["note"])
    if kind == "cuda":
        notes.append("GPU estimate: the efficiency factors were measured on a CPU (bench); short sequences run "
                     "further below a GPU's matmul rate, so treat it as a lower bound until `bench --device cuda` "
                     "has measured the GPU's factors")
    mem = dev.get("memory_bytes")
    if mem and totals["peak_bytes"] > mem:
        notes.append(f"the largest task's peak memory ({fmt_bytes(totals['peak_bytes'])}) exceeds the device's "
                     f"{fmt_bytes(mem)}: lower --max-memory or batch_size")
    return {"device": {"device": cfg.device, "dtype": cfg.dtype, "kind": kind, "workers": workers, **dev},
            "efficiency": dict(EFFICIENCY), "overhead_s": dict(OVERHEAD_S[kind]),
            "tasks": [asdict(r) for r in rows], "totals": totals, "gpus": multi, "notes": notes,
            "flop_model": __doc__.split("The FLOP model", 1)[1].split("Pitfall:", 1)[0].strip()}


def _process_base_bytes() -> int:
    """This process's resident memory now (interpreter, torch, transformers imported): the floor of
    any build's peak on the CPU."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # pragma: no cover
        import os

        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ------------------------------------------------------------------ text


def fmt_flops(f: float | None) -> str:
    if f is None:
        return "n/a"
    if f == 0:
        return "0"
    for unit, v in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if f >= v:
            return f"{f / v:.3g} {unit}"
    return f"{f:.0f} FLOP"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    if s < 60:
        return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def fmt_bytes(b: float | None) -> str:
    if b is None:
        return "n/a"
    if b >= GIB:
        return f"{b / GIB:.2f} GiB"
    if b >= MIB:
        return f"{b / MIB:.1f} MiB"
    return f"{b / KIB:.0f} KiB"


def shard_cell(row: dict) -> str:
    """The plan table's shard column: a shard's item range ``lo:hi``, ``reduce N`` for a reduce task."""
    if row.get("shard") is not None:
        return f"{row['shard'][0]}:{row['shard'][1]}"
    return f"reduce {row['reduces']}" if row.get("reduces") else "-"


def format_plan(est: dict[str, Any]) -> str:
    """One table (a row per task), a total line, and the 1/N-GPU answer where a GPU is estimated."""
    head = ("analysis", "model", "dataset", "shard", "seqs", "tokens", "FLOPs", "time", "peak mem", "disk", "")
    body = [(r["analysis"], r["model"], r["dataset"] or "-", shard_cell(r), str(r["sequences"]), str(r["tokens"]),
             fmt_flops(r["flops"]), fmt_seconds(r["seconds"]), fmt_bytes(r["peak_bytes"]), fmt_bytes(r["disk_bytes"]),
             "cached" if r["cached"] else "") for r in est["tasks"]]
    right = {4, 5, 6, 7, 8, 9}
    w = [max(len(h), *(len(b[k]) for b in body)) if body else len(h) for k, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w[k]) if k in right else c.ljust(w[k]) for k, c in enumerate(cells)).rstrip()

    t, d = est["totals"], est["device"]
    out = [line(head)] + [line(b) for b in body]
    on = d.get("gpu") or (d.get("calibration") or {}).get("device") or d["device"]
    n_shards = sum(1 for r in est["tasks"] if r["shard"] is not None)
    out.append(f"total: {t['tasks']} tasks ({f'{n_shards} shards, ' if n_shards else ''}{t['cached']} cached, "
               f"{t['to_compute']} to compute), "
               f"{t['sequences']} sequences, {fmt_flops(t['flops'])}, "
               + (f"~{fmt_seconds(t['seconds'])} on {on}" if t["seconds"] is not None else "time n/a")
               + f", peak memory {fmt_bytes(t['peak_bytes'])}, disk {fmt_bytes(t['disk_bytes'])}"
               + (f" (+{fmt_bytes(t['disk_bytes_cached'])} cached)" if t["cached"] else ""))
    if t["seconds"]:
        out.append(f"  of which: decomposition on the device {fmt_seconds(t['device_seconds'])}, the analyses' "
                   f"statistics on the host CPU {fmt_seconds(t['host_seconds'])}, model loads "
                   f"{fmt_seconds(t['load_seconds'])}")
    if d.get("flops_per_s"):
        out.append(f"rate: {d['flops_per_s'] / 1e9:.4g} GFLOP/s matmul ({d['how']}) x efficiency per kind of work "
                   + ", ".join(f"{k} {v:g}" for k, v in est["efficiency"].items())
                   + "; plus per sequence and layer " + ", ".join(f"{k} {v * 1e3:g} ms" for k, v in est["overhead_s"].items()))
    g = est.get("gpus")
    if g:
        out.append(f"on 1 GPU: ~{fmt_seconds(g['seconds_1'])}; on {g['n']} GPUs: ~{fmt_seconds(g['seconds_n'])} "
                   f"(greedy balanced by task; the largest task alone takes {fmt_seconds(g['largest_task_seconds'])})")
    for n in est["notes"]:
        out.append("note: " + n)
    return "\n".join(out)
