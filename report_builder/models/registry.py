"""Which adapter serves which model: the registry of architecture families.

This module imports the family plugins (``bert``, ``gpt2``, ``llama``) and indexes their
``ADAPTER`` by HF class name and by ``config.model_type``; the base module `models.adapter` imports
none of them, so there is no import cycle. Adding a family is one file defining ``ADAPTER`` and its
name in `FAMILIES`. Pitfall: two families must not claim the same class name or model type (checked
when the registry is built).
"""
from __future__ import annotations

import importlib

from torch import nn

from report_builder.errors import UnsupportedArchitecture, shown
from report_builder.models import refusals
from report_builder.models.adapter import Adapter, check_structure
from report_builder.schema import LAYOUTS, Layout


FAMILIES: tuple[str, ...] = ("bert", "distilbert", "gpt2", "llama", "granite", "opt", "neox", "phi", "gemma",
                             "phi3")
"""Family modules under `report_builder.models`, each defining ``ADAPTER``."""


def _build() -> tuple[tuple[Adapter, ...], dict[str, Adapter], dict[str, Adapter]]:
    adapters = tuple(importlib.import_module(f"report_builder.models.{f}").ADAPTER for f in FAMILIES)
    by_class: dict[str, Adapter] = {}
    by_type: dict[str, Adapter] = {}
    for a in adapters:
        for table, names in ((by_class, a.class_names), (by_type, a.model_types)):
            for name in names:
                if name in table:
                    raise RuntimeError(f"{name!r} is claimed by both {table[name].family} and {a.family}")
                table[name] = a
    return adapters, by_class, by_type


ADAPTERS, _BY_CLASS, _BY_TYPE = _build()
"""Every registered adapter, in `FAMILIES` order."""


def layout_families() -> dict[Layout, tuple[str, ...]]:
    """Layout -> the families that use it (any of their `Adapter.variants`), in `FAMILIES` order; every
    row of `schema.LAYOUTS`, a layout no family uses with none. The one answer to "which families
    have this layout": derived from the adapters, never written beside the layout."""
    return {lay: tuple(a.family for a in ADAPTERS if any(v.layout == lay for v in a.variants)) for lay in LAYOUTS}


def supported() -> list[str]:
    """Supported HF base-model class names."""
    return sorted(_BY_CLASS)


def supported_model_types() -> list[str]:
    return sorted(_BY_TYPE)


def for_model_type(model_type: str, config=None) -> Adapter:
    """The adapter for ``config.model_type`` (fails fast before any weights are loaded): a type no adapter
    serves is refused in one line, naming what is unsupported when the type or its ``config`` says
    (`refusals.reason`: an encoder-decoder, a mixture of experts, ...) and the supported model types."""
    if model_type in _BY_TYPE:
        return _BY_TYPE[model_type]
    types = f"supported model types: {', '.join(supported_model_types())}"
    why = refusals.reason(model_type, config, frozenset(_BY_TYPE))
    if why is not None:
        raise UnsupportedArchitecture(f"model type {shown(model_type)} is not supported: {why}; {types}")
    raise UnsupportedArchitecture(
        f"model type {shown(model_type)} has no adapter; {types} "
        f"(classes: {', '.join(supported())}). Adding a family is one file in report_builder/models/."
    )


def for_config(config) -> Adapter:
    """The adapter (its variant for this config) for a model config, before any weights are loaded."""
    return for_model_type(config.model_type, config).for_config(config)


def for_model(model: nn.Module) -> Adapter:
    """The adapter for an instantiated base model, by HF class name and config; a layer whose modules
    do not match the adapter's layout is refused by name (`adapter.check_structure`)."""
    name = type(model).__name__
    mt = getattr(getattr(model, "config", None), "model_type", None)
    if name not in _BY_CLASS and isinstance(mt, str) and mt not in _BY_TYPE:
        for_model_type(mt, model.config)  # raises, naming what differs where that is known
    adapter = for_class_name(name).for_config(model.config)
    check_structure(model, adapter)
    return adapter


def for_class_name(name: str) -> Adapter:
    """The adapter for an HF base-model class name (e.g. ``models.class_name`` of a cached result)."""
    if name not in _BY_CLASS:
        raise UnsupportedArchitecture(
            f"{name} has no adapter; supported: {', '.join(supported())}. "
            "Adding a family is one file in report_builder/models/."
        )
    return _BY_CLASS[name]
