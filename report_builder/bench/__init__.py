"""The user-facing benchmark (`report-builder bench`): the engine against the HF forward pass and the
naive K21 code (`run`, `report`), a timed K24 pass (`k24_pass`, `host_stats`), a timed K21 pass and
its host statistics (`k21_pass`), and their helpers:
the benchmarked shapes (`shapes`), memory (`memory`, the peak-memory child `memory_child`), timing
(`timing`) and the naive baseline (`naive`).

`run_bench`, `format_bench`, `run_k24_pass`, `format_k24_pass`, `run_k21_pass` and `format_k21_pass` load
their modules on first access.
Pitfall: importing this package must import nothing else: the memory child
(``python -m report_builder.bench.memory_child``) counts every module in its peak.
"""
from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "run_bench": "report_builder.bench.run",
    "format_bench": "report_builder.bench.report",
    "run_k24_pass": "report_builder.bench.k24_pass",
    "format_k24_pass": "report_builder.bench.k24_pass",
    "run_k21_pass": "report_builder.bench.k21_pass",
    "format_k21_pass": "report_builder.bench.k21_pass",
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'report_builder.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
