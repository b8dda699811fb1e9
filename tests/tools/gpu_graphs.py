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
    """Every tensor of ``decompose_batch``'s results, in a fixed order."""
    flat = []
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


def graphs(ctx: dict, size) -> dict:
    """The step: K21 ratios (BERT-base shape) and the causal FF decomposition (SmolLM2 shape), n x batch of
    ``size(ctx, "n")`` x ``size(ctx, "batch")``, float32, eager vs one CUDA graph (see the module docstring)."""
    import torch

    from report_builder.bench.naive import naive_k21
    from report_builder.bench.shapes import build, capture_layers, random_inputs
    from report_builder.decompose.layouts import decompose_batch

    dev, n, b = ctx["device"], size(ctx, "n"), size(ctx, "batch")
    repeats = max(3, size(ctx, "repeats"))
    result = {"n": n, "batch": b, "float32": True}
    with torch.no_grad():
        for name, shape, kw in (("k21_ratios", size(ctx, "base"), {"ratios": True}),
                                ("causal_ff", size(ctx, "causal"), None)):
            lm = build(shape, None, dev, "float32")
            lw = lm.layer_weights(0)
            cap = capture_layers(lm, random_inputs(lm, n, b), [0])[0]
            opts = kw if kw is not None else {"maps": (lw.layout.ff_after,)}
            fn = lambda lw=lw, cap=cap, opts=opts, lm=lm: decompose_batch(  # noqa: E731
                lw, cap.x, cap.alpha, [n] * b, causal=lm.causal, **opts)
            naive = None
            if name == "k21_ratios":
                naive = lambda lw=lw, cap=cap: [naive_k21(lw, cap.x[i], cap.alpha[i], maps=False, ratios=True)  # noqa: E731
                                                for i in range(b)]
            result[name] = {"shape": shape, "causal": bool(lm.causal), **probe(torch, fn, dev, repeats, naive)}
            del lm, lw, cap
            if dev == "cuda":
                torch.cuda.empty_cache()
    return result
