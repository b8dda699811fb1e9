"""How many operations a call issues: torch ops on CPU (the proxy anyone can measure), CUDA kernels and the
GPU's busy time on CUDA, from `torch.profiler`.

On CPU a profiled call lists every aten op, nested ones included (``aten::matmul`` calls ``aten::mm``,
``aten::contiguous`` calls ``aten::clone`` then ``aten::copy_``). `count_ops` counts the *leaves* that do
work: an op with no aten op below it, not one of `NO_KERNEL` (views, reshapes, allocations: metadata only,
no kernel on a GPU). That is the number of kernels the same code launches on a GPU, up to the few ops
whose CUDA implementation launches two. On CUDA the profiler's kernel events are counted directly.

Pitfall: the profiler itself costs time; never time a profiled call (`bench.run` profiles apart from its
timed repeats).
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable

NO_KERNEL = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::as_strided", "aten::transpose", "aten::t",
    "aten::permute", "aten::expand", "aten::expand_as", "aten::slice", "aten::select", "aten::narrow",
    "aten::unsqueeze", "aten::squeeze", "aten::diagonal", "aten::alias", "aten::detach", "aten::detach_",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::resize_", "aten::split", "aten::unbind",
    "aten::chunk", "aten::movedim", "aten::view_as", "aten::unflatten", "aten::flatten", "aten::lift_fresh",
    "aten::resolve_conj", "aten::resolve_neg", "aten::_reshape_alias", "aten::split_with_sizes",
    "aten::set_", "aten::is_nonzero", "aten::result_type", "aten::item", "aten::_local_scalar_dense",
    "aten::contiguous", "aten::to", "aten::_to_copy", "aten::broadcast_tensors",
    "aten::_has_compatible_shallow_copy_type",
})
"""Aten ops that launch no kernel themselves (their children, if any, are counted instead)."""


def count_ops(fn: Callable[[], object], device: str = "cpu") -> dict:
    """Profile one call of ``fn`` and count what it issued.

    Returns:
        ``{"ops": N, "by_name": {op: count}}`` on CPU (leaf aten ops that launch work, see module doc);
        on CUDA also ``kernels`` (CUDA kernel launches, memcpy/memset included) and ``gpu_busy_ms``
        (the kernels' summed device time).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    prof = profile(activities=acts)
    with _quiet_stderr():  # some torch builds log a line to stderr as the profiler starts and stops
        prof.start()
    try:
        fn()
        if cuda:
            torch.cuda.synchronize()
    finally:
        with _quiet_stderr():
            prof.stop()
    events = prof.events()
    by_name: dict[str, int] = {}
    kernels = 0
    busy_us = 0.0
    for ev in events:
        if cuda and getattr(ev, "device_type", None) is not None and ev.device_type.name == "CUDA":
            kernels += 1
            busy_us += float(ev.time_range.elapsed_us())  # a kernel's (or copy's) own duration on the device
            continue
        name = ev.name
        if not name.startswith("aten::") or name in NO_KERNEL:
            continue
        if any(c.name.startswith("aten::") and c.name not in NO_KERNEL or _has_work(c) for c in ev.cpu_children):
            continue  # not a leaf: its children are counted
        by_name[name] = by_name.get(name, 0) + 1
    out = {"ops": sum(by_name.values()), "by_name": dict(sorted(by_name.items(), key=lambda kv: -kv[1]))}
    if cuda:
        out.update(kernels=kernels, gpu_busy_ms=busy_us / 1e3)
    return out


def _has_work(ev) -> bool:
    """Whether an op in `NO_KERNEL` (``aten::contiguous``, ``aten::to``) did work below it (a copy)."""
    return any(c.name.startswith("aten::") and (c.name not in NO_KERNEL or _has_work(c)) for c in ev.cpu_children)


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 to /dev/null for the block (the profiler's start/stop lines come from C++)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # pragma: no cover - no real stderr
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
