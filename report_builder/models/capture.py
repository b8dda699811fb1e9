"""Run the real HF forward pass and capture, per layer, its input, attention probabilities and the
tensors at every check point.

Hooks live only inside `capture_hooks`, a context manager that always removes them, even on error;
they write into a thread-local sink, so worker threads can share one hooked model.
Pitfall: fused (SDPA/flash) attention returns no probabilities; that is an error, never a silent skip.
"""
from __future__ import annotations

import threading
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


class _Sink(threading.local):
    caps: list[LayerCapture] | None = None


@contextmanager
def capture_hooks(model: nn.Module, adapter: Adapter, layers: list[int] | None = None) -> Iterator["Capturer"]:
    """Register capture hooks on ``model`` (a base model) for the given layer indices, once.

    Yields a `Capturer` whose `Capturer.run` does one forward pass and returns that pass's
    `LayerCapture` list. The hooks write into a thread-local sink, so several threads may run
    forward passes through the same model at once, each seeing only its own tensors.
    All hooks are removed on exit, whatever happened inside.
    """
    all_layers = adapter.layers(model)
    idxs = list(range(len(all_layers))) if layers is None else list(layers)
    sink = _Sink()
    handles = []

    def cap_of(pos: int) -> LayerCapture | None:
        caps = sink.caps
        return None if caps is None else caps[pos]

    try:
        for pos, i in enumerate(idxs):
            layer = all_layers[i]

            def pre(mod, args, kwargs, pos=pos):
                cap = cap_of(pos)
                if cap is not None:
                    cap.x = (args[0] if args else kwargs["hidden_states"]).detach()

            handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))

            def attn_hook(mod, args, out, pos=pos):
                cap = cap_of(pos)
                if cap is not None:
                    probs = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None
                    cap.alpha = None if probs is None else probs.detach()

            handles.append(get_module(layer, adapter.attention).register_forward_hook(attn_hook))
            for name, probe in adapter.probes.items():
                mod = get_module(layer, probe.module)
                k = 1.0 if probe.scale is None else float(getattr(model.config, probe.scale))
                if probe.where == "in":
                    def h(mod, args, kwargs, pos=pos, name=name, k=k):
                        cap = cap_of(pos)
                        if cap is not None:
                            cap.refs[name] = _ref(args[0] if args else next(iter(kwargs.values())), cap, k)
                    handles.append(mod.register_forward_pre_hook(h, with_kwargs=True))
                else:
                    def h(mod, args, out, pos=pos, name=name, k=k):
                        cap = cap_of(pos)
                        if cap is not None:
                            cap.refs[name] = _ref(_first(out), cap, k)
                    handles.append(mod.register_forward_hook(h))
        yield Capturer(model, sink, len(idxs))
    finally:
        for hd in handles:
            hd.remove()


@dataclass
class Capturer:
    """Runs forward passes through hooked model (see `capture_hooks`)."""

    model: nn.Module
    sink: _Sink
    n_layers: int

    def run(self, inputs: dict[str, Tensor]) -> list[LayerCapture]:
        """One forward pass with capture; raises `FusedAttention` if probabilities were not captured."""
        caps = [LayerCapture() for _ in range(self.n_layers)]
        self.sink.caps = caps
        try:
            with torch.no_grad():
                self.model(**inputs, output_attentions=True)
        finally:
            self.sink.caps = None
        for k, cap in enumerate(caps):
            if cap.alpha is None or cap.x is None:
                impl = getattr(self.model.config, "_attn_implementation", "?")
                raise FusedAttention(
                    f"attention probabilities were not captured for layer {k} (attention implementation "
                    f"{impl!r}). Fused attention (sdpa/flash) skips them: load the model with "
                    "attn_implementation='eager' (report_builder does this itself for models it loads)."
                )
        return caps


def forward_capture(model: nn.Module, adapter: Adapter, inputs: dict[str, Tensor],
                    layers: list[int] | None = None) -> list[LayerCapture]:
    """One forward pass with capture; raises `FusedAttention` if probabilities were not captured."""
    with capture_hooks(model, adapter, layers) as cap:
        return cap.run(inputs)
