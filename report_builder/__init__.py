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
    dtype: str | None = None,
    max_length: int | None = None,
    ig: str = "closed",
    ig_steps: int = 64,
    enforce: bool = True,
    batch_size: int = 8,
    max_memory: str = "1GiB",
    progress: bool = True,
) -> Decomposition:  # noqa: F821 - `notebook.Decomposition` (an annotation, never evaluated)
    """Decompose every layer of a model, exactly, for your texts.

    Each scope's output is written as ``z_i = sum_j z_{i<-j} + z_{i<-bias}`` (the report's Methods page) and checked
    against the tensors the unmodified Hugging Face model computes. Layers count from 1 (as on the
    site, in its ``data.csv`` and in the papers); mixing ratios are in percent; maps are shown
    row-normalised unless ``normalise=None`` (see [`Decomposition`][report_builder.notebook.Decomposition]).

    Args:
        model: An embedded name (``"minilm"``, ``"smollm2"``), a local directory, a hub id, a
            [`load_model`][report_builder.notebook.load_model] result, or a ``(transformers model, tokenizer)`` pair
            (run in eval mode; each of its modules gets its own train/eval mode back afterwards).
        texts: One text, a ``(text_a, text_b)`` pair, or a list of texts and pairs.
        layers: Layers to decompose, counted from 1 (``[1]`` is the first layer; default: all).
        scopes: K24 scopes whose maps to keep: ``"all"`` (the layout's scopes), a list, or ``None``.
            Scopes after the attention block need the feed-forward decomposition (the costly part).
        methods: K21 methods whose maps to keep (``"all"``, a list or ``None``); their ratios are
            always computed.
        device: ``cpu`` or ``cuda`` (for a source string).
        dtype: The pair GEMMs' precision mode, as the config's ``dtype`` and ``--dtype``: ``float32``
            (errors enforced at 1e-4), or on a GPU ``tf32``, ``bfloat16`` or ``float16`` (each enforced at
            its own bound, ``schema.PRECISIONS``); the model stays float32. Default: the loaded model's
            mode (`load_model`), else float32.
        max_length: Cut each text to this many tokens, 1 to the model's positions (default: all of
            them; a warning names the texts that were cut).
        ig: Feed-forward attribution: ``"closed"`` (exact closed-form IG) or ``"numerical"``.
        ig_steps: Steps of the numerical IG.
        enforce: Raise ``ReconstructionError`` when a float32 error exceeds the bound.
        batch_size: Sequences per forward pass.
        max_memory: Budget of the chunked FF step, e.g. ``"1GiB"``.
        progress: Show a progress bar over sequences x layers (``tqdm.auto``: a widget in Jupyter;
            it appears only when the work takes more than a moment). ``False`` turns it off.

    Returns:
        A [`Decomposition`][report_builder.notebook.Decomposition] (tensors on the CPU).

    Raises:
        ValueError: Unknown scope or method; a layer outside ``1..n_layers``; an empty list of texts, or
            an item neither a text nor a pair; ``max_length`` outside ``1..`` the model's positions; an
            unknown ``ig``, or ``ig_steps`` below 1; an unknown precision mode, or a reduced one on a CPU.
        MemoryError: The maps to keep would not fit in the memory available (said before any work).
    """
    # `report_builder.notebook.decompose` itself (same signature and docstring, both checked by a test);
    # the notebook package, and torch, load on the first call, as `__getattr__` does for the other names
    _decompose = importlib.import_module("report_builder.notebook").decompose

    return _decompose(model, texts, layers=layers, scopes=scopes, methods=methods, device=device, dtype=dtype,
                      max_length=max_length, ig=ig, ig_steps=ig_steps, enforce=enforce, batch_size=batch_size,
                      max_memory=max_memory, progress=progress)


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
