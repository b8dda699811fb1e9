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
from typing import Callable, Iterator

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
    caps: list[LayerCapture | None] | None = None
    done: list | None = None


@contextmanager
def capture_hooks(model: nn.Module, adapter: Adapter, layers: list[int] | None = None,
                  on_layer: Callable[[int, LayerCapture], object] | None = None) -> Iterator["Capturer"]:
    """Register capture hooks on ``model`` (a base model) for the given layer indices, once.

    Yields a `Capturer` whose `Capturer.run` does one forward pass and returns that pass's
    `LayerCapture` list. The hooks write into a thread-local sink, so several threads may run
    forward passes through the same model at once, each seeing only its own tensors.
    All hooks are removed on exit, whatever happened inside.

    With ``on_layer(pos, capture)``, each layer's capture is handed over as soon as that layer's
    forward returns (inside the forward pass) and dropped: `Capturer.run` then returns what
    ``on_layer`` returned, per layer, and never holds more than one layer's tensors.
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
            if on_layer is not None:  # registered last: runs after this layer's own probes
                def done(mod, args, out, pos=pos):
                    caps = sink.caps
                    if caps is None or caps[pos] is None:
                        return
                    cap, caps[pos] = caps[pos], None
                    _require(cap, pos, model)
                    sink.done[pos] = on_layer(pos, cap)
                handles.append(layer.register_forward_hook(done))
        yield Capturer(model, sink, len(idxs), streaming=on_layer is not None)
    finally:
        for hd in handles:
            hd.remove()


@dataclass
class Capturer:
    """Runs forward passes through hooked model (see `capture_hooks`)."""

    model: nn.Module
    sink: _Sink
    n_layers: int
    streaming: bool = False

    def run(self, inputs: dict[str, Tensor]) -> list:
        """One forward pass with capture; raises `FusedAttention` if probabilities were not captured.

        Returns the `LayerCapture` list, or with ``on_layer`` (see `capture_hooks`) its results per layer.
        """
        caps: list[LayerCapture | None] = [LayerCapture() for _ in range(self.n_layers)]
        self.sink.caps = caps
        self.sink.done = [None] * self.n_layers if self.streaming else None
        try:
            with torch.no_grad():
                # streaming: the model is not asked to collect every layer's probabilities itself
                # (the attention modules return them anyway; the hooks read them there)
                self.model(**inputs, **({} if self.streaming else {"output_attentions": True}))
            done = self.sink.done
        finally:
            self.sink.caps = None
            self.sink.done = None
        if self.streaming:
            for k, cap in enumerate(caps):
                if cap is not None:  # a layer whose forward never returned to its hook
                    _require(LayerCapture(), k, self.model)
            return done
        for k, cap in enumerate(caps):
            _require(cap, k, self.model)
        return caps


def _require(cap: LayerCapture, k: int, model: nn.Module) -> None:
    """Raise `FusedAttention` unless the layer's input and probabilities were captured."""
    if cap.alpha is None or cap.x is None:
        impl = getattr(model.config, "_attn_implementation", "?")
        raise FusedAttention(
            f"attention probabilities were not captured for layer {k + 1} (attention implementation "
            f"{impl!r}). Fused attention (sdpa/flash) skips them: load the model with "
            "attn_implementation='eager' (report_builder does this itself for models it loads)."
        )


def forward_capture(model: nn.Module, adapter: Adapter, inputs: dict[str, Tensor],
                    layers: list[int] | None = None) -> list[LayerCapture]:
    """One forward pass with capture; raises `FusedAttention` if probabilities were not captured."""
    with capture_hooks(model, adapter, layers) as cap:
        return cap.run(inputs)
