"""The GPU check's probe of CUDA graphs (`tests/tools/gpu_steps.py` step ``graphs``): are the two
launch-bound steps of issue #29 (K21 ratios, BERT-base shape 8 x 128; the causal FF decomposition,
SmolLM2 shape 8 x 128) fast enough when their kernels are replayed from one CUDA graph instead of being
launched one by one from Python?

For each step it times, side by side on the same captured inputs: the engine as it runs today
(``eager``), the same call captured once in a `torch.cuda.CUDAGraph` and replayed (``graph``), and for the
K21 ratios the naive formulas one sequence at a time (the baseline of the ≥ 10× target). It records the
largest difference between the replayed and the eager outputs (the graph must give the same numbers) and,
where capture fails, the error (for example a host synchronisation or a host-to-device copy inside the
layer, which a graph cannot hold): what the engine would have to change before a graph can run it.

The step ``compile`` (`compile_probe`, taken on a GPU only when asked: ``gpu_check.sh --steps compile``)
does the same with `torch.compile` (inductor: element-wise ops fused into few kernels) for those two steps,
the BERT-base FF decomposition and the fast full layer with its check (`STEPS`), and lists the graph breaks
TorchDynamo finds in each step (host reads, untraceable calls: what stops one compiled graph per layer step);
on the CPU it traces with the ``eager`` backend, so the dry run counts the breaks too. Every step is
`layouts.batch_step` with the budget sized beforehand, as the engine runs it: none breaks today
(tests/decompose/test_compiled_step.py keeps it so).

Nothing here changes the engine; the answer decides whether graphs are the way to the targets. On the CPU
(the dry run) there are no CUDA graphs: the eager half runs, at tiny sizes, and ``graph`` says why not.
"""
from __future__ import annotations

import statistics
import time


def _median_s(fn, sync, repeats: int) -> float:
    walls = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def _tensors(out) -> list:
    """Every tensor of a layer step's results (`batch_step`: the results and the check's rows on the device), in a
    fixed order."""
    out, check = out
    flat = [] if check.rows() is None else [check.rows()]
    for r in out:
        for part in ("maps", "ratios", "sums", "bias", "extras"):
            d = getattr(r, part)
            flat += [d[k] for k in sorted(d)]
    return flat


def graphed(torch, fn, warmup: int = 3):
    """``(replay, outputs)``: ``fn`` captured in one CUDA graph (after ``warmup`` calls on a side stream, as
    torch's documentation asks), ``replay()`` reruns it in place and ``outputs`` are the graph's own output
    tensors (rewritten by each replay)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g.replay, out


def probe(torch, fn, device: str, repeats: int, naive=None) -> dict:
    """Eager vs graph-replayed ``fn`` (and ``naive``, when given) on one set of inputs: median ms per call,
    the speedups, the kernels' agreement, or why no graph ran."""
    sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else (lambda: None)  # noqa: E731
    expected = _tensors(fn())
    out = {"eager_ms": 1e3 * _median_s(fn, sync, repeats)}
    if naive is not None:
        naive()
        out["naive_ms"] = 1e3 * _median_s(naive, sync, repeats)
        out["eager_vs_naive"] = out["naive_ms"] / out["eager_ms"]
    if device != "cuda":
        out["graph"] = "not run: CUDA graphs need a CUDA device"
        return out
    try:
        replay, got = graphed(torch, fn)
        replay()
        sync()
        got = _tensors(got)
        out["graph_max_abs_diff"] = max(((a - b).abs().max().item() for a, b in zip(got, expected)), default=0.0)
        out["graph_same_outputs"] = len(got) == len(expected)
        out["graph_ms"] = 1e3 * _median_s(replay, sync, repeats)
        out["graph_vs_eager"] = out["eager_ms"] / out["graph_ms"]
        if naive is not None:
            out["graph_vs_naive"] = out["naive_ms"] / out["graph_ms"]
    except Exception as e:  # noqa: BLE001 - why capture failed is the finding
        out["graph"] = f"capture failed: {type(e).__name__}: {str(e)[:400]}"
    return out


STEPS = {  # name -> (shape role, what the layer step computes)
    "k21_ratios": ("base", "ratios"),
    "causal_ff": ("causal", "ff"),
    "encoder_ff": ("base", "ff"),
    "full_layer": ("base", "full"),
}
"""The probed layer steps: K21 ratios (BERT-base shape), the FF decomposition of the SmolLM2 shape (causal) and
of the BERT-base shape, and the fast full layer of the BERT-base shape (every scope's map, the K21 maps and
ratios, the reconstruction check: its errors on the device, read after the step)."""


def _steps(ctx: dict, size, names=("k21_ratios", "causal_ff")):
    """The probed steps ``names`` (`STEPS`), one at a time: ``(name, shape, lm, fn, naive)``; ``fn()`` is one
    layer's step (`layouts.batch_step`) on the captured batch by the GPU rule, also on the CPU, with the budget
    sized once beforehand as the engine does (`gpu_budget`), ``naive`` the K21 baseline (None for the others).
    The model is freed after each."""
    import torch

    from report_builder.bench.naive import naive_k21
    from report_builder.bench.shapes import build, capture_layers, random_inputs
    from report_builder.decompose.layouts import batch_step, gpu_budget
    from report_builder.schema import K21_METHODS

    dev, n, b = ctx["device"], size(ctx, "n"), size(ctx, "batch")
    for name in names:
        role, what = STEPS[name]
        shape = size(ctx, role)
        lm = build(shape, None, dev, "float32")
        lw = lm.layer_weights(0)
        cap = capture_layers(lm, random_inputs(lm, n, b), [0])[0]
        opts = {"ratios": {"ratios": True}, "ff": {"maps": (lw.layout.ff_after,)},
                "full": {"maps": lw.scopes + K21_METHODS, "ratios": True, "refs": cap.refs}}[what]
        budget = gpu_budget(cap.x.device, None)  # outside the step: it reads the memory free
        fn = lambda lw=lw, cap=cap, opts=opts, lm=lm, budget=budget: batch_step(  # noqa: E731
            lw, cap.x, cap.alpha, [n] * b, causal=lm.causal, chunk_rule="gpu", budget_bytes=budget, **opts)
        naive = None
        if name == "k21_ratios":
            naive = lambda lw=lw, cap=cap: [naive_k21(lw, cap.x[i], cap.alpha[i], maps=False, ratios=True)  # noqa: E731
                                            for i in range(b)]
        yield name, shape, lm, fn, naive
        del lm, lw, cap, fn, naive
        if dev == "cuda":
            torch.cuda.empty_cache()


def graphs(ctx: dict, size) -> dict:
    """The step: K21 ratios (BERT-base shape) and the causal FF decomposition (SmolLM2 shape), n x batch of
    ``size(ctx, "n")`` x ``size(ctx, "batch")``, float32, eager vs one CUDA graph (see the module docstring)."""
    import torch

    dev = ctx["device"]
    repeats = max(3, size(ctx, "repeats"))
    result = {"n": size(ctx, "n"), "batch": size(ctx, "batch"), "float32": True}
    with torch.no_grad():
        for name, shape, lm, fn, naive in _steps(ctx, size):
            result[name] = {"shape": shape, "causal": bool(lm.causal), **probe(torch, fn, dev, repeats, naive)}
    return result


# ------------------------------------------------------------------------------------------ torch.compile

BREAKS_SHOWN = 6
"""Graph-break reasons kept per step (the first ones, each cut to one line)."""


def traced(torch, fn) -> dict:
    """What TorchDynamo makes of ``fn`` (`torch._dynamo.explain`, no compiler run: cheap, also on the CPU):
    the graphs it captures, the breaks between them and where (file:line in the package) and why."""
    ex = torch._dynamo.explain(fn)()
    reasons = []
    for r in ex.break_reasons[:BREAKS_SHOWN]:
        frame = r.user_stack[-1] if r.user_stack else None
        where = f"{frame.filename.split('report_builder/')[-1]}:{frame.lineno}" if frame else "?"
        reasons.append(f"{where}: {' '.join(str(r.reason).split())[:160]}")
    torch._dynamo.reset()
    return {"graphs": ex.graph_count, "graph_breaks": ex.graph_break_count, "break_reasons": reasons}


def compiled(torch, fn, device: str, repeats: int) -> dict:
    """``fn`` eager vs ``torch.compile(fn)`` (inductor, default mode; on the CPU the ``eager`` backend, which
    checks the tracing only): the first call's seconds (the compile), median ms per call after it, the
    speedup, the graphs compiled in all (recompiles included) and the largest difference from the eager
    outputs, or why compiling failed."""
    sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else (lambda: None)  # noqa: E731
    expected = _tensors(fn())
    out = {"eager_ms": 1e3 * _median_s(fn, sync, repeats), **traced(torch, fn)}
    backend = "inductor" if device == "cuda" else "eager"
    from torch._dynamo.utils import counters

    counters.clear()
    try:
        c = torch.compile(fn, backend=backend)
        t0 = time.perf_counter()
        got = _tensors(c())
        sync()
        out.update(backend=backend, compile_s=time.perf_counter() - t0,
                   compiled_max_abs_diff=max(((a - b).abs().max().item() for a, b in zip(got, expected)), default=0.0),
                   compiled_same_outputs=len(got) == len(expected))
        out["compiled_ms"] = 1e3 * _median_s(c, sync, repeats)
        out["compiled_vs_eager"] = out["eager_ms"] / out["compiled_ms"]
        # graphs compiled over the first call and the timed ones: more than `graphs` means recompiles (a guard
        # failed between calls, e.g. on a budget read from the free memory inside the step)
        out["graphs_compiled"] = int(counters["stats"]["unique_graphs"])
    except Exception as e:  # noqa: BLE001 - why compiling failed is the finding
        out["compiled"] = f"compile failed: {type(e).__name__}: {' '.join(str(e).split())[:400]}"
    finally:
        torch._dynamo.reset()
    return out


def compile_probe(ctx: dict, size) -> dict:
    """The step ``compile``: the two steps of `graphs`, the BERT-base FF decomposition and the fast full layer
    (`STEPS`), eager vs `torch.compile` (`compiled`), with the graph breaks TorchDynamo finds in each (what stops
    one compiled graph per layer step)."""
    import torch

    repeats = max(3, size(ctx, "repeats"))
    result = {"n": size(ctx, "n"), "batch": size(ctx, "batch"), "float32": True}
    with torch.no_grad():
        for name, shape, lm, fn, _ in _steps(ctx, size, tuple(STEPS)):
            result[name] = {"shape": shape, "causal": bool(lm.causal), **compiled(torch, fn, ctx["device"], repeats)}
    return result
