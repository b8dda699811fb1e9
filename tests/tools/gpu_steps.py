"""The steps of the GPU check (`tests/tools/gpu_check.py`), each a function of the run's context that
returns a JSON-able dict: run in a worker process, one after another, on CUDA (the real sizes) or on
the CPU (``dry``: tiny sizes, the same code).

Everything here needs only python3 with torch, transformers, pandas, pyarrow, jinja2, pyyaml, filelock,
psutil, accelerate and safetensors, and ``PYTHONPATH`` at the repository root: no wheel of an embedded
model (random-weight stand-ins are made from `models.embedded.EMBEDDED`'s configs by
`bench.shapes.save_stand_in`), no network, no pytest.

Pitfall: a step reports progress through ``ctx["progress"]`` (a callable the worker sets) so a step the
parent stops for its time budget still leaves a rate behind.
"""
from __future__ import annotations

import contextlib
import io
import json
import platform
import statistics
import time
from pathlib import Path

# the sizes: (GPU, dry run)
SIZES = {
    "encoder": ("minilm", "tiny"), "decoder": ("smollm2", "tiny-llama"), "base": ("base", "tiny"),
    "causal": ("smollm2", "tiny-llama"), "n": (128, 16), "n_long": (512, 32), "n_4096": (4096, 64),
    "batch": (8, 2), "batch_long": (2, 1), "positions": (4096, 512), "k24_seqs": (992, 6), "k24_len": (128, 12),
    "k21_seqs": (992, 6), "k21_len": (86, 10), "repeats": (3, 1), "repeats_short": (2, 1),
}


def size(ctx: dict, key: str):
    return SIZES[key][1 if ctx["dry"] else 0]


def _torch():
    import torch

    return torch


def env(ctx: dict) -> dict:
    """The machine and the libraries."""
    torch = _torch()
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
           "cuda": torch.version.cuda, "device": ctx["device"], "cuda_available": torch.cuda.is_available()}
    if ctx["device"] == "cuda":
        p = torch.cuda.get_device_properties(0)
        out.update(gpu=torch.cuda.get_device_name(0), gpu_memory_bytes=int(p.total_memory),
                   gpu_count=torch.cuda.device_count())
    return out


def stand_ins(ctx: dict) -> dict:
    """Random-weight stand-ins of the embedded models (their configs, positions for n = 4096) as model folders."""
    from report_builder.bench.shapes import save_stand_in

    out = {}
    for role in ("encoder", "decoder"):
        shape = size(ctx, role)
        t0 = time.perf_counter()
        path = save_stand_in(shape, Path(ctx["tmp"]) / shape, positions=size(ctx, "positions"))
        out[role] = {"shape": shape, "path": str(path), "seconds": time.perf_counter() - t0}
    return out


def _cli(args: list[str]) -> tuple[int, str]:
    """``report-builder ARGS`` in this process: (exit code, stdout)."""
    from report_builder import cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.main(args)
    return code, buf.getvalue()


def _check(ctx: dict, role: str) -> dict:
    path = ctx["results"]["stand_ins"][role]["path"]
    code, out = _cli(["check", "--model", path, "--device", ctx["device"], "--json"])
    r = json.loads(out)
    per_scope: dict[str, float] = {}
    for row in r["rows"]:
        per_scope[row["scope"]] = max(per_scope.get(row["scope"], 0.0), row["max_rel_error"])
    return {"exit_code": code, "max_rel_error": r["max_rel_error"], "bound": r["bound"], "ok": r["ok"],
            "per_scope": per_scope, "layers": max(row["layer"] for row in r["rows"])}


def check_encoder(ctx: dict) -> dict:
    """`report-builder check` of the MiniLM stand-in: every scope's reconstruction error."""
    return _check(ctx, "encoder")


def check_decoder(ctx: dict) -> dict:
    """`report-builder check` of the SmolLM2 stand-in."""
    return _check(ctx, "decoder")


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _count(events, device: str) -> dict:
    """Kernels (CUDA) or top-level torch ops (CPU), device busy time and host synchronisations in a profile."""
    from torch.autograd import DeviceType

    syncs = sum(1 for e in events if e.name in ("cudaStreamSynchronize", "cudaDeviceSynchronize",
                                                "cudaEventSynchronize", "cudaMemcpy"))
    if device == "cuda":
        dev = [e for e in events if e.device_type == DeviceType.CUDA]
        copies = [e for e in dev if "memcpy" in e.name.lower() or "memset" in e.name.lower()]
        busy = sum(e.time_range.elapsed_us() for e in dev) / 1e3
        return {"kernels": len(dev) - len(copies), "copies": len(copies), "busy_ms": busy, "host_syncs": syncs}
    ops = [e for e in events if e.device_type == DeviceType.CPU and e.cpu_parent is None and e.name.startswith("aten::")]
    return {"kernels": len(ops), "copies": 0, "busy_ms": None, "host_syncs": syncs,
            "what": "top-level torch ops on the CPU (a proxy for kernels)"}


def _torch_ops(fn) -> int:
    """Torch operators ``fn()`` dispatches (views included): the profiler-free count of its work items."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def profile(ctx: dict) -> dict:
    """Kernels per layer of the FF decomposition of a batch (`decompose_batch` with the FF scope's map),
    BERT-base shape n = 128 x 8, and of the engine's K24 layer step (decomposition + errors + device
    statistics), with the GPU's busy time and the host synchronisations (torch.profiler)."""
    torch = _torch()
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof_

    from report_builder.analyses.k24_device import DeviceStats
    from report_builder.bench.k24_pass import synthetic_encoded
    from report_builder.bench.shapes import build, capture_layers, random_inputs
    from report_builder.decompose.layouts import decompose_batch
    from report_builder.engine import Tokens, reduce_sequences

    dev = ctx["device"]
    n, b = size(ctx, "n"), size(ctx, "batch")
    lm = build(size(ctx, "base"), None, dev, "float32")
    lw = lm.layer_weights(0)
    with torch.no_grad():
        cap = capture_layers(lm, random_inputs(lm, n, b), [0])[0]
        ff = lambda: decompose_batch(lw, cap.x, cap.alpha, [n] * b, maps=(lw.layout.ff_after,))  # noqa: E731
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
        for _ in range(2):
            ff()
        _sync(torch, dev)
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            ff()
            _sync(torch, dev)
            walls.append(time.perf_counter() - t0)
        out = {"shape": size(ctx, "base"), "n": n, "batch": b,
               "ff": {"wall_ms": 1e3 * statistics.median(walls), "torch_ops": _torch_ops(ff)}}
        try:
            with prof_(activities=acts) as p:
                ff()
                _sync(torch, dev)
            out["ff"].update(_count(p.events(), dev))
        except Exception as e:  # noqa: BLE001 - the profiler-free count above stands
            out["ff"]["profiler_error"] = f"{type(e).__name__}: {e}"
        enc = synthetic_encoded(lm, b, n)
        seqs = [Tokens(e.input_ids, e.token_type_ids) for e in enc]
        lay = lm.adapter.layout
        st = DeviceStats(lay, lm.causal, enc, top_k=20, include_special=True, n_layers=lm.n_layers)
        run = lambda: [st.add(o) for o in reduce_sequences(lm, seqs, st.reduce, layers=[0, 1], maps=lay.scopes,  # noqa: E731
                                                            extras=True, batch_size=b)]
        run()
        _sync(torch, dev)
        out["engine_k24_two_layers"] = {"what": "reduce_sequences over one batch, layers 1-2: forward, "
                                                "decomposition of every scope, errors, device statistics, the "
                                                "one transfer (host_syncs: the batch's waits)"}
        try:
            with prof_(activities=acts) as p:
                run()
                _sync(torch, dev)
            out["engine_k24_two_layers"].update(_count(p.events(), dev))
        except Exception as e:  # noqa: BLE001
            out["engine_k24_two_layers"]["profiler_error"] = f"{type(e).__name__}: {e}"
    return out


def _bench(ctx: dict, **kw) -> dict:
    """`report-builder bench --json` in this process (`api.bench`, serialised as the command prints it)."""
    import inspect

    from report_builder import api
    from report_builder.bench import run as bench_run

    kw = {"device": ctx["device"], **kw}
    if ctx["dry"] and "memory" in inspect.signature(bench_run.run_bench).parameters:
        kw["memory"] = False  # no peak-RSS subprocesses in the dry run
    return json.loads(json.dumps(api.bench(**kw), default=str))


def bench_base(ctx):
    """BERT-base shape, n = 128, batch 8, float32."""
    return _bench(ctx, shape=size(ctx, "base"), seq_len=size(ctx, "n"), batch=size(ctx, "batch"),
                  repeats=size(ctx, "repeats"))


def bench_base_long(ctx):
    """BERT-base shape, n = 512, batch 2, float32."""
    return _bench(ctx, shape=size(ctx, "base"), seq_len=size(ctx, "n_long"), batch=size(ctx, "batch_long"),
                  repeats=size(ctx, "repeats"))


def bench_causal(ctx):
    """SmolLM2 shape, n = 128, batch 8, float32."""
    return _bench(ctx, shape=size(ctx, "causal"), seq_len=size(ctx, "n"), batch=size(ctx, "batch"),
                  repeats=size(ctx, "repeats"))


def bench_causal_4096(ctx):
    """SmolLM2 shape, n = 4096, one layer, float32 (no naive baselines)."""
    return _bench(ctx, shape=size(ctx, "causal"), seq_len=size(ctx, "n_4096"), batch=1, layers=1, naive=False,
                  repeats=1)


def bench_tf32(ctx):
    """BERT-base shape, n = 128, batch 8, TF32 matmuls."""
    return _bench(ctx, shape=size(ctx, "base"), seq_len=size(ctx, "n"), batch=size(ctx, "batch"), dtype="tf32",
                  repeats=size(ctx, "repeats_short"), naive=False)


def bench_bf16(ctx):
    """BERT-base shape, n = 128, batch 8, bfloat16."""
    return _bench(ctx, shape=size(ctx, "base"), seq_len=size(ctx, "n"), batch=size(ctx, "batch"), dtype="bfloat16",
                  repeats=size(ctx, "repeats_short"), naive=False)


def bench_max_memory(ctx):
    """BERT-base shape, n = 128, batch 8, float32, --max-memory 32GiB (vs the default run: does the chunk
    rule follow the budget?)."""
    return _bench(ctx, shape=size(ctx, "base"), seq_len=size(ctx, "n"), batch=size(ctx, "batch"),
                  max_memory="32GiB", repeats=size(ctx, "repeats_short"), naive=False)


def _pass(ctx: dict, kind: str, **kw) -> dict:
    from report_builder.bench import run_k21_pass, run_k24_pass

    run = run_k24_pass if kind == "k24" else run_k21_pass
    n_seqs, seq_len = size(ctx, f"{kind}_seqs"), size(ctx, f"{kind}_len")
    progress = ctx.get("progress") or (lambda **_: None)
    r = run(shape=size(ctx, "base"), n_seqs=n_seqs, seq_len=seq_len, device=ctx["device"],
            on_batch=lambda done, secs: progress(sequences=done, of=n_seqs, seconds=secs), **kw)
    return json.loads(json.dumps(r, default=str))


def k24_pass(ctx):
    """The K24 pass at paper size: 992 x 128, BERT-base shape, float32, its statistics included."""
    return _pass(ctx, "k24")


def k24_pass_tf32(ctx):
    """The same pass with TF32 matmuls."""
    return _pass(ctx, "k24", dtype="tf32")


def k21_pass(ctx):
    """The K21 pass at paper size: 992 x 86, BERT-base shape, float32."""
    return _pass(ctx, "k21")


def device_map(ctx: dict) -> dict:
    """A tiny Llama stand-in spread over the GPUs (two when there are), CPU memory and disk (on the CPU:
    CPU memory and disk): every result that of the single-device load within 1e-5 (the device-map test
    of tests/models/test_device_map.py, without pytest)."""
    torch = _torch()
    from report_builder.bench.shapes import save_stand_in
    from report_builder.engine import Tokens, decompose_sequences
    from report_builder.models import loading, placement

    path = save_stand_in("tiny-llama", Path(ctx["tmp"]) / "device-map", layers=4)
    dev = ctx["device"]
    if dev == "cuda":
        second = 1 if torch.cuda.device_count() > 1 else 0
        dmap = {"embed_tokens": 0, "rotary_emb": 0, "layers.0": 0, "layers.1": "cpu", "layers.2": second,
                "layers.3": "disk", "norm": second}
    else:
        dmap = {"embed_tokens": "cpu", "rotary_emb": "cpu", "layers.0": "cpu", "layers.1": "disk", "layers.2": "cpu",
                "layers.3": "disk", "norm": "disk"}
    one = loading.load(str(path), name="one", device=dev)
    spread = loading.load(str(path), name="spread", device=dev, device_map=dmap)
    seqs = [Tokens([1, 17, 230, 45, 9, 2]), Tokens([1, 301, 77, 2]), Tokens([1, 5, 6, 7, 8, 9, 10, 11, 2])]
    scopes = one.adapter.layout.scopes

    def results(lm):
        return {(k, l): r for k, l, r in decompose_sequences(lm, seqs, maps=scopes, ratios=True, extras=True)}

    with torch.no_grad():
        a, b = results(one), results(spread)
    worst, err = 0.0, 0.0
    assert a.keys() == b.keys()
    for key in a:
        for part in ("maps", "ratios", "sums", "extras"):
            for name, t in getattr(a[key], part).items():
                u = getattr(b[key], part)[name]
                worst = max(worst, float((u.float() - t.float()).abs().nan_to_num().max()))
        err = max(err, max(b[key].errors.values()))
    ok = worst <= 1e-5 and err <= 1e-4 and placement.dispatched(spread.model)
    return {"map": {k: str(v) for k, v in dmap.items()}, "layer_devices": list(spread.placement.layer_devices),
            "offloaded": list(spread.placement.offloaded), "max_abs_diff": worst, "max_rel_error": err, "ok": ok}


def graphs(ctx: dict) -> dict:
    """K21 ratios and the causal FF decomposition, eager vs replayed from one CUDA graph (`gpu_graphs`)."""
    from tests.tools.gpu_graphs import graphs as probe

    return probe(ctx, size)


def compile_step(ctx: dict) -> dict:
    """K21 ratios, the causal and the BERT-base FF decomposition and the fast full layer (with its check), eager
    vs `torch.compile`, and their graph breaks (`gpu_graphs.compile_probe`)."""
    from tests.tools.gpu_graphs import compile_probe

    return compile_probe(ctx, size)


STEPS = {
    "env": (env, 5, 15), "stand_ins": (stand_ins, 10, 30), "check_encoder": (check_encoder, 10, 30),
    "check_decoder": (check_decoder, 15, 40), "profile": (profile, 10, 30), "bench_base": (bench_base, 15, 40),
    "graphs": (graphs, 10, 40),
    "k24_pass": (k24_pass, 30, 90), "k21_pass": (k21_pass, 10, 40), "bench_base_long": (bench_base_long, 15, 45),
    "bench_causal": (bench_causal, 15, 40), "bench_causal_4096": (bench_causal_4096, 15, 45),
    "bench_bf16": (bench_bf16, 10, 30), "bench_tf32": (bench_tf32, 10, 30), "bench_max_memory": (bench_max_memory, 10, 30),
    "k24_pass_tf32": (k24_pass_tf32, 15, 60), "device_map": (device_map, 5, 20),
    "compile": (compile_step, 10, 240),
}
"""Step name -> (function, the seconds it is always left, the most it may take), in run order (the most
telling first: a step gets what earlier ones left, and never less than its minimum)."""
ON_REQUEST = frozenset({"compile"})
"""Steps a run on a GPU takes only when ``--steps`` names them (inductor's compile alone can take minutes,
more than the check's budget leaves); the dry run takes every step."""
