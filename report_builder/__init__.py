"""report_builder: exact token-to-token decomposition of Transformer layers, rendered as a report.

The flow runs one way: config -> models + eval sets -> decompose (torch) -> analyses (tidy tables,
cached) -> figures (Altair specs) -> pages (Jinja -> Markdown) -> mkdocs build -> site/.

The notebook API (``report_builder.notebook``) is available from the top level:
:func:`decompose`, :func:`load_model`, :func:`load_results`, :func:`build` and :func:`render`.
Pitfall: importing ``report_builder`` must stay light (no torch, pandas or altair): the names are
resolved lazily on first access by ``__getattr__``.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    # the `decompose` subpackage is callable (see its docstring): one name, whichever is imported first
    "decompose": None,
    "load_model": "report_builder.notebook",
    "load_results": "report_builder.notebook",
    "build": "report_builder.notebook",
    "render": "report_builder.notebook",
    "Decomposition": "report_builder.notebook",
    "SequenceResult": "report_builder.notebook",
}

# The public surface. `schema` and `errors` stay import-light (no pandas, no torch) for the render
# side and for tools; `api` is the library facade the CLI uses; the notebook names load lazily.
__all__ = ["__version__", "api", "errors", "schema", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in ("api", "errors", "schema"):
        return importlib.import_module(f"report_builder.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'report_builder' has no attribute {name!r}")
    if name == "decompose":
        value = importlib.import_module("report_builder.decompose")
    else:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
