"""report_builder: exact token-to-token decomposition of Transformer layers, rendered as a report.

The flow runs one way: config -> models + eval sets -> decompose (torch) -> analyses (tidy tables,
cached) -> figures (Altair specs) -> pages (Jinja -> Markdown) -> mkdocs build -> site/.

The notebook API is available from the top level: :func:`decompose`, :func:`load_model` and
:func:`load_results` (``report_builder.notebook``), :func:`build` and :func:`render` (``report_builder.api``).
Pitfall: importing ``report_builder`` must stay light (no torch, pandas or altair): the names are
resolved lazily on first access by ``__getattr__``; ``decompose`` is a function defined here that
imports the notebook module when called.
"""
from __future__ import annotations

import importlib
from typing import Any, Iterable

__version__ = "0.1.0"

_LAZY = {
    "load_model": "report_builder.notebook",
    "load_results": "report_builder.notebook",
    "build": "report_builder.api",
    "render": "report_builder.api",
    "Decomposition": "report_builder.notebook",
    "SequenceResult": "report_builder.notebook",
}

# The public surface. `schema` and `errors` stay import-light (no pandas, no torch) for the render
# side and for tools; `api` is the library facade the CLI uses; the notebook names load lazily.
__all__ = ["__version__", "api", "errors", "schema", "decompose", *_LAZY]

# Python binds a subpackage as an attribute of its parent when the subpackage is first imported, which
# would replace the function below by the `decompose/` package (the mathematics) at the first
# `import report_builder.decompose.<module>`. Importing that package here, before the function is
# defined, binds it now; later imports find it in `sys.modules` and leave the function in place.
importlib.import_module("report_builder.decompose")  # the package's __init__ imports nothing


def decompose(
    model: Any,
    texts: str | tuple[str, str] | Iterable[str | tuple[str, str]],
    *,
    layers: Iterable[int] | None = None,
    scopes: str | Iterable[str] | None = "all",
    methods: str | Iterable[str] | None = "all",
    device: str = "cpu",
    dtype: str = "float32",
    max_length: int | None = None,
    ig: str = "closed",
    ig_steps: int = 64,
    enforce: bool = True,
    batch_size: int = 8,
    max_memory: str = "1GiB",
) -> Decomposition:  # noqa: F821 - `notebook.Decomposition` (an annotation, never evaluated)
    """Decompose every layer of a model, exactly, for a few texts: `report_builder.notebook.decompose`
    (same signature, checked by a test; the notebook module, and torch, load on the first call)."""
    _decompose = importlib.import_module("report_builder.notebook").decompose  # lazily, as `__getattr__`

    return _decompose(model, texts, layers=layers, scopes=scopes, methods=methods, device=device, dtype=dtype,
                      max_length=max_length, ig=ig, ig_steps=ig_steps, enforce=enforce, batch_size=batch_size,
                      max_memory=max_memory)


def __getattr__(name: str) -> Any:
    if name in ("api", "errors", "schema"):
        return importlib.import_module(f"report_builder.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'report_builder' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
