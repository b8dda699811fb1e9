"""Tensors moved to the host in one go: the batched path's one transfer per batch.

`HostCopy` starts non-blocking copies of every tensor into one pinned buffer per dtype and records
one event per device; `HostCopy.wait` waits for those events only (not for the work queued after
them: the next batch's compute keeps running) and hands back host tensors, views of one ordinary
(pageable) copy per dtype, so a consumer that keeps them holds no page-locked memory.

Pitfall: a tensor handed to `HostCopy` must not be written until `wait` returned; the engine drops
its own references only then. On the CPU the same code runs with ordinary buffers (tested there).
"""
from __future__ import annotations

import torch
from torch import Tensor


class HostCopy:
    """Copies of ``tensors`` on the host, started now (see the module docstring)."""

    def __init__(self, tensors: list[Tensor]):
        self.n = len(tensors)
        self.places: list[tuple[torch.dtype, int, tuple[int, ...]]] = []
        sizes: dict[torch.dtype, int] = {}
        for t in tensors:
            off = sizes.get(t.dtype, 0)
            self.places.append((t.dtype, off, tuple(t.shape)))
            sizes[t.dtype] = off + t.numel()
        cuda = any(t.device.type == "cuda" for t in tensors)
        self.buffers = {dt: torch.empty(size, dtype=dt, pin_memory=cuda) for dt, size in sizes.items()}
        for t, (dt, off, shape) in zip(tensors, self.places):
            if t.numel():
                self.buffers[dt][off:off + t.numel()].view(shape).copy_(t, non_blocking=cuda)
        self.events = []
        if cuda:
            for dev in sorted({t.device for t in tensors if t.device.type == "cuda"}, key=str):
                ev = torch.cuda.Event()
                ev.record(torch.cuda.current_stream(dev))
                self.events.append(ev)
        self.pinned = cuda

    def wait(self) -> list[Tensor]:
        """The host tensors, in the order given (waits for the copies, and only for them)."""
        for ev in self.events:
            ev.synchronize()
        bufs = {dt: (b.clone() if self.pinned else b) for dt, b in self.buffers.items()}  # pageable copies
        self.buffers = {}
        return [bufs[dt][off:off + _numel(shape)].view(shape) for dt, off, shape in self.places]


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out
