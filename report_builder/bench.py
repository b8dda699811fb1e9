"""`report-builder bench`: the decomposition engine against the HF forward pass and the naive code.

Everything is measured side by side in one process and one run (interleaved per repeat, medians):

- ``forward``: the plain HF forward pass (eager attention, ``output_attentions=True``), per layer.
- naive baselines (full tensors): ``naive_k21_ratios`` / ``naive_k21_maps`` build K21's (H, n, n, d)
  per-head tensor (`report_builder.bench_naive`), ``naive_full`` is `reference_layer` (every scope's
  (n, n, d) terms, closed-form IG factor applied to the full (n, n, d') terms) plus its norms.
- the fast engine `decompose_layer`: (a) ``fast_ratios`` (five K21 ratios, no maps), (b)
  ``fast_k21_maps`` (ATTN-N, ATTNRES-N, ATTNRESLN-N), (c) ``fast_full`` (every scope's map, the K21
  maps, ratios and the reconstruction check against the HF tensors), and ``fast_ff`` (maps up to
  the FF scope only: the FF decomposition, used for the roofline).

Times are per layer for the whole batch; tokens/s are model-equivalent (per-layer time times the
model's layer count). Only ``layers`` layers are decomposed (2 by default beyond ``tiny``); the
output says so. Peak memory is measured in fresh subprocesses (`report_builder.bench_mem`), peak
RSS (``VmHWM``, else ``getrusage``) on CPU, ``torch.cuda.max_memory_allocated`` on CUDA.

Pitfall: on a shared 2-core machine, two OpenMP threads stall on every small op while another
process holds a core; ``threads`` pins the count and the output records the load average.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable

import torch

from report_builder.costs import FLOP_COUNT_DOC, ff_flops, layer_fixed_bytes  # noqa: F401 - one FLOP model
from report_builder.decompose.chunks import default_chunk_rows
from report_builder.decompose.feedforward import IGOptions
from report_builder.decompose.layouts import decompose_batch, decompose_layer
from report_builder.errors import UsageError
from report_builder.schema import K21_METHODS

GIB = 1 << 30
MIB = 1 << 20
K21_N_MAPS = ("ATTN-N", "ATTNRES-N", "ATTNRESLN-N")

# name -> (family, config overrides, description); configs use HF defaults otherwise
SHAPES: dict[str, tuple[str, dict, str]] = {
    "tiny": ("bert", dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=256, max_position_embeddings=512), "tiny BERT"),
    "base": ("bert", {}, "BERT-base shape"),
    "large": ("bert", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
              "BERT-large shape"),
    "gpt2-base": ("gpt2", {}, "GPT-2 base shape"),
    "llama-small": ("llama", dict(vocab_size=49152, hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                                  num_key_value_heads=3, intermediate_size=1536, max_position_embeddings=2048,
                                  tie_word_embeddings=True), "Llama shape (SmolLM2-135M: GQA 9/3, SwiGLU)"),
}
DEFAULT_TIMED_LAYERS = 2
TARGETS = {"k21_ratios_speedup": 10.0, "k21_maps_speedup": 5.0, "ff_roofline": 0.5, "budget_bytes": 2 * GIB}
TARGET_SETTING = dict(shape="base", seq_len=128, dtype="float32", device="cpu")
BUDGET_CHECK = dict(shape="base", seq_len=512)

# ------------------------------------------------------------------ helpers


def parse_bytes(v: str | int | None) -> int | None:
    """A memory size -> bytes with the one size parser (`config.parse_size`: ``GB`` = 10⁹,
    ``GiB`` = 2³⁰); None stays None."""
    if v is None:
        return None
    from report_builder.config import parse_size

    return parse_size(v, key="--max-memory")


def fmt_bytes(b: int | float | None) -> str:
    if b is None:
        return "n/a"
    return f"{b / GIB:.2f} GiB" if b >= GIB else f"{b / MIB:.0f} MiB"


def rss_now() -> int:
    """Current resident set size in bytes (psutil when installed, else /proc)."""
    try:
        import psutil
        return int(psutil.Process().memory_info().rss)
    except ImportError:  # pragma: no cover
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    """Peak RSS of this process in bytes: ``VmHWM`` from /proc (reset by `reset_rss_peak`; a fresh
    exec starts it anew), else ``ru_maxrss`` (which Linux carries over from the parent across
    fork + exec, so it is only an upper bound in a subprocess)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover
        pass
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def reset_rss_peak() -> bool:
    """Reset the peak RSS to the current RSS (Linux ``clear_refs``); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def available_bytes() -> int:
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover
        return 8 * GIB


def chunk_budget(max_memory: int, n: int, d: int, d_ff: int, heads: int, gated: bool, itemsize: int,
                 in_use: int | None = None) -> int:
    """Chunk budget (``budget_bytes`` of `decompose_layer`) so the process stays under ``max_memory``.

    What is left after the memory in use (model, captured tensors: the current RSS by default) and the
    layer's fixed tensors goes to the chunk loop, with a quarter kept back for GEMM temporaries and
    allocator slack; at least 16 MiB.
    """
    used = rss_now() if in_use is None else in_use
    free = max_memory - used - layer_fixed_bytes(n, d, d_ff, heads, gated, itemsize)
    return max(16 * MIB, int(0.75 * free))


def batch_for_budget(budget_bytes: int, n: int, d: int, heads: int, n_layers: int, itemsize: int = 4,
                     cap: int = 64) -> int:
    """Sequences per forward batch so that the captured tensors fit ``budget_bytes``: per sequence the
    forward returns every layer's probabilities and the capture keeps x, alpha and 6 check tensors."""
    from report_builder.costs import sequence_capture_bytes

    per_seq = sequence_capture_bytes(n, d, heads, n_layers, itemsize)
    return max(1, min(cap, budget_bytes // max(per_seq, 1)))


def _dtype(name: str) -> tuple[torch.dtype, bool]:
    """``float32``/``bfloat16``/``float16``/``tf32`` -> (storage dtype, TF32 matmuls)."""
    if name == "tf32":
        return torch.float32, True
    try:
        return getattr(torch, name), False
    except AttributeError:
        raise UsageError(f"--dtype: unknown dtype {name!r}; use float32, bfloat16, float16 or tf32") from None


def build(shape: str | None, model: str | None, device: str, dtype: str):
    """A `LoadedModel`: a shape from configs with seeded random init, or a named model via `load`."""
    from report_builder.models.loading import from_model, load

    tdt, tf32 = _dtype(dtype)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    if model:
        return load(model, device=device, dtype="float32" if tdt == torch.float32 else dtype)
    if shape not in SHAPES:
        raise UsageError(f"--shape: unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
    family, over, _ = SHAPES[shape]
    torch.manual_seed(0)
    kw = dict(attn_implementation="eager")
    if family == "bert":
        from transformers import BertConfig, BertModel
        m = BertModel(BertConfig(**over, **kw), add_pooling_layer=False)
    elif family == "gpt2":
        from transformers import GPT2Config, GPT2Model
        m = GPT2Model(GPT2Config(**over, **kw))
    else:
        from transformers import LlamaConfig, LlamaModel
        m = LlamaModel(LlamaConfig(**over, **kw))
    m = m.to(device=device, dtype=tdt).eval()
    return from_model(m, None, name=shape)


def _inputs(lm, seq_len: int, batch: int, seed: int = 0) -> dict:
    lm.check_length(seq_len)
    vocab = int(lm.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(min(100, vocab // 2), vocab, (batch, seq_len), generator=g)
    return {"input_ids": ids.to(lm.device), "attention_mask": torch.ones_like(ids).to(lm.device)}


def _dims(lm) -> dict:
    lw = lm.layer_weights(0)
    return dict(family=lm.adapter.family, ln_position=lw.ln_position, d_model=lw.attn.d_model,
                heads=lw.attn.n_heads, kv_heads=lw.attn.n_kv_heads, head_dim=lw.attn.head_dim,
                d_ff=lw.ff.d_ff, gated=lw.ff.gated, activation=lw.ff.act, layers_total=lm.n_layers)


def efficiency(dims: dict, n: int, batch: int, per_layer: dict[str, float], matmul_flops: float) -> dict[str, float]:
    """Each kind of work's FLOP/s (`costs` FLOP model) as a fraction of the matmul measured in the same
    run: ``forward`` (HF forward), ``ratios`` (fast_ratios), ``maps`` (fast_k21_maps), ``full``
    (fast_full); the numbers `costs.EFFICIENCY` was set from."""
    from report_builder import costs

    s = costs.Shape(dims["d_model"], dims["layers_total"], dims["heads"], dims["kv_heads"], dims["head_dim"],
                    dims["d_ff"], dims["gated"], dims["ln_position"] == "post", 0)
    pts = costs.ig_points(s.gated)
    flops = {"forward": costs.forward_flops(s, n), "ratios": costs.work_flops("ratios", s, n),
             "maps": costs.work_flops("maps", s, n), "full": costs.work_flops("full", s, n, pts)}
    timed = {"forward": "forward", "ratios": "fast_ratios", "maps": "fast_k21_maps", "full": "fast_full"}
    return {k: batch * flops[k] / per_layer[m] / matmul_flops for k, m in timed.items() if per_layer.get(m)}


def naive_bytes(n: int, d: int, d_ff: int, heads: int, itemsize: int) -> int:
    """Rough peak of `reference_layer` + maps: the (H, n, n, d) tensor and ~10 (n, n, d) and 3 (n, n, d')."""
    return itemsize * n * n * (heads * d + 10 * d + 3 * d_ff)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time(fn: Callable[[], object], device: str) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


# ------------------------------------------------------------------ subprocess memory measurements


def _child(args: dict, timeout: float = 900) -> dict:
    """Run `report_builder.bench_mem` in a fresh interpreter; its last stdout line is JSON."""
    env = dict(os.environ, HF_HUB_OFFLINE=os.environ.get("HF_HUB_OFFLINE", "1"))
    cmd = [sys.executable, "-m", "report_builder.bench_mem", json.dumps(args)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300], "returncode": p.returncode}
    return json.loads(lines[-1])


# ------------------------------------------------------------------ the benchmark


def run_bench(*, shape: str | None = "base", model: str | None = None, seq_len: int = 128, batch: int = 1,
              device: str = "cpu", dtype: str = "float32", max_memory: str | int | None = None,
              repeats: int = 3, layers: int | None = None, threads: int | None = None,
              naive: bool | None = None, memory: bool = True, budget_check: bool | None = None) -> dict:
    """Benchmark the fast engine against the forward pass and the naive code, side by side.

    Args:
        shape: ``tiny``, ``base``, ``large``, ``gpt2-base`` or ``llama-small`` (random init, seeded);
            ignored when ``model`` is given. model: a name `report_builder.models.loading.load` accepts.
        seq_len, batch: random token ids (seeded), all positions real.
        device, dtype: ``cpu``/``cuda``; ``float32``, ``bfloat16``, ``float16`` or ``tf32`` (float32
            storage, TF32 matmuls on CUDA). Norms are accumulated in float32 whatever the dtype.
        max_memory: memory budget (``"2GiB"``) for the whole process; sets the chunk budget
            (``budget_bytes``) and the recommended forward batch size, and is the limit of the BERT-base
            n = 512 budget check (default 2 GiB there).
        repeats: timing repeats (medians). layers: how many layers to decompose (default all for
            ``tiny``, else 2); per-layer numbers are scaled to the whole model explicitly.
        threads: torch CPU threads (default: torch's). naive: run the naive baselines (default: when
            their tensors fit in half the available memory). memory: measure peak memory in
            subprocesses. budget_check: run the BERT-base n = 512 check (default: unless shape is tiny).
    Returns:
        A JSON-serialisable dict (see `format_bench`).
    """
    if threads:
        torch.set_num_threads(int(threads))
    tdt, tf32 = _dtype(dtype)
    if model:
        shape = None
    limit = parse_bytes(max_memory)
    load0 = os.getloadavg()
    lm = build(shape, model, device, dtype)
    dims = _dims(lm)
    n, d, dff, H, gated = seq_len, dims["d_model"], dims["d_ff"], dims["heads"], dims["gated"]
    L = lm.n_layers
    n_timed = min(L, layers or (L if shape == "tiny" else DEFAULT_TIMED_LAYERS))
    timed_layers = list(range(n_timed))
    itemsize = torch.empty((), dtype=tdt).element_size()
    inputs = _inputs(lm, seq_len, batch)
    from report_builder.models.capture import forward_capture
    from report_builder.decompose.reference import reference_layer, reference_maps
    from report_builder.bench_naive import naive_k21

    with torch.no_grad():
        caps = forward_capture(lm.model, lm.adapter, inputs, timed_layers)
        if limit is not None:
            budget = chunk_budget(limit, n, d, dff, H, gated, itemsize)
        else:
            budget = 512 * MIB
        chunk = default_chunk_rows(n, d, dff, budget_bytes=budget, itemsize=itemsize, gated=gated, batch=batch)
        lws = [lm.layer_weights(i) for i in timed_layers]
        scopes = lws[0].scopes
        ff_scope = scopes[1] if dims["ln_position"] == "post" else scopes[2]
        seqs = [(lw, cap.x[b], cap.alpha[b], {k: t[b] for k, t in cap.refs.items()})
                for lw, cap in zip(lws, caps) for b in range(batch)]
        if naive is None:
            naive = naive_bytes(n, d, dff, H, itemsize) <= 0.5 * available_bytes()

        def each(fn):
            return lambda: [fn(*s) for s in seqs]

        def batched(**kw):  # the engine decomposes the whole batch at once (`decompose_batch`)
            return lambda: [decompose_batch(lw, cap.x, cap.alpha, [n] * batch, budget_bytes=budget, **kw)
                            for lw, cap in zip(lws, caps)]

        methods: dict[str, Callable[[], object]] = {
            "forward": lambda: lm.model(**inputs, output_attentions=True),
            "fast_ratios": batched(ratios=True),
            "fast_k21_maps": batched(maps=K21_N_MAPS),
            "fast_full": lambda: [decompose_batch(lw, cap.x, cap.alpha, [n] * batch, maps=lw.scopes + K21_METHODS,
                                                  ratios=True, refs=cap.refs, budget_bytes=budget)
                                  for lw, cap in zip(lws, caps)],
            "fast_ff": batched(maps=(ff_scope,)),
        }
        if naive:
            methods.update({
                "naive_k21_ratios": each(lambda lw, x, a, r: naive_k21(lw, x, a, maps=False, ratios=True)),
                "naive_k21_maps": each(lambda lw, x, a, r: naive_k21(lw, x, a, maps=True)),
                "naive_full": each(lambda lw, x, a, r: reference_maps(reference_layer(lw, x, a, ig="closed"))),
            })
        # the roofline: a plain matmul of the FF chunk GEMM's shape, as many calls as the FF step makes
        mm_rows = min(batch * n * chunk, 16384)
        mm_calls = len(lws) * -(-n // chunk) * max(1, batch * n * chunk // mm_rows)
        gen = torch.Generator().manual_seed(1)
        mm_a = torch.randn(mm_rows, dff, generator=gen).to(device=device, dtype=tdt)
        mm_b = torch.randn(dff, d, generator=gen).to(device=device, dtype=tdt)
        methods["matmul"] = lambda: [torch.matmul(mm_a, mm_b) for _ in range(mm_calls)]
        for k in ("forward", "fast_ratios", "fast_k21_maps", "fast_full", "matmul"):  # warm-up (first-call costs)
            methods[k]()
        raw: dict[str, list[float]] = {k: [] for k in methods}
        for _ in range(max(1, repeats)):  # interleaved, so drifting load hits every method alike
            for k, fn in methods.items():
                raw[k].append(_time(fn, device))

        # accuracy: fast full layer vs the HF tensors, and fast maps vs the naive reference
        errors: dict[str, float] = {}
        for lw, x, a, r in seqs:
            res = decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True, refs=r, budget_bytes=budget)
            for k, e in res.errors.items():
                errors[k] = max(errors.get(k, 0.0), e)
        map_diff = None
        if naive:
            lw, x, a, r = seqs[0]
            res = decompose_layer(lw, x, a, maps=lw.scopes, budget_bytes=budget)
            ref = reference_maps(reference_layer(lw, x, a, ig="closed"))
            map_diff = max(float(((res.maps[k].float() - ref[k].float()).abs().max()
                                  / ref[k].float().abs().max().clamp_min(1e-30))) for k in res.maps if k in ref)
    del caps, seqs, mm_a, mm_b
    mm_raw = raw.pop("matmul")
    mm_s = statistics.median(mm_raw)
    mm = {"shape": [mm_rows, dff, d], "calls": mm_calls, "seconds": mm_s, "seconds_raw": mm_raw,
          "gflops": 2 * mm_rows * dff * d * mm_calls / mm_s / 1e9,
          "how": "interleaved with the methods in every repeat (same load), median"}

    med = {k: statistics.median(v) for k, v in raw.items()}
    per_layer = {k: (med[k] / L if k == "forward" else med[k] / n_timed) for k in med}
    tokens = batch * n
    tps = {k: tokens / (t * L) for k, t in per_layer.items()}
    cost = {k: t / per_layer["forward"] for k, t in per_layer.items() if k != "forward"}
    speed = {}
    for name, fast, slow in (("k21_ratios", "fast_ratios", "naive_k21_ratios"),
                             ("k21_maps", "fast_k21_maps", "naive_k21_maps"),
                             ("full_layer", "fast_full", "naive_full")):
        speed[name] = per_layer[slow] / per_layer[fast] if slow in per_layer else None
    flops = ff_flops(n, d, dff, H, gated) * batch
    eff = efficiency(dims, n, batch, per_layer, mm["gflops"] * 1e9)
    ff_gflops = flops / per_layer["fast_ff"] / 1e9
    roof = {"ff_flops_per_layer": flops, "ff_seconds_per_layer": per_layer["fast_ff"], "ff_gflops": ff_gflops,
            "matmul": mm, "matmul_gflops": mm["gflops"], "fraction": ff_gflops / mm["gflops"],
            "flop_count": FLOP_COUNT_DOC,
            "ff_time_includes": "decompose_layer with the FF scope's map only: attention step, FF terms, "
                                "their sums and map, and the residual terms' sums (conservative)"}

    mem: dict = {"method": None}
    if device.startswith("cuda"):
        mem["method"] = "torch.cuda.max_memory_allocated, in process"
        mem.update(_cuda_peaks(lm, inputs, timed_layers[0], budget, naive))
    elif memory:
        mem["method"] = "fresh subprocess per method, peak RSS (VmHWM; model and interpreter included)"
        base_args = dict(shape=shape, model=model, seq_len=seq_len, device=device, dtype=dtype,
                         threads=torch.get_num_threads(), max_memory=limit)
        mem["fast_full"] = _child(dict(base_args, mode="fast_full"))
        mem["naive_full"] = _child(dict(base_args, mode="naive_full")) if naive else {"skipped": "naive not run"}
    if budget_check is None:
        budget_check = shape != "tiny" and not device.startswith("cuda")
    if budget_check:
        blimit = limit or TARGETS["budget_bytes"]
        bc = _child(dict(shape=BUDGET_CHECK["shape"], model=None, seq_len=BUDGET_CHECK["seq_len"], device="cpu",
                         dtype="float32", threads=torch.get_num_threads(), max_memory=blimit, mode="fast_full",
                         check=True))
        bc.update(limit_bytes=blimit, shape=BUDGET_CHECK["shape"], seq_len=BUDGET_CHECK["seq_len"])
        bc["pass"] = bool("peak_rss_bytes" in bc and bc["peak_rss_bytes"] <= blimit and bc.get("max_error", 1) <= 1e-4)
    else:
        bc = {"skipped": "not requested" + (" (off by default for shape tiny)" if shape == "tiny" else ""),
              "pass": None}

    cfg = dict(shape=shape, model=model, description=SHAPES[shape][2] if shape else model, **dims,
               layers_timed=n_timed, seq_len=n, batch=batch, device=device, dtype=dtype, tf32=tf32,
               threads=torch.get_num_threads(), repeats=max(1, repeats), max_memory_bytes=limit,
               chunk_budget_bytes=budget, chunk_rows=chunk,
               recommended_batch=batch_for_budget(budget, n, d, H, L, itemsize),
               torch=torch.__version__, cpu=_cpu_name(), python=platform.python_version(),
               loadavg_start=list(load0), loadavg_end=list(os.getloadavg()))
    in_setting = (shape == TARGET_SETTING["shape"] and n == TARGET_SETTING["seq_len"]
                  and dtype == TARGET_SETTING["dtype"] and device == TARGET_SETTING["device"])
    targets = [
        _target("K21 ratios >= 10x faster than naive", speed["k21_ratios"], TARGETS["k21_ratios_speedup"], "x"),
        _target("K21 maps >= 5x faster than naive", speed["k21_maps"], TARGETS["k21_maps_speedup"], "x"),
        _target("FF decomposition >= 50% of matmul GFLOP/s", roof["fraction"], TARGETS["ff_roofline"], "%"),
        {"name": f"BERT-base n = 512 full layer <= {fmt_bytes(bc.get('limit_bytes', TARGETS['budget_bytes']))} RSS",
         "value": bc.get("peak_rss_bytes"), "target": bc.get("limit_bytes", TARGETS["budget_bytes"]),
         "unit": "bytes", "ok": bc.get("pass")},
    ]
    notes = [f"decomposed {n_timed} of {L} layers; per-layer times are medians over {max(1, repeats)} repeats "
             f"for the whole batch; tokens/s are model-equivalent (x {L} layers)"]
    if not naive:
        notes.append(f"naive baselines skipped: ~{fmt_bytes(naive_bytes(n, d, dff, H, itemsize))} of full tensors "
                     "per sequence would not fit in half the available memory")
    busy = max(load0[0], cfg["loadavg_end"][0])
    if device == "cpu" and cfg["threads"] > 1 and busy > (os.cpu_count() or 1) - 1:
        notes.append(f"load average {busy:.1f} on {os.cpu_count()} CPUs: other processes compete, and {cfg['threads']} "
                     "OpenMP threads stall on every small op while one is descheduled; compare with "
                     "OMP_NUM_THREADS=1 (or threads=1)")
    if not in_setting:
        notes.append("the targets are defined for shape=base, n=128, float32 on CPU; marks here use the same thresholds")
    return {
        "config": cfg,
        "seconds_per_layer": per_layer,
        "seconds_per_layer_best": {k: (min(v) / L if k == "forward" else min(v) / n_timed) for k, v in raw.items()},
        "seconds_raw": raw,
        "tokens_per_s": tps,
        "cost_vs_forward": cost,
        "speedup": speed,
        "roofline": roof,
        "efficiency": eff,
        "memory": mem,
        "budget_check": bc,
        "errors": {"max_rel_error": max(errors.values()) if errors else None, "per_check": errors,
                   "bound": 1e-4 if dtype == "float32" else None, "dtype": dtype, "fast_vs_naive_max_map_diff": map_diff},
        "targets": targets,
        "targets_setting": in_setting,
        "gpu": {"run": device.startswith("cuda"),
                "note": "GPU run" if device.startswith("cuda") else "not run (no GPU in this session)"},
        "notes": notes,
    }


def synthetic_encoded(lm, n_seqs: int, seq_len: int, seed: int = 0) -> list:
    """``n_seqs`` random sequences of ``seq_len`` tokens as `EncodedSeq` (one word per token, the first
    token special; encoders also end on a special token), for timing the analyses end to end."""
    from report_builder.data.encode import EncodedSeq

    vocab = int(lm.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n_seqs):
        ids = torch.randint(min(100, vocab // 2), vocab, (seq_len,), generator=g).tolist()
        words = [f"w{t}" for t in ids]
        special = [p == 0 or (not lm.causal and p == seq_len - 1) for p in range(seq_len)]
        offsets, pos = [], 0
        for w in words:
            offsets.append((pos, pos + len(w)))
            pos += len(w) + 1
        out.append(EncodedSeq(
            input_ids=ids, token_type_ids=None if lm.causal else [0] * seq_len, tokens=words, special=special,
            masked=[False] * seq_len, category=["[CLS]" if sp else "Normal" for sp in special],
            word_ids=[None if sp else p for p, sp in enumerate(special)],
            offsets=[None if sp else o for o, sp in zip(offsets, special)], text=" ".join(words),
            item_id=f"s{k}", seq=k))
    return out


def run_k24_pass(*, shape: str | None = "base", model: str | None = None, n_seqs: int = 992, seq_len: int = 128,
                 batch: int = 32, device: str = "cpu", dtype: str = "float32", max_memory: str | int | None = None,
                 threads: int | None = None, host_seqs: int = 16) -> dict:
    """A timed K24 pass: `k24_compute.scope_analyses` (every scope map of every layer through the
    engine, FF-amp, RES/LN statistics) over ``n_seqs`` random sequences of ``seq_len`` tokens.

    The paper's size is 992 sequences x 128 tokens on BERT-base (``shape="base"``, random weights).
    On CUDA the engine's batched path runs ``batch`` sequences at once; on CPU the deterministic path
    runs ``threads`` worker threads. Returns seconds, sequences/s, tokens/s and the FF GFLOP/s achieved,
    and (``host_seqs`` > 0) the pass's host statistics timed apart against their previous
    implementation on random maps of ``host_seqs`` of the sequences and every layer
    (`bench_host.compare_host_stats`: seconds per sequence and layer, the ratio, bit-identity).
    """
    from report_builder.analyses import k24_compute

    tf32 = _dtype(dtype)[1]
    lm = build(None if model else shape, model, device, dtype)
    dims = _dims(lm)
    enc = synthetic_encoded(lm, n_seqs, seq_len)
    limit = parse_bytes(max_memory)
    budget = limit if limit is not None else (4 * GIB if device.startswith("cuda") else 512 * MIB)
    workers = None if device.startswith("cuda") else max(1, threads or 1)
    _sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        tables = k24_compute.scope_analyses(lm, enc, model=lm.name, dataset="synthetic", ig=IGOptions(),
                                            batch_size=batch, budget_bytes=budget, workers=workers)
    _sync(device)
    secs = time.perf_counter() - t0
    flops = ff_flops(seq_len, dims["d_model"], dims["d_ff"], dims["heads"], dims["gated"]) * lm.n_layers * n_seqs
    host = {}
    if host_seqs > 0:
        from report_builder.bench_host import compare_host_stats

        host = compare_host_stats(lm.adapter.layout, lm.causal, enc[:host_seqs], lm.n_layers)
        host["host_pass_s"] = host["host_s"] * n_seqs * lm.n_layers
    return {"shape": shape, "model": model, **dims, "n_seqs": n_seqs, "seq_len": seq_len, "batch": batch,
            "device": device, "dtype": dtype, "tf32": tf32 or _tf32_on(device), "budget_bytes": budget,
            "workers": workers,
            "seconds": secs, "seqs_per_s": n_seqs / secs, "tokens_per_s": n_seqs * seq_len / secs,
            "ff_gflops": flops / secs / 1e9, "ff_flops": flops,
            "max_rel_error": float(tables["recon_errors"]["max_rel_error"].max()),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None, **host}


def format_k24_pass(r: dict) -> str:
    from report_builder.bench_host import format_host

    what = r["model"] or f"{SHAPES[r['shape']][2]} (random weights)"
    return (f"K24 pass: {r['n_seqs']} sequences x {r['seq_len']} tokens, {what}, {r['layers_total']} layers, "
            f"{r['device']} {r['dtype']}{' (TF32 matmuls)' if r['tf32'] else ''}, "
            + (f"batch {r['batch']}" if r["workers"] is None else f"{r['workers']} CPU workers")
            + f": {r['seconds']:.1f} s = {r['seqs_per_s']:.1f} sequences/s, {r['tokens_per_s']:.0f} tokens/s, "
            f"FF {r['ff_gflops']:.3g} GFLOP/s; max reconstruction error {r['max_rel_error']:.1e}"
            + (f"\n{format_host(r)}; ~{r['host_pass_s']:.1f} s of this pass" if "host_s" in r else ""))


def _tf32_on(device: str) -> bool:
    return bool(device.startswith("cuda") and torch.backends.cuda.matmul.allow_tf32)


def _target(name: str, value: float | None, thr: float, unit: str) -> dict:
    return {"name": name, "value": value, "target": thr, "unit": unit,
            "ok": None if value is None else bool(value >= thr)}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} logical CPUs)"
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cuda_peaks(lm, inputs, layer: int, budget: int, naive: bool) -> dict:  # pragma: no cover - needs a GPU
    from report_builder.decompose.reference import reference_layer, reference_maps
    from report_builder.models.capture import forward_capture
    out = {}
    with torch.no_grad():
        cap = forward_capture(lm.model, lm.adapter, {k: v[:1] for k, v in inputs.items()}, [layer])[0]
        lw, x, a = lm.layer_weights(layer), cap.x[0], cap.alpha[0]
        runs = {"fast_full": lambda: decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True,
                                                     budget_bytes=budget)}
        if naive:
            runs["naive_full"] = lambda: reference_maps(reference_layer(lw, x, a, ig="closed"))
        for k, fn in runs.items():
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            out[k] = {"peak_bytes": int(peak), "delta_bytes": int(peak - base)}
    return out


# ------------------------------------------------------------------ report


def _f(v, spec: str, none: str = "n/a") -> str:
    return none if v is None else format(v, spec)


def format_bench(result: dict) -> str:
    """A fixed-width text report of `run_bench`'s result, with each target marked ✓/✗."""
    c = result["config"]
    pl, tps, cost, sp = result["seconds_per_layer"], result["tokens_per_s"], result["cost_vs_forward"], result["speedup"]
    head = (f"{c['description']} ({c['family']}, {c['ln_position']}-LN, d {c['d_model']}, {c['heads']} heads"
            + (f" / {c['kv_heads']} kv" if c["kv_heads"] != c["heads"] else "")
            + f", FF {c['d_ff']}{' gated' if c['gated'] else ''} {c['activation']}, {c['layers_total']} layers)")
    lines = [
        "report-builder bench: " + head,
        f"n = {c['seq_len']}, batch {c['batch']}, {c['device']} {c['dtype']}, {c['threads']} threads, "
        f"{c['repeats']} repeats; {c['cpu']}; torch {c['torch']}",
        f"load average at start {c['loadavg_start'][0]:.2f}, at end {c['loadavg_end'][0]:.2f}",
        f"decomposed layers: {c['layers_timed']} of {c['layers_total']} (per-layer medians; tokens/s model-equivalent "
        f"= batch x n / (s/layer x {c['layers_total']}))",
        f"chunk budget {fmt_bytes(c['chunk_budget_bytes'])} -> {c['chunk_rows']} query rows per FF chunk; "
        f"forward batch for this budget: {c['recommended_batch']}"
        + (f"; --max-memory {fmt_bytes(c['max_memory_bytes'])}" if c["max_memory_bytes"] else ""),
        "",
        f"{'method':<44}{'s/layer':>10}{'tokens/s':>11}{'x fwd':>8}{'vs naive':>10}",
    ]
    rows = [("forward", "HF forward (eager, attention probabilities)", None),
            ("naive_k21_ratios", "naive K21 ratios (H,n,n,d tensors)", None),
            ("naive_k21_maps", "naive K21 maps (H,n,n,d tensors)", None),
            ("naive_full", "naive full layer (reference_layer + norms)", None),
            ("fast_ratios", "fast (a) K21 ratios only", "k21_ratios"),
            ("fast_k21_maps", "fast (b) K21 maps ATTN/ATTNRES/ATTNRESLN-N", "k21_maps"),
            ("fast_full", "fast (c) full layer, every scope + check", "full_layer"),
            ("fast_ff", "fast FF decomposition (maps to FF scope)", None)]
    for key, label, spk in rows:
        if key not in pl:
            lines.append(f"{label:<44}{'skipped':>10}")
            continue
        x = "1.00" if key == "forward" else _f(cost.get(key), ".2f")
        s = (_f(sp.get(spk), ".1f") + "x") if spk and sp.get(spk) is not None else ""
        lines.append(f"{label:<44}{pl[key]:>10.4f}{tps[key]:>11.1f}{x:>8}{s:>10}")
    r = result["roofline"]
    mm = r["matmul"]
    lines += [
        "",
        f"FF decomposition: {r['ff_flops_per_layer'] / 1e9:.2f} GFLOP per layer in {r['ff_seconds_per_layer']:.4f} s "
        f"= {r['ff_gflops']:.1f} GFLOP/s; plain matmul {mm['shape'][0]}x{mm['shape'][1]} @ {mm['shape'][1]}x"
        f"{mm['shape'][2]} (x{mm['calls']}, interleaved): {r['matmul_gflops']:.1f} GFLOP/s -> "
        f"{100 * r['fraction']:.0f}% of roofline",
        f"  ({r['flop_count']})",
    ]
    if result.get("efficiency"):
        lines.append("efficiency vs that matmul (costs FLOP model; `report-builder plan` uses such factors): "
                     + ", ".join(f"{k} {v:.2f}" for k, v in result["efficiency"].items()))
    mem = result["memory"]
    if mem.get("method"):
        parts = []
        for k in ("fast_full", "naive_full"):
            m = mem.get(k) or {}
            if "peak_rss_bytes" in m:
                parts.append(f"{k} {fmt_bytes(m['peak_rss_bytes'])} (+{fmt_bytes(m['delta_bytes'])} over the "
                             f"{fmt_bytes(m['rss_before_bytes'])} before it)")
            elif "peak_bytes" in m:
                parts.append(f"{k} {fmt_bytes(m['peak_bytes'])} (+{fmt_bytes(m['delta_bytes'])})")
            elif m:
                parts.append(f"{k} {m.get('skipped') or 'error: ' + str(m.get('error'))}")
        lines.append(f"peak memory, one sequence and layer ({mem['method']}): " + "; ".join(parts))
    e = result["errors"]
    lines.append(f"max reconstruction error, fast full layer vs HF tensors ({e['dtype']}): "
                 f"{_f(e['max_rel_error'], '.2e')} "
                 + (f"(bound {e['bound']:g})" if e["bound"] else "(the 1e-4 bound applies to float32)")
                 + "; fast vs naive maps: "
                 f"{_f(e['fast_vs_naive_max_map_diff'], '.2e')}")
    bc = result["budget_check"]
    if "peak_rss_bytes" in bc:
        lines.append(f"budget check: BERT-base shape, n = {bc['seq_len']}, full layer with the chunk budget from "
                     f"{fmt_bytes(bc['limit_bytes'])}: peak RSS {fmt_bytes(bc['peak_rss_bytes'])} (model "
                     f"{fmt_bytes(bc.get('rss_before_bytes'))} before the layer), {bc['chunk_rows']} rows per chunk, "
                     f"{bc['seconds']:.1f} s, max error {bc['max_error']:.1e}")
    elif "error" in bc:
        lines.append(f"budget check failed to run: {bc['error']}")
    lines += ["", "targets" + ("" if result["targets_setting"] else
                               " (defined for BERT-base shape, n = 128, float32, CPU; same thresholds here)") + ":"]
    for t in result["targets"]:
        mark = {True: "✓", False: "✗", None: "-"}[t["ok"]]
        if t["value"] is None:
            val = "not measured" + (f" ({bc['skipped']})" if t["unit"] == "bytes" and "skipped" in bc else "")
        elif t["unit"] == "x":
            val = f"{t['value']:.1f}x"
        elif t["unit"] == "%":
            val = f"{100 * t['value']:.0f}%"
        else:
            val = f"{fmt_bytes(t['value'])} peak"
        lines.append(f"  {mark} {t['name']:<46} {val}")
    lines.append("GPU: " + ("run on " + c["device"] if result["gpu"]["run"] else "not run (no GPU in this session)"))
    for note in result["notes"]:
        lines.append("note: " + note)
    return "\n".join(lines)
