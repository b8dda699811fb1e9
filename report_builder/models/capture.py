"""Run the real HF forward pass and capture, per layer, its input, attention probabilities and the
tensors at every check point.

Hooks live only inside `capture`, a context manager that always removes them, even on error.
Pitfall: fused (SDPA/flash) attention returns no probabilities; that is an error, never a silent skip.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch import Tensor, nn

from report_builder.models.adapter import Adapter, get_module
from report_builder.errors import FusedAttention


@dataclass
class LayerCapture:
    """What one forward pass showed of one layer: ``x`` (B, n, d), ``alpha`` (B, H, n, n), ``refs``."""

    x: Tensor | None = None
    alpha: Tensor | None = None
    refs: dict[str, Tensor] = field(default_factory=dict)


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _ref(t: Tensor, cap: LayerCapture, k: float) -> Tensor:
    """A probed tensor as (B, n, d), times the probe's scale: OPT flattens (B n, d) inside its layer."""
    t = t.detach()
    if cap.x is not None and t.shape != cap.x.shape and t.numel() == cap.x.numel():
        t = t.reshape(cap.x.shape)
    return t if k == 1.0 else t * k


@contextmanager
def capture(model: nn.Module, adapter: Adapter, layers: list[int] | None = None) -> Iterator[list[LayerCapture]]:
    """Register capture hooks on ``model`` (a base model) for the given layer indices.

    Yields a list of `LayerCapture` (one per layer index, in order) that fills during the forward pass.
    All hooks are removed on exit, whatever happened inside.
    """
    all_layers = adapter.layers(model)
    idxs = list(range(len(all_layers))) if layers is None else list(layers)
    caps = [LayerCapture() for _ in idxs]
    handles = []
    try:
        for cap, i in zip(caps, idxs):
            layer = all_layers[i]

            def pre(mod, args, kwargs, cap=cap):
                cap.x = (args[0] if args else kwargs["hidden_states"]).detach()

            handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))

            def attn_hook(mod, args, out, cap=cap):
                probs = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None
                cap.alpha = None if probs is None else probs.detach()

            handles.append(get_module(layer, adapter.attention).register_forward_hook(attn_hook))
            for name, probe in adapter.probes.items():
                mod = get_module(layer, probe.module)
                k = 1.0 if probe.scale is None else float(getattr(model.config, probe.scale))
                if probe.where == "in":
                    def h(mod, args, kwargs, cap=cap, name=name, k=k):
                        cap.refs[name] = _ref(args[0] if args else next(iter(kwargs.values())), cap, k)
                    handles.append(mod.register_forward_pre_hook(h, with_kwargs=True))
                else:
                    def h(mod, args, out, cap=cap, name=name, k=k):
                        cap.refs[name] = _ref(_first(out), cap, k)
                    handles.append(mod.register_forward_hook(h))
        yield caps
    finally:
        for hd in handles:
            hd.remove()


def forward_capture(model: nn.Module, adapter: Adapter, inputs: dict[str, Tensor],
                    layers: list[int] | None = None) -> list[LayerCapture]:
    """One forward pass with capture; raises `FusedAttention` if probabilities were not captured."""
    with capture(model, adapter, layers) as caps, torch.no_grad():
        model(**inputs, output_attentions=True)
    for k, cap in enumerate(caps):
        if cap.alpha is None or cap.x is None:
            impl = getattr(model.config, "_attn_implementation", "?")
            raise FusedAttention(
                f"attention probabilities were not captured for layer {k} (attention implementation "
                f"{impl!r}). Fused attention (sdpa/flash) skips them: load the model with "
                "attn_implementation='eager' (report_builder does this itself for models it loads)."
            )
    return caps
