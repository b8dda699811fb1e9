"""How the benchmark times: one call with the device synchronised on both sides, and what the run
records about the machine (the CPU's name, whether TF32 matmuls are on).

Pitfall: CUDA kernels run asynchronously; without the synchronisation a call is timed as the time to
queue its kernels.
"""
from __future__ import annotations

import os
import platform
import time
from typing import Callable

import torch


def sync(device: str) -> None:
    """Wait for every queued kernel of ``device`` (a no-op on CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_call(fn: Callable[[], object], device: str) -> float:
    """Seconds ``fn()`` takes, the device synchronised before and after."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def tf32_on(device: str) -> bool:
    """Whether CUDA matmuls run in TF32 for ``device``."""
    return bool(device.startswith("cuda") and torch.backends.cuda.matmul.allow_tf32)


def cpu_name() -> str:
    """The CPU's model name and logical CPU count (``/proc/cpuinfo``), else the platform's name."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} logical CPUs)"
    except OSError:
        pass
    return platform.processor() or "unknown"


def pass_heading(kind: str, r: dict, shape_name: str) -> str:
    """The opening of a timed pass's line (``K21 pass: …``/``K24 pass: …``): sequences, model, layers,
    device and dtype, batch or CPU workers, the wall time and the rates (``shape_name``: the shape's
    description when the model is random)."""
    what = r["model"] or f"{shape_name} (random weights)"
    return (f"{kind} pass: {r['n_seqs']} sequences x {r['seq_len']} tokens, {what}, {r['layers_total']} layers, "
            f"{r['device']} {r['dtype']}{' (TF32 matmuls)' if r['tf32'] else ''}, "
            + (f"batch {r['batch']}" if r["workers"] is None else f"{r['workers']} CPU workers")
            + f": {r['seconds']:.1f} s = {r['seqs_per_s']:.1f} sequences/s, {r['tokens_per_s']:.0f} tokens/s")
