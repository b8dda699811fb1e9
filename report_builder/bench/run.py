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

The FF step is cut by a device class's chunk rule (``chunk_rule``: `decompose.chunks`; ``auto`` = the
device's) and its pair GEMM runs in a precision mode (``dtype``: `schema.PRECISIONS`; the model stays
float32): a reduced mode is also timed in float32 (``fast_ff_float32``) and reported as faster or not
(on a CPU it never is: said so, timed for its arithmetic). The torch ops per layer (CPU) or CUDA kernels
and GPU busy time (`bench.ops`) of the FF decomposition and of the full layer are profiled apart from
the timed repeats, and a short-input case (`bench.short`: 16 sentences of 8-20 tokens) times the engine
one sequence at a time and batched against the naive formulas.

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

from report_builder.bench.memory import (
    GIB, MIB, available_bytes, batch_for_budget, chunk_budget, fmt_bytes, naive_bytes, parse_bytes,
)
from report_builder.bench.memory_child import run_child
from report_builder.bench.roofline import efficiency, gemm_shape, roofline
from report_builder.bench.shapes import SHAPES, build, capture_layers, layer_dims, random_inputs
from report_builder.bench.short import K21_N_MAPS
from report_builder.bench.timing import cpu_name, time_call
from report_builder.decompose.attention import is_causal
from report_builder.decompose.chunks import ff_tiles, gpu_plan, rule_class
from report_builder.decompose.layouts import batch_step, decompose_batch, decompose_layer
from report_builder.decompose.layouts.common import read_checks
from report_builder.decompose.precision import HALF
from report_builder.errors import UsageError, option, shown
from report_builder.schema import K21_METHODS, PRECISIONS

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
LONG_N = 1024
"""Above this length (on CPU) the bench skips what grows with n^2 beyond its point: the warm-up, the
every-pair and naive baselines, and the interleaved full-layer timing (the peak-memory child times it
once)."""


def _setup(dtype: str, chunk_rule: str, device: str) -> tuple[str, str]:
    """The precision mode and the device class, or one `UsageError` line."""
    if dtype not in PRECISIONS:
        raise UsageError(f"{option('dtype')}: unknown precision {shown(dtype)}; use {', '.join(PRECISIONS)}")
    try:
        return dtype, rule_class(chunk_rule, "cpu" if device == "cpu" else device.split(":")[0], dtype)
    except ValueError as e:
        raise UsageError(f"{option('chunk_rule')}: {e}") from None


def run_bench(*, shape: str | None = "base", model: str | None = None, seq_len: int = 128, batch: int = 1,
              device: str = "cpu", dtype: str = "float32", max_memory: str | int | None = None,
              repeats: int = 3, layers: int | None = None, threads: int | None = None,
              naive: bool | None = None, memory: bool = True, budget_check: bool | None = None,
              chunk_rule: str = "auto", short: bool | None = None, ops: bool = True) -> dict:
    """Benchmark the fast engine against the forward pass and the naive code, side by side.

    Args:
        shape: ``tiny``, ``tiny-llama``, ``base``, ``large``, ``gpt2-base`` or ``llama-small`` (random
            init, seeded); ignored when ``model`` is given. model: a name
            `report_builder.models.loading.load` accepts.
        seq_len, batch: random token ids (seeded), all positions real.
        device: ``cpu``/``cuda``. dtype: the precision mode of the pair GEMMs (`schema.PRECISIONS`:
            ``float32``, ``tf32``, ``bfloat16``, ``float16``); the model, its forward pass, the norms,
            sums and checks stay float32. A reduced mode is also timed in float32 (``fast_ff_float32``).
        max_memory: memory budget (``"2GiB"``) for the whole process; sets the chunk budget
            (``budget_bytes``) and the recommended forward batch size, and is the limit of the BERT-base
            n = 512 budget check (default 2 GiB there). Without it the CPU rule's budget is 512 MiB and
            the GPU rule's the device's free memory.
        repeats: timing repeats (medians). layers: how many layers to decompose (default all for
            ``tiny``, else 2); per-layer numbers are scaled to the whole model explicitly.
        threads: torch CPU threads (default: torch's). naive: run the naive baselines (default: when
            their tensors fit in half the available memory, and n <= `LONG_N`). memory: measure peak
            memory in subprocesses. budget_check: run the BERT-base n = 512 check (default: unless
            shape is tiny or n > `LONG_N`).
        chunk_rule: ``auto`` (the device's class), ``cpu`` or ``gpu`` (`decompose.chunks`).
        short: time the short-input case (`bench.short`; default: with the naive baselines, unless n > `LONG_N`).
        ops: count the torch ops (CUDA kernels) per layer with the profiler (`bench.ops`).
    Returns:
        A JSON-serialisable dict (see `format_bench`); every number the report prints is in it.
    """
    if layers is not None and layers < 1:
        raise UsageError(f"{option('layers')}: expected a positive number of layers, got {layers}")
    mode, rule = _setup(dtype, chunk_rule, device)
    if threads:
        torch.set_num_threads(int(threads))
    if model:
        shape = None
    limit = parse_bytes(max_memory)
    load0 = os.getloadavg()
    lm = build(shape, model, device, "float32")  # every precision mode keeps the model in float32
    dims = layer_dims(lm)
    n, d, dff, H, gated = seq_len, dims["d_model"], dims["d_ff"], dims["heads"], dims["gated"]
    L = lm.n_layers
    tiny = shape in TINY_SHAPES
    n_timed = min(L, layers or (L if tiny else DEFAULT_TIMED_LAYERS))
    timed_layers = list(range(n_timed))
    itemsize = 4
    inputs = random_inputs(lm, seq_len, batch)
    long = n > LONG_N and not device.startswith("cuda")
    reduced = mode != "float32"
    from report_builder.decompose.reference import reference_layer, reference_maps
    from report_builder.bench.naive import naive_k21

    with torch.no_grad():
        caps = capture_layers(lm, inputs, timed_layers)
        causal = all(is_causal(c.alpha) for c in caps)
        dims["causal"] = causal
        if limit is not None:
            budget = chunk_budget(limit, n, d, dff, H, gated, itemsize, causal=causal)
        else:
            budget = 512 * MIB if rule == "cpu" else None
        plan = None
        if rule == "gpu":  # sized once, as the engine does: the timed steps take it as given
            from report_builder.decompose.layouts.common import gpu_budget
            budget = gpu_budget(caps[0].x.device, budget)
            plan = gpu_plan(n, d, dff, budget_bytes=budget, batch=batch, causal=causal,
                            gated=gated, reduced=mode in HALF)
            chunk, tile = plan.rows, n
        else:
            chunk, tile = ff_tiles(n, d, dff, budget_bytes=budget, itemsize=itemsize, gated=gated, batch=batch)
        lws = [lm.layer_weights(i) for i in timed_layers]
        ff_scope = lws[0].layout.ff_after  # the scope right after FF: its map needs the FF decomposition
        seqs = [(lw, cap.x[b], cap.alpha[b], {k: t[b] for k, t in cap.refs.items()})
                for lw, cap in zip(lws, caps) for b in range(batch)]
        naive_asked = naive
        if naive is None:
            naive = not long and naive_bytes(n, d, dff, H, itemsize) <= 0.5 * available_bytes()
        kw = dict(budget_bytes=budget, chunk_rule=rule, precision=mode, causal=lm.causal)

        def each(fn):
            return lambda: [fn(*s) for s in seqs]

        def batched(**a):  # the engine decomposes the whole batch at once (`decompose_batch`)
            return lambda: [decompose_batch(lw, cap.x, cap.alpha, [n] * batch, **{**kw, **a})
                            for lw, cap in zip(lws, caps)]

        methods: dict[str, Callable[[], object]] = {
            "forward": lambda: lm.model(**inputs),
            "fast_ratios": batched(ratios=True),
            "fast_k21_maps": batched(maps=K21_N_MAPS),
            "fast_full": lambda: read_checks([batch_step(lw, cap.x, cap.alpha, [n] * batch, maps=lw.scopes + K21_METHODS,
                                                         ratios=True, refs=cap.refs, **kw)
                                              for lw, cap in zip(lws, caps)]),  # the check read once, after the layers
            "fast_ff": batched(maps=(ff_scope,)),
        }
        if reduced:  # the same step in float32, same rule: does the mode pay?
            methods["fast_ff_float32"] = batched(maps=(ff_scope,), precision="float32")
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
        # the roofline: a plain matmul of the FF step's GEMM shape in the mode, as many calls as it makes
        from report_builder.bench.roofline import MATMUL_FLOPS_CAP
        from report_builder.decompose.precision import input_dtype, pair_mm

        mm_rows, mm_calls = gemm_shape(rule, plan, batch, n, causal, chunk, tile, device, len(lws))
        mm_calls = min(mm_calls, max(1, int(MATMUL_FLOPS_CAP // (2 * mm_rows * dff * d))))  # long sequences
        gen = torch.Generator(device=device).manual_seed(1)  # drawn where they are used (a GPU's: GBs)
        mm_a = torch.randn(mm_rows, dff, generator=gen, device=device).to(input_dtype(mode))
        mm_b = torch.randn(dff, d, generator=gen, device=device).to(input_dtype(mode))
        methods["matmul"] = lambda: [pair_mm(mm_a, mm_b, mode) for _ in range(mm_calls)]
        for k in ("forward", "fast_ratios", "fast_k21_maps", "fast_full", "fast_ff", "matmul"):  # warm-up
            if k in methods and not long:
                methods[k]()
        raw: dict[str, list[float]] = {k: [] for k in methods}
        for _ in range(max(1, repeats)):  # interleaved, so drifting load hits every method alike
            for k, fn in methods.items():
                raw[k].append(time_call(fn, device))
        counted = _count(methods, device, n_timed) if ops else {}

        # accuracy: fast full layer vs the HF tensors, and fast maps vs the naive reference
        errors: dict[str, float] = {}
        for lw, x, a, r in ([] if long else seqs):  # long: the memory child checks its layer
            res = decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True, refs=r, **kw)
            for k, e in res.errors.items():
                errors[k] = max(errors.get(k, 0.0), e)
        map_diff = None
        if naive:
            lw, x, a, r = seqs[0]
            res = decompose_layer(lw, x, a, maps=lw.scopes, **kw)
            ref = reference_maps(reference_layer(lw, x, a, ig="closed"))
            map_diff = max(float(((res.maps[k].float() - ref[k].float()).abs().max()
                                  / ref[k].float().abs().max().clamp_min(1e-30))) for k in res.maps if k in ref)
    del caps, seqs, mm_a, mm_b
    short_res = None
    if short or (short is None and not long and naive):  # the engine against the naive formulas
        from report_builder.bench.short import run_short

        short_res = run_short(lm, timed_layers[:1], device=device, repeats=repeats, naive=naive, precision=mode,
                              chunk_rule=rule)
    mm_raw = raw.pop("matmul")
    mm_s = statistics.median(mm_raw)
    mm = {"shape": [mm_rows, dff, d], "calls": mm_calls, "seconds": mm_s, "seconds_raw": mm_raw, "dtype": mode,
          "gflops": 2 * mm_rows * dff * d * mm_calls / mm_s / 1e9,
          "how": "interleaved with the methods in every repeat (same load), median; the FF step's GEMM shape "
                 + ("(one buffer of the GPU rule's blocks)" if rule == "gpu" else "(one chunk of the CPU rule)")}

    med = {k: statistics.median(v) for k, v in raw.items()}
    per_layer = {k: (med[k] / L if k == "forward" else med[k] / n_timed) for k in med}
    tokens = batch * n
    tps = {k: tokens / (t * L) for k, t in per_layer.items()}
    cost = {k: t / per_layer["forward"] for k, t in per_layer.items() if k != "forward"}
    speed = {}
    for name, fast, slow in (("k21_ratios", "fast_ratios", "naive_k21_ratios"),
                             ("k21_maps", "fast_k21_maps", "naive_k21_maps"),
                             ("full_layer", "fast_full", "naive_full")):
        speed[name] = per_layer[slow] / per_layer[fast] if slow in per_layer and fast in per_layer else None
    eff = efficiency(dims, n, batch, per_layer, mm["gflops"] * 1e9)
    from report_builder.decompose.chunks import pair_count
    done = plan.pairs // batch if plan is not None else pair_count(n, causal, chunk)
    roof = roofline(n, d, dff, H, gated, batch, causal, done, per_layer, mm)
    prec = _precision(mode, device, per_layer)

    mem: dict = {"method": None}
    if device.startswith("cuda"):
        mem["method"] = "torch.cuda.max_memory_allocated, in process"
        mem.update(_cuda_peaks(lm, inputs, timed_layers[0], kw, naive))
    elif memory or long:
        mem["method"] = "fresh subprocess per method, peak RSS (VmHWM; model and interpreter included)"
        base_args = dict(shape=shape, model=model, seq_len=seq_len, device=device, dtype=mode,
                         threads=torch.get_num_threads(), max_memory=limit, chunk_rule=rule)
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

    chunks = {"rule": rule, "chunk_rule": chunk_rule, "rows": chunk, "tile": tile,
              "budget_bytes": plan.budget_bytes if plan is not None else budget}
    if plan is not None:
        chunks.update(blocks=[list(b) for b in plan.blocks], groups=[list(g) for g in plan.groups], pairs=plan.pairs,
                      gemm_rows=[plan.group_pairs(g) for g in range(len(plan.groups))])
    cfg = dict(shape=shape, model=model, description=SHAPES[shape][2] if shape else model, **dims,
               layers_timed=n_timed, seq_len=n, batch=batch, device=device, dtype=mode, tf32=mode == "tf32",
               chunk_rule=rule, threads=torch.get_num_threads(), repeats=max(1, repeats), max_memory_bytes=limit,
               chunk_budget_bytes=chunks["budget_bytes"], chunk_rows=chunk, chunk_tile=tile,
               recommended_batch=batch_for_budget(chunks["budget_bytes"] or 512 * MIB, n, d, H, L, itemsize),
               torch=torch.__version__, cpu=cpu_name(), python=platform.python_version(),
               gpu_name=torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
               loadavg_start=list(load0), loadavg_end=list(os.getloadavg()))
    setting = CAUSAL_SETTING if causal else TARGET_SETTING
    in_setting = ((model == _setting_model(setting["role"])) if causal else shape == setting["shape"]) \
        and n == setting["seq_len"] and mode == setting["dtype"] and device == setting["device"]
    worst = max(errors.values()) if errors else None
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
    if causal and mode == "float32":
        targets.append({"name": "max reconstruction error <= 1e-05", "value": worst, "target": TARGETS["causal_error"],
                        "unit": "error", "ok": None if worst is None else bool(worst <= TARGETS["causal_error"])})
    if reduced:
        targets.append({"name": f"max reconstruction error <= the {mode} bound {prec['bound']:.1e}", "value": worst,
                        "target": prec["bound"], "unit": "error",
                        "ok": None if worst is None else bool(worst <= prec["bound"])})
        t = _target(f"{mode} FF step faster than float32", prec.get("speedup_vs_float32"), 1.0, "x")
        targets.append(dict(t, ok=None) if device == "cpu" else t)  # a CPU has no tensor cores: refused anyway
    if short_res is not None:
        sp = short_res["speedup_vs_naive"]
        for what in ("b1", "batched"):
            vals = [v for k, v in sp.items() if k.endswith(what)]
            if vals:
                targets.append(_target(f"short inputs: engine ({what}) no slower than naive", min(vals), 1.0, "x"))
    notes = [f"decomposed {n_timed} of {L} layers; per-layer times are medians over {max(1, repeats)} repeats "
             f"for the whole batch; tokens/s are model-equivalent (x {L} layers)"]
    if prec.get("refused"):
        notes.append(prec["refused"])
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
        "chunks": chunks,
        "seconds_per_layer": per_layer,
        "seconds_per_layer_best": {k: (min(v) / L if k == "forward" else min(v) / n_timed) for k, v in raw.items()},
        "seconds_raw": raw,
        "tokens_per_s": tps,
        "cost_vs_forward": cost,
        "speedup": speed,
        "roofline": roof,
        "efficiency": eff,
        "ops": counted,
        "precision": prec,
        "short": short_res,
        "memory": mem,
        "budget_check": bc,
        "errors": {"max_rel_error": worst, "per_check": errors, "bound": prec["bound"], "dtype": mode,
                   "fast_vs_naive_max_map_diff": map_diff},
        "targets": targets,
        "targets_setting": in_setting,
        "targets_defined_for": (f"--model {_setting_model(setting['role'])}" if causal else "the BERT-base shape")
                               + ", n = 128, float32, CPU",
        "gpu": {"run": device.startswith("cuda"),
                "note": "GPU run" if device.startswith("cuda") else "not run (no GPU in this session)"},
        "notes": notes,
    }


def _count(methods: dict, device: str, layers: int) -> dict:
    """Torch ops (CPU) or CUDA kernels and GPU busy time per layer of the K21 ratios, the FF decomposition and
    the full layer, each profiled once apart from the timed repeats (`bench.ops`): against the wall time, the
    busy time says whether a step is bound by its arithmetic or by launching its kernels."""
    from report_builder.bench.ops import count_ops

    out = {}
    for key in ("fast_ratios", "fast_ff", "fast_full"):
        if key not in methods:
            continue
        c = count_ops(methods[key], device)
        out[key] = {"ops_per_layer": c["ops"] / layers, "by_name": {k: v / layers for k, v in c["by_name"].items()}}
        if "kernels" in c:
            out[key].update(kernels_per_layer=c["kernels"] / layers, gpu_busy_ms_per_layer=c["gpu_busy_ms"] / layers)
    return out


def _precision(mode: str, device: str, per_layer: dict) -> dict:
    """The mode, its bound and unit roundoff, and whether it paid: a reduced mode's FF step against the
    same step in float32 (``speedup_vs_float32``), refused in one line where it is not faster."""
    p = PRECISIONS[mode]
    out = {"mode": mode, "label": p.label, "bound": p.bound, "unit_roundoff": p.unit_roundoff, "refused": None}
    if mode == "float32":
        return out
    t32, t = per_layer.get("fast_ff_float32"), per_layer.get("fast_ff")
    if t32 and t:
        out["speedup_vs_float32"] = t32 / t
    if device == "cpu":
        out["refused"] = (f"{mode} is not faster than float32 on a CPU (no tensor cores): a build refuses it there; "
                          "timed here for its arithmetic only")
    elif out.get("speedup_vs_float32") is not None and out["speedup_vs_float32"] <= 1.0:
        out["refused"] = (f"{mode} was not faster than float32 on this device ({out['speedup_vs_float32']:.2f}x): "
                          "refused, use float32")
    return out


def _target(name: str, value: float | None, thr: float, unit: str) -> dict:
    return {"name": name, "value": value, "target": thr, "unit": unit,
            "ok": None if value is None else bool(value >= thr)}


def _cuda_peaks(lm, inputs, layer: int, kw: dict, naive: bool) -> dict:  # pragma: no cover - needs a GPU
    from report_builder.decompose.reference import reference_layer, reference_maps
    out = {}
    with torch.no_grad():
        cap = capture_layers(lm, {k: v[:1] for k, v in inputs.items()}, [layer])[0]
        lw, x, a = lm.layer_weights(layer), cap.x[0], cap.alpha[0]
        runs = {"fast_full": lambda: decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True, **kw)}
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
