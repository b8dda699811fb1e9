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

from dataclasses import dataclass, replace
from typing import Callable

from torch import nn

from report_builder.decompose.layer import LayerWeights
from report_builder.errors import UnsupportedArchitecture
from report_builder.schema import Layout


@dataclass(frozen=True)
class Probe:
    """A point inside a layer whose tensor the HF model computes: ``module`` path and ``"in"``/``"out"``."""

    module: str
    where: str  # "in" (first positional input) or "out" (output, first element if a tuple)
    scale: str | None = None  # a config attribute the HF tensor is multiplied by (Granite's residual_multiplier)


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
        submodules: the names of a layer's child modules this layout expects (dropouts and
            activations aside); a layer with any other child or without one of these is refused
            by name before anything is computed (`check_structure`). None: not checked.
        multipliers: config attributes that scale the residual branches or the embeddings linearly
            (Granite); the residual one is folded into the blocks' output weights (a property of the
            family, shown in the models table; the layout is unchanged).
        variant: the adapters of a family whose layout depends on a config value (OPT's
            ``do_layer_norm_before``), as `Variants`; None: this adapter serves every config.
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
    submodules: frozenset[str] | None = None
    multipliers: tuple[str, ...] = ()
    variant: "Variants | None" = None

    @property
    def ln_position(self) -> str:
        """The layout's stored id (``models.ln_position``)."""
        return self.layout.id

    def for_config(self, config) -> "Adapter":
        """The adapter that serves ``config`` (resolves `variant`)."""
        return self if self.variant is None else self.variant(config)

    @property
    def variants(self) -> tuple["Adapter", ...]:
        """Every adapter this family may serve a config with (itself when it has no `variant`)."""
        return (self,) if self.variant is None else tuple(self.variant.by.values())

    def with_(self, **changes) -> "Adapter":
        """A copy with some facts changed (a variant of a family)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Variants:
    """The variants of a family, as data: ``read(config)`` is the key of the adapter in ``by`` that
    serves that config (so every variant, and every layout a family may have, is listed here).

    Attributes:
        read: config -> key, e.g. ``lambda cfg: bool(cfg.do_layer_norm_before)``.
        by: key -> `Adapter`.
    """

    read: Callable[[object], object]
    by: dict

    def __call__(self, config) -> Adapter:
        return self.by[self.read(config)]


_IGNORED_CHILDREN = (nn.Dropout, nn.Identity)


def check_structure(model: nn.Module, adapter: Adapter) -> None:
    """Refuse, by name, a model whose layers do not have exactly the child modules of its layout.

    A norm or branch the layout does not know (a post-attention norm in a pre-LN layer, a
    cross-attention block) would make the decomposition silently wrong; this catches it from the
    module structure before any result is computed. Dropouts and activation modules are ignored.
    """
    if adapter.submodules is None:
        return
    for k, layer in enumerate(adapter.layers(model)):
        names = {n for n, m in layer.named_children()
                 if not isinstance(m, _IGNORED_CHILDREN) and "activation" not in type(m).__module__}
        extra, missing = sorted(names - adapter.submodules), sorted(adapter.submodules - names)
        if extra or missing:
            what = []
            if extra:
                what.append("unexpected submodule(s) " + ", ".join(extra) + _hint(extra))
            if missing:
                what.append("missing submodule(s) " + ", ".join(missing))
            raise UnsupportedArchitecture(
                f"{type(model).__name__} layer {k + 1} does not match the {adapter.layout.label} layout of the "
                f"{adapter.family} adapter: {'; '.join(what)}. Refused before any result is computed.")


def _hint(names: list[str]) -> str:
    if any("norm" in n for n in names):
        return " (a norm this layout does not have, e.g. a post-attention norm)"
    if any("cross" in n for n in names):
        return " (an extra branch: cross-attention)"
    return " (a block this layout does not have)"


def get_module(root: nn.Module, path: str) -> nn.Module:
    """``root.a.b.0.c`` by dotted path (``""`` returns root)."""
    m = root
    for part in filter(None, path.split(".")):
        m = m[int(part)] if part.isdigit() else getattr(m, part)
    return m


def head_dims(cfg) -> tuple[int, int, int]:
    """``(query heads, key/value heads, head size)`` of a grouped-query config (Llama and the families built
    on its layer: no ``num_key_value_heads`` means one per query head, no ``head_dim`` an even split)."""
    h = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or h
    return h, kv, getattr(cfg, "head_dim", None) or cfg.hidden_size // h


def linear_w(m: nn.Module):
    """Row-vector weight of an nn.Linear: (in, out)."""
    return m.weight.detach().T


def bias_of(m: nn.Module):
    b = getattr(m, "bias", None)
    return None if b is None else b.detach()
