"""The matmul rate an estimate divides by: a calibration matmul run on the spot on the chosen device,
or, for a GPU that is not here, a named GPU's datasheet peak or a rate given on the command line.

Pitfall: on a shared machine the calibration sees the load of that moment, and the estimate follows it.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from report_builder.errors import option


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


MODEL_ITEMSIZE = 4
"""Bytes per weight and activation number in every precision mode: a build loads its models in float32
(`models.loading.load_configured`) and a reduced mode (``dtype`` tf32, bfloat16, float16) changes only the
pair GEMMs' inputs, so the model's load time, its weights and the captured activations are float32 sizes."""


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
                "how": f"{option('gpu_flops', f'{gpu_flops:g}')} TFLOP/s (a matmul's rate, as given)", "memory_bytes": None}
    if gpu is not None:
        from report_builder.costs.measured import find

        g = _gpu(gpu)
        prec = precision_of(dtype)
        peak = g.tflops[prec]
        m = find(next(k for k, v in GPUS.items() if v is g), known=tuple(GPUS))
        if m is not None and m.rates.get(prec):
            rate = m.rates[prec]
            return {"flops_per_s": rate, "kind": "cuda", "source": "measured", "gpu": g.name, "precision": prec,
                    "peak_tflops": peak, "memory_bytes": g.memory_bytes, "measured": m.path,
                    "how": f"{g.name}: {prec} matmul {rate / 1e12:.1f} TFLOP/s, {m.label()}"}
        return {"flops_per_s": peak * 1e12 * ASSUMED_GPU_MATMUL_EFFICIENCY, "kind": "cuda", "source": "named",
                "gpu": g.name, "precision": prec, "peak_tflops": peak, "memory_bytes": g.memory_bytes,
                "how": f"{g.name}: {prec} dense peak {peak:g} TFLOP/s (datasheet) x assumed matmul efficiency "
                       f"{ASSUMED_GPU_MATMUL_EFFICIENCY:g} (estimate)"}
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            return {"flops_per_s": None, "kind": "cuda", "source": None, "memory_bytes": None,
                    "note": f"no CUDA device here, so no time estimate for {option('device', device)}: pass "
                            f"{option('gpu', '|'.join(GPUS))} (datasheet peak x {ASSUMED_GPU_MATMUL_EFFICIENCY:g}) or "
                            f"{option('gpu_flops', 'TFLOPS')} (a matmul's rate)"}
        cal = calibrate(device, dtype)
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        return {"flops_per_s": cal["flops_per_s"], "kind": "cuda", "source": "calibrated", "calibration": cal,
                "memory_bytes": int(total), "how": f"{cal['device']}: {cal['how']}"}
    cal = calibrate("cpu", dtype, threads=threads)
    return {"flops_per_s": cal["flops_per_s"], "kind": "cpu", "source": "calibrated", "calibration": cal,
            "memory_bytes": _available_bytes(), "how": f"CPU: {cal['how']}"}


def _gpu(name: str) -> GPU:
    from report_builder.errors import UsageError, shown

    for k, g in GPUS.items():
        if name.lower() == k.lower():
            return g
    raise UsageError(f"{option('gpu')}: unknown GPU {shown(name)}; known: {', '.join(GPUS)} (or give "
                     f"{option('gpu_flops', 'TFLOPS')})")


def _available_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover
        return None
