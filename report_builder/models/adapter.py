"""Architecture adapters: where each family keeps its weights and which tensors to check, as data.

An adapter names the layer list, the attention module (which returns the probabilities), the value
and output projections, the norms and FF weights, and the module points whose tensors the
decomposition must reproduce. The mathematics in `decompose/` is shared by all families.

Pitfall: all weights are returned in row-vector convention (``y = x @ W + b``): ``nn.Linear``
stores ``W.T``, GPT-2's ``Conv1D`` stores ``W``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from report_builder.decompose.layer import LayerWeights
from report_builder.models.errors import UnsupportedArchitecture


@dataclass(frozen=True)
class Probe:
    """A point inside a layer whose tensor the HF model computes: ``module`` path and ``"in"``/``"out"``."""

    module: str
    where: str  # "in" (first positional input) or "out" (output, first element if a tuple)


@dataclass(frozen=True)
class Adapter:
    """Facts about one architecture family.

    Attributes:
        family: short name ("bert", "gpt2", "llama").
        class_names: HF base-model classes served (e.g. ``BertModel``).
        model_types: ``config.model_type`` values served (checked before weights are loaded).
        ln_position: ``"post"`` or ``"pre"``.
        layers: base model -> list of layer modules.
        attention: path of the module whose forward returns ``(output, attn_probs)`` inside a layer.
        weights: (base model, layer index) -> `LayerWeights`.
        probes: check point name -> `Probe` inside a layer (``""`` = the layer itself).
        facts: config -> dict of architecture facts (norm, activation, gated, sizes).
        max_positions: config -> the longest sequence the model accepts.
    """

    family: str
    class_names: tuple[str, ...]
    model_types: tuple[str, ...]
    ln_position: str
    layers: Callable[[nn.Module], list[nn.Module]]
    attention: str
    weights: Callable[[nn.Module, int], LayerWeights]
    probes: dict[str, Probe]
    facts: Callable[[object], dict]
    max_positions: Callable[[object], int]


_ADAPTERS: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    for name in adapter.class_names:
        _ADAPTERS[name] = adapter
    return adapter


def _load_all() -> None:
    from report_builder.models import bert, gpt2, llama  # noqa: F401


def supported() -> list[str]:
    """Supported HF base-model class names."""
    _load_all()
    return sorted(_ADAPTERS)


def supported_model_types() -> list[str]:
    _load_all()
    return sorted({t for a in _ADAPTERS.values() for t in a.model_types})


def for_model_type(model_type: str) -> Adapter:
    """The adapter for ``config.model_type`` (fails fast before any weights are loaded)."""
    _load_all()
    for a in _ADAPTERS.values():
        if model_type in a.model_types:
            return a
    raise UnsupportedArchitecture(
        f"model type {model_type!r} has no adapter; supported model types: {', '.join(supported_model_types())} "
        f"(classes: {', '.join(supported())}). Adding a family is one file in report_builder/models/."
    )


def for_model(model: nn.Module) -> Adapter:
    """The adapter for an instantiated base model, by HF class name."""
    _load_all()
    name = type(model).__name__
    if name not in _ADAPTERS:
        raise UnsupportedArchitecture(
            f"{name} has no adapter; supported: {', '.join(supported())}. "
            "Adding a family is one file in report_builder/models/."
        )
    return _ADAPTERS[name]


def get_module(root: nn.Module, path: str) -> nn.Module:
    """``root.a.b.0.c`` by dotted path (``""`` returns root)."""
    m = root
    for part in filter(None, path.split(".")):
        m = m[int(part)] if part.isdigit() else getattr(m, part)
    return m


def linear_w(m: nn.Module):
    """Row-vector weight of an nn.Linear: (in, out)."""
    return m.weight.detach().T


def bias_of(m: nn.Module):
    b = getattr(m, "bias", None)
    return None if b is None else b.detach()
