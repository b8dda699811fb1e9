"""Architecture adapters: where each family keeps its weights and which tensors to check, as data.

An adapter names the layer list, the attention module (which returns the probabilities), the value
and output projections, the norms and FF weights, and the module points whose tensors the
decomposition must reproduce. The mathematics in `decompose/` is shared by all families.
Adapters are found through `models.registry` (which imports the family modules; this base module
imports none of them).

Pitfall: all weights are returned in row-vector convention (``y = x @ W + b``): ``nn.Linear``
stores ``W.T``, GPT-2's ``Conv1D`` stores ``W``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from report_builder.decompose.layer import LayerWeights


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
        layout: the layer wiring (`schema.POST_LN`, `schema.PRE_LN`, ...): scopes and check points.
        causal: True for decoder-only models (each token sees only itself and earlier tokens; the
            statistics then use only pairs ``j <= i`` and sequences are never masked).
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
    layout: Layout
    causal: bool
    layers: Callable[[nn.Module], list[nn.Module]]
    attention: str
    weights: Callable[[nn.Module, int], LayerWeights]
    probes: dict[str, Probe]
    facts: Callable[[object], dict]
    max_positions: Callable[[object], int]

    @property
    def ln_position(self) -> str:
        """The layout's stored id (``models.ln_position``)."""
        return self.layout.id


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
