"""Memory for the benchmark: sizes, the process's resident set, and the chunk budget a limit leaves.

Torch-free (the memory child and the parent both read it). Peak RSS comes from ``VmHWM`` in
``/proc/self/status``, which ``clear_refs`` resets; elsewhere from ``getrusage``. Pitfall: Linux
carries ``ru_maxrss`` over from the parent across fork + exec, so without ``VmHWM`` a subprocess's
peak is only an upper bound.
"""
from __future__ import annotations

import os
import sys

from report_builder.costs import layer_fixed_bytes

GIB = 1 << 30
MIB = 1 << 20


def parse_bytes(v: str | int | None) -> int | None:
    """A memory size -> bytes with the one size parser (`config.parse_size`: ``GB`` = 10⁹,
    ``GiB`` = 2³⁰); None stays None."""
    if v is None:
        return None
    from report_builder.config import parse_size
    from report_builder.errors import option

    return parse_size(v, key=option("max_memory"))


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
                 in_use: int | None = None, causal: bool = False) -> int:
    """Chunk budget (``budget_bytes`` of `decompose_layer`) so the process stays under ``max_memory``.

    What is left after the memory in use (model, captured tensors: the current RSS by default) and the
    layer's fixed tensors goes to the chunk loop, with a quarter kept back for GEMM temporaries and
    allocator slack; at least 16 MiB.
    """
    used = rss_now() if in_use is None else in_use
    free = max_memory - used - layer_fixed_bytes(n, d, d_ff, heads, gated, itemsize, causal)
    return max(16 * MIB, int(0.75 * free))


def batch_for_budget(budget_bytes: int, n: int, d: int, heads: int, n_layers: int, itemsize: int = 4,
                     cap: int = 64) -> int:
    """Sequences per forward batch so that the captured tensors fit ``budget_bytes``: per sequence the
    forward returns every layer's probabilities and the capture keeps x, alpha and 6 check tensors."""
    from report_builder.costs import sequence_capture_bytes

    per_seq = sequence_capture_bytes(n, d, heads, n_layers, itemsize)
    return max(1, min(cap, budget_bytes // max(per_seq, 1)))


def naive_bytes(n: int, d: int, d_ff: int, heads: int, itemsize: int) -> int:
    """Rough peak of `reference_layer` + maps: the (H, n, n, d) tensor and ~10 (n, n, d) and 3 (n, n, d')."""
    return itemsize * n * n * (heads * d + 10 * d + 3 * d_ff)
