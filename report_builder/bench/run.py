"""`report-builder bench`: the decomposition engine against the HF forward pass and the naive code.

Everything is measured side by side in one process and one run (interleaved per repeat, medians):

- ``forward``: the plain HF forward pass (eager attention, as the engine runs it), per layer.
- naive baselines (full tensors): ``naive_k21_ratios`` / ``naive_k21_maps`` build K21's (H, n, n, d)
  per-head tensor (`bench.naive`), ``naive_full`` is `reference_layer` (every scope's (n, n, d)
  terms, closed-form IG factor applied to the full (n, n, d') terms) plus its norms.
- the fast engine `decompose_layer`: (a) ``fast_ratios`` (five K21 ratios, no maps), (b)
  ``fast_k21_maps`` (ATTN-N, ATTNRES-N, ATTNRESLN-N), (c) ``fast_full`` (every scope's map, the K21
  maps, ratios and the reconstruction check against the HF tensors), and ``fast_ff`` (maps up to
  the FF scope only: the FF decomposition, used for the roofline). For a causal model these cover
  only the pairs j <= i (SPEC §8), and ``fast_ff_square`` times the same step over every pair (the
  work before causal pairs, ``causal=False``) in the same run: the report prints the ratio and the
  roofline fraction against the minimal FLOP count (pairs j <= i) and the count actually done.

Long sequences (n > `LONG_N`): no warm-up, no every-pair baseline, no naive baselines, and the full
layer timed once in the peak-memory child instead of the interleaved loop (its time and peak RSS);
the output says so.

Times are per layer for the whole batch; tokens/s are model-equivalent (per-layer time times the
model's layer count). Only ``layers`` layers are decomposed (2 by default beyond ``tiny``); the
output says so. Peak memory is measured in fresh subprocesses (`bench.memory_child`), peak RSS
(``VmHWM``, else ``getrusage``) on CPU, ``torch.cuda.max_memory_allocated`` on CUDA. The text
report is `bench.report.format_bench`.

Pitfall: on a shared 2-core machine, two OpenMP threads stall on every small op while another
process holds a core; ``threads`` pins the count and the output records the load average.
"""
from __future__ import annotations

import os
import platform
import statistics
from typing import Callable

import torch

from report_builder import schema
from report_builder.bench.memory import (
    GIB, MIB, available_bytes, batch_for_budget, chunk_budget, fmt_bytes, naive_bytes, parse_bytes,
)
from report_builder.bench.memory_child import run_child
from report_builder.bench.shapes import SHAPES, build, capture_layers, layer_dims, parse_dtype, random_inputs
from report_builder.bench.timing import cpu_name, time_call
from report_builder.costs import FLOP_COUNT_DOC, ff_flops
from report_builder.decompose.attention import is_causal
from report_builder.decompose.chunks import ff_tiles, pair_count
from report_builder.decompose.layouts import decompose_batch, decompose_layer
from report_builder.schema import K21_METHODS

K21_N_MAPS = ("ATTN-N", "ATTNRES-N", "ATTNRESLN-N")
DEFAULT_TIMED_LAYERS = 2
TARGETS = {"k21_ratios_speedup": 10.0, "k21_maps_speedup": 5.0, "ff_roofline": 0.5, "budget_bytes": 2 * GIB,
           "ff_roofline_causal": 0.6, "causal_error": 1e-5}
TARGET_SETTING = dict(shape="base", seq_len=128, dtype="float32", device="cpu")
CAUSAL_SETTING = dict(role="primary_causal", seq_len=128, dtype="float32", device="cpu")
"""The causal targets' setting: the default configuration's primary causal model (SmolLM2-135M)."""


def _setting_model(role: str) -> str | None:
    """The source of the default configuration's model in ``role``."""
    from report_builder.config import PRESETS

    return next((m["source"] for m in PRESETS["default"]["models"] if m.get("role") == role), None)
BUDGET_CHECK = dict(shape="base", seq_len=512)
TINY_SHAPES = ("tiny", "tiny-llama")
MATMUL_FLOPS_CAP = 1e12
"""The roofline matmul makes as many calls as the FF step makes GEMMs, up to this many FLOPs (a long
sequence's FF step would otherwise double the bench's time)."""
LONG_N = 1024
"""Above this length (on CPU) the bench skips what grows with n^2 beyond its point: the warm-up, the
every-pair and naive baselines, and the interleaved full-layer timing (the peak-memory child times it
once)."""


def efficiency(dims: dict, n: int, batch: int, per_layer: dict[str, float], matmul_flops: float) -> dict[str, float]:
    """Each kind of work's FLOP/s (`costs` FLOP model) as a fraction of the matmul measured in the same
    run: ``forward`` (HF forward), ``ratios`` (fast_ratios), ``maps`` (fast_k21_maps), ``full``
    (fast_full); the numbers `costs.EFFICIENCY` was set from."""
    from report_builder import costs

    s = costs.Shape(dims["d_model"], dims["layers_total"], dims["heads"], dims["kv_heads"], dims["head_dim"],
                    dims["d_ff"], dims["gated"], schema.layout(dims["ln_position"]) is schema.POST_LN, 0,
                    causal=dims.get("causal", False))
    pts = costs.ig_points(s.gated)
    flops = {"forward": costs.forward_flops(s, n), "ratios": costs.work_flops("ratios", s, n),
             "maps": costs.work_flops("maps", s, n), "full": costs.work_flops("full", s, n, pts)}
    timed = {"forward": "forward", "ratios": "fast_ratios", "maps": "fast_k21_maps", "full": "fast_full"}
    return {k: batch * flops[k] / per_layer[m] / matmul_flops for k, m in timed.items() if per_layer.get(m)}


def roofline(n: int, d: int, dff: int, H: int, gated: bool, batch: int, causal: bool, chunk: int,
             per_layer: dict[str, float], mm: dict) -> dict:
    """The FF step's FLOP rate against the matmul of the same run: counted on the minimal pairs (n^2, or
    the pairs j <= i of a causal model: the headline ``fraction``) and on the pairs the chunks actually
    cover (``fraction_done``); for a causal model also the every-pair step (``square``) and its ratio."""
    p_min, p_done = pair_count(n, causal), pair_count(n, causal, chunk)
    f_min, f_done = ff_flops(n, d, dff, H, gated, p_min) * batch, ff_flops(n, d, dff, H, gated, p_done) * batch
    t = per_layer["fast_ff"]
    rate = mm["gflops"] * 1e9
    roof = {"ff_flops_per_layer": f_min, "ff_flops_done_per_layer": f_done, "ff_seconds_per_layer": t,
            "ff_gflops": f_min / t / 1e9, "matmul": mm, "matmul_gflops": mm["gflops"], "fraction": f_min / t / rate,
            "fraction_done": f_done / t / rate, "causal": causal, "pairs": {"minimal": p_min, "done": p_done,
                                                                            "square": n * n},
            "flop_count": FLOP_COUNT_DOC,
            "ff_time_includes": "decompose_layer with the FF scope's map only: attention step, FF terms, "
                                "their sums and map, and the residual terms' sums (conservative)"}
    if "fast_ff_square" in per_layer:
        t_sq = per_layer["fast_ff_square"]
        f_sq = ff_flops(n, d, dff, H, gated) * batch
        roof["square"] = {"seconds_per_layer": t_sq, "flops_per_layer": f_sq, "fraction": f_sq / t_sq / rate,
                          "fraction_of_minimal": f_min / t_sq / rate, "speedup": t_sq / t,
                          "what": "the same step over every pair (causal=False): the work before causal pairs"}
    return roof


def run_bench(*, shape: str | None = "base", model: str | None = None, seq_len: int = 128, batch: int = 1,
              device: str = "cpu", dtype: str = "float32", max_memory: str | int | None = None,
              repeats: int = 3, layers: int | None = None, threads: int | None = None,
              naive: bool | None = None, memory: bool = True, budget_check: bool | None = None) -> dict:
    """Benchmark the fast engine against the forward pass and the naive code, side by side.

    Args:
        shape: ``tiny``, ``tiny-llama``, ``base``, ``large``, ``gpt2-base`` or ``llama-small`` (random
            init, seeded); ignored when ``model`` is given. model: a name
            `report_builder.models.loading.load` accepts.
        seq_len, batch: random token ids (seeded), all positions real.
        device, dtype: ``cpu``/``cuda``; ``float32``, ``bfloat16``, ``float16`` or ``tf32`` (float32
            storage, TF32 matmuls on CUDA). Norms are accumulated in float32 whatever the dtype.
        max_memory: memory budget (``"2GiB"``) for the whole process; sets the chunk budget
            (``budget_bytes``) and the recommended forward batch size, and is the limit of the BERT-base
            n = 512 budget check (default 2 GiB there).
        repeats: timing repeats (medians). layers: how many layers to decompose (default all for
            ``tiny``, else 2); per-layer numbers are scaled to the whole model explicitly.
        threads: torch CPU threads (default: torch's). naive: run the naive baselines (default: when
            their tensors fit in half the available memory, and n <= `LONG_N`). memory: measure peak
            memory in subprocesses. budget_check: run the BERT-base n = 512 check (default: unless
            shape is tiny or n > `LONG_N`).
    Returns:
        A JSON-serialisable dict (see `format_bench`).
    """
    if layers is not None and layers < 1:
        from report_builder.errors import UsageError
        raise UsageError(f"--layers: expected a positive number of layers, got {layers}")
    if threads:
        torch.set_num_threads(int(threads))
    tdt, tf32 = parse_dtype(dtype)
    if model:
        shape = None
    limit = parse_bytes(max_memory)
    load0 = os.getloadavg()
    lm = build(shape, model, device, dtype)
    dims = layer_dims(lm)
    n, d, dff, H, gated = seq_len, dims["d_model"], dims["d_ff"], dims["heads"], dims["gated"]
    L = lm.n_layers
    tiny = shape in TINY_SHAPES
    n_timed = min(L, layers or (L if tiny else DEFAULT_TIMED_LAYERS))
    timed_layers = list(range(n_timed))
    itemsize = torch.empty((), dtype=tdt).element_size()
    inputs = random_inputs(lm, seq_len, batch)
    long = n > LONG_N and not device.startswith("cuda")
    from report_builder.decompose.reference import reference_layer, reference_maps
    from report_builder.bench.naive import naive_k21

    with torch.no_grad():
        caps = capture_layers(lm, inputs, timed_layers)
        causal = all(is_causal(c.alpha) for c in caps)
        dims["causal"] = causal
        if limit is not None:
            budget = chunk_budget(limit, n, d, dff, H, gated, itemsize, causal=causal)
        else:
            budget = 512 * MIB
        chunk, tile = ff_tiles(n, d, dff, budget_bytes=budget, itemsize=itemsize, gated=gated, batch=batch)
        lws = [lm.layer_weights(i) for i in timed_layers]
        ff_scope = lws[0].layout.ff_after  # the scope right after FF: its map needs the FF decomposition
        seqs = [(lw, cap.x[b], cap.alpha[b], {k: t[b] for k, t in cap.refs.items()})
                for lw, cap in zip(lws, caps) for b in range(batch)]
        naive_asked = naive
        if naive is None:
            naive = not long and naive_bytes(n, d, dff, H, itemsize) <= 0.5 * available_bytes()

        def each(fn):
            return lambda: [fn(*s) for s in seqs]

        def batched(**kw):  # the engine decomposes the whole batch at once (`decompose_batch`)
            return lambda: [decompose_batch(lw, cap.x, cap.alpha, [n] * batch, budget_bytes=budget, **kw)
                            for lw, cap in zip(lws, caps)]

        methods: dict[str, Callable[[], object]] = {
            "forward": lambda: lm.model(**inputs),
            "fast_ratios": batched(ratios=True),
            "fast_k21_maps": batched(maps=K21_N_MAPS),
            "fast_full": lambda: [decompose_batch(lw, cap.x, cap.alpha, [n] * batch, maps=lw.scopes + K21_METHODS,
                                                  ratios=True, refs=cap.refs, budget_bytes=budget)
                                  for lw, cap in zip(lws, caps)],
            "fast_ff": batched(maps=(ff_scope,)),
        }
        if long:  # timed once, with its peak memory, in the memory child
            del methods["fast_full"]
        if causal and not long:  # the same step over every pair: the work before causal pairs
            methods["fast_ff_square"] = batched(maps=(ff_scope,), causal=False)
        if naive:
            methods.update({
                "naive_k21_ratios": each(lambda lw, x, a, r: naive_k21(lw, x, a, maps=False, ratios=True)),
                "naive_k21_maps": each(lambda lw, x, a, r: naive_k21(lw, x, a, maps=True)),
                "naive_full": each(lambda lw, x, a, r: reference_maps(reference_layer(lw, x, a, ig="closed"))),
            })
        # the roofline: a plain matmul of the FF chunk GEMM's shape, as many calls as the FF step makes
        mm_rows = min(batch * tile * chunk, 16384)
        mm_calls = len(lws) * max(1, -(-batch * pair_count(n, causal, chunk) // mm_rows))
        mm_calls = min(mm_calls, max(1, int(MATMUL_FLOPS_CAP // (2 * mm_rows * dff * d))))  # long sequences
        gen = torch.Generator().manual_seed(1)
        mm_a = torch.randn(mm_rows, dff, generator=gen).to(device=device, dtype=tdt)
        mm_b = torch.randn(dff, d, generator=gen).to(device=device, dtype=tdt)
        methods["matmul"] = lambda: [torch.matmul(mm_a, mm_b) for _ in range(mm_calls)]
        for k in ("forward", "fast_ratios", "fast_k21_maps", "fast_full", "matmul"):  # warm-up (first-call costs)
            if k in methods and not long:
                methods[k]()
        raw: dict[str, list[float]] = {k: [] for k in methods}
        for _ in range(max(1, repeats)):  # interleaved, so drifting load hits every method alike
            for k, fn in methods.items():
                raw[k].append(time_call(fn, device))

        # accuracy: fast full layer vs the HF tensors, and fast maps vs the naive reference
        errors: dict[str, float] = {}
        for lw, x, a, r in ([] if long else seqs):  # long: the memory child checks its layer
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
    eff = efficiency(dims, n, batch, per_layer, mm["gflops"] * 1e9)
    roof = roofline(n, d, dff, H, gated, batch, causal, chunk, per_layer, mm)

    mem: dict = {"method": None}
    if device.startswith("cuda"):
        mem["method"] = "torch.cuda.max_memory_allocated, in process"
        mem.update(_cuda_peaks(lm, inputs, timed_layers[0], budget, naive))
    elif memory or long:
        mem["method"] = "fresh subprocess per method, peak RSS (VmHWM; model and interpreter included)"
        base_args = dict(shape=shape, model=model, seq_len=seq_len, device=device, dtype=dtype,
                         threads=torch.get_num_threads(), max_memory=limit)
        mem["fast_full"] = run_child(dict(base_args, mode="fast_full", check=long))
        mem["naive_full"] = run_child(dict(base_args, mode="naive_full")) if naive else {"skipped": "naive not run"}
    if long and not device.startswith("cuda"):  # the full layer's time and check come from the memory child
        child = mem.get("fast_full") or {}
        if "seconds" in child:
            per_layer["fast_full"] = child["seconds"]
            tps["fast_full"] = tokens / (child["seconds"] * L)
            cost["fast_full"] = child["seconds"] / per_layer["forward"]
            eff.update(efficiency(dims, n, batch, {"fast_full": child["seconds"]}, mm["gflops"] * 1e9))
        errors.update(child.get("errors") or {})
    if budget_check is None:
        budget_check = not tiny and not device.startswith("cuda") and not long
    if budget_check:
        blimit = limit or TARGETS["budget_bytes"]
        bc = run_child(dict(shape=BUDGET_CHECK["shape"], model=None, seq_len=BUDGET_CHECK["seq_len"], device="cpu",
                         dtype="float32", threads=torch.get_num_threads(), max_memory=blimit, mode="fast_full",
                         check=True))
        bc.update(limit_bytes=blimit, shape=BUDGET_CHECK["shape"], seq_len=BUDGET_CHECK["seq_len"])
        bc["pass"] = bool("peak_rss_bytes" in bc and bc["peak_rss_bytes"] <= blimit and bc.get("max_error", 1) <= 1e-4)
    else:
        bc = {"skipped": "not requested" + (f" (off by default for shape {shape})" if tiny else ""),
              "pass": None}

    cfg = dict(shape=shape, model=model, description=SHAPES[shape][2] if shape else model, **dims,
               layers_timed=n_timed, seq_len=n, batch=batch, device=device, dtype=dtype, tf32=tf32,
               threads=torch.get_num_threads(), repeats=max(1, repeats), max_memory_bytes=limit,
               chunk_budget_bytes=budget, chunk_rows=chunk, chunk_tile=tile,
               recommended_batch=batch_for_budget(budget, n, d, H, L, itemsize),
               torch=torch.__version__, cpu=cpu_name(), python=platform.python_version(),
               loadavg_start=list(load0), loadavg_end=list(os.getloadavg()))
    setting = CAUSAL_SETTING if causal else TARGET_SETTING
    in_setting = ((model == _setting_model(setting["role"])) if causal else shape == setting["shape"]) \
        and n == setting["seq_len"] and dtype == setting["dtype"] and device == setting["device"]
    targets = [
        _target("K21 ratios >= 10x faster than naive", speed["k21_ratios"], TARGETS["k21_ratios_speedup"], "x"),
        _target("K21 maps >= 5x faster than naive", speed["k21_maps"], TARGETS["k21_maps_speedup"], "x"),
        (_target("FF step vs its minimal FLOPs (pairs j <= i) >= 60% of matmul GFLOP/s", roof["fraction"],
                 TARGETS["ff_roofline_causal"], "%") if causal else
         _target("FF decomposition >= 50% of matmul GFLOP/s", roof["fraction"], TARGETS["ff_roofline"], "%")),
        {"name": f"BERT-base n = 512 full layer <= {fmt_bytes(bc.get('limit_bytes', TARGETS['budget_bytes']))} RSS",
         "value": bc.get("peak_rss_bytes"), "target": bc.get("limit_bytes", TARGETS["budget_bytes"]),
         "unit": "bytes", "ok": bc.get("pass")},
    ]
    if causal and dtype == "float32":
        worst = max(errors.values()) if errors else None
        targets.append({"name": "max reconstruction error <= 1e-05", "value": worst, "target": TARGETS["causal_error"],
                        "unit": "error", "ok": None if worst is None else bool(worst <= TARGETS["causal_error"])})
    notes = [f"decomposed {n_timed} of {L} layers; per-layer times are medians over {max(1, repeats)} repeats "
             f"for the whole batch; tokens/s are model-equivalent (x {L} layers)"]
    if long:
        notes.append(f"n > {LONG_N} on CPU: no warm-up; the full layer (every scope, K21 maps and ratios, checks, "
                     "extras) is timed once, with its peak RSS, in a fresh process; no every-pair or naive "
                     "baseline, no BERT-base budget check")
    elif not naive:
        notes.append(f"naive baselines skipped: ~{fmt_bytes(naive_bytes(n, d, dff, H, itemsize))} of full tensors "
                     "per sequence" + (" would not fit in half the available memory" if naive_asked is None else
                                       " (not requested)"))
    if causal:
        notes.append("causal model: every n^2 step covers only the pairs j <= i (the maps' other entries are exact "
                     "zeros); the FF roofline counts the minimal pairs n (n+1) / 2"
                     + (f", fast_ff_square the same step over all n^2 pairs ({roof['square']['speedup']:.2f}x "
                        "slower in this run)" if "square" in roof else ""))
    busy = max(load0[0], cfg["loadavg_end"][0])
    if device == "cpu" and cfg["threads"] > 1 and busy > (os.cpu_count() or 1) - 1:
        notes.append(f"load average {busy:.1f} on {os.cpu_count()} CPUs: other processes compete, and {cfg['threads']} "
                     "OpenMP threads stall on every small op while one is descheduled; compare with "
                     "OMP_NUM_THREADS=1 (or threads=1)")
    if not in_setting:
        notes.append("the targets are defined for " + (f"model={_setting_model(setting['role'])}" if causal
                                                       else "shape=base")
                     + ", n=128, float32 on CPU; marks here use the same thresholds")
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
        "targets_defined_for": (f"--model {_setting_model(setting['role'])}" if causal else "the BERT-base shape")
                               + ", n = 128, float32, CPU",
        "gpu": {"run": device.startswith("cuda"),
                "note": "GPU run" if device.startswith("cuda") else "not run (no GPU in this session)"},
        "notes": notes,
    }


def _target(name: str, value: float | None, thr: float, unit: str) -> dict:
    return {"name": name, "value": value, "target": thr, "unit": unit,
            "ok": None if value is None else bool(value >= thr)}


def _cuda_peaks(lm, inputs, layer: int, budget: int, naive: bool) -> dict:  # pragma: no cover - needs a GPU
    from report_builder.decompose.reference import reference_layer, reference_maps
    out = {}
    with torch.no_grad():
        cap = capture_layers(lm, {k: v[:1] for k, v in inputs.items()}, [layer])[0]
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
