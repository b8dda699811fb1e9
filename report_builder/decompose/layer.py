"""What one layer's decomposition takes and gives: `LayerWeights` in, `LayerResult` out (SPEC §1).

The adapters (`models/`) build a `LayerWeights` for each layer; `decompose.layouts` turns it, with the
layer's input and attention probabilities, into a `LayerResult` of exact token-to-token terms at every
scope of the layer's `schema.Layout`. This module holds no mathematics, only the two records and the
reconstruction error every result carries.

Pitfall: the weights are in row-vector convention (``y = x @ W + b``) and must be on the input's
device and dtype (`LayerWeights.to`); the layouts never move or cast them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import torch
from torch import Tensor

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.norms import NormWeights
from report_builder.schema import Layout


@dataclass(frozen=True)
class LayerWeights:
    """Everything the mathematics needs about one layer (see models/ adapters for where it comes from).

    Attributes:
        layout: the layer's `schema.Layout` (scopes, check points, where the norms sit).
        attn, ln1, ln2, ff: the blocks' weights (sandwich: ln1 = the input norm, ln2 = the pre-FF
            norm; parallel: ln1 = the attention branch's norm, ln2 = the FF branch's norm).
        next_norm: pre-LN and parallel: the norm that reads this layer's output (the next layer's LN1
            or the final norm); used by the per-dimension LN analysis. None for post-LN.
        post_attn_norm, post_ff_norm: sandwich only, the norms applied to the attention output and
            to the FF output before each residual addition.
    """

    layout: Layout
    attn: AttentionWeights
    ln1: NormWeights
    ln2: NormWeights
    ff: FFWeights
    next_norm: NormWeights | None = None
    post_attn_norm: NormWeights | None = None
    post_ff_norm: NormWeights | None = None

    def to(self, device=None, dtype=None) -> "LayerWeights":
        cv = lambda nw: None if nw is None else nw.to(device, dtype)  # noqa: E731
        return LayerWeights(self.layout, self.attn.to(device, dtype), self.ln1.to(device, dtype),
                            self.ln2.to(device, dtype), self.ff.to(device, dtype), cv(self.next_norm),
                            cv(self.post_attn_norm), cv(self.post_ff_norm))

    @property
    def ln_position(self) -> str:
        """The layout's stored id (``models.ln_position``)."""
        return self.layout.id

    @property
    def scopes(self) -> tuple[str, ...]:
        return self.layout.scopes

    @property
    def checks(self) -> tuple[str, ...]:
        """Points checked against the HF model, in forward order."""
        return self.layout.checks


@dataclass
class LayerResult:
    """Output of `decompose_layer` for one sequence and layer.

    Attributes:
        maps: scope or K21 method -> (n, n) float32 contribution map ``||z_{i<-j}||`` (bias excluded).
        ratios: K21 method -> (n,) context-mixing ratio in [0, 1].
        sums: check point -> (n, d) sum of the terms plus the bias term (our reconstruction).
        errors: check point -> max_i relative error against the HF tensor (only where a reference was given).
        bias: check point -> (n, d) or (d,) the token-independent bias term ``z_{i<-bias}`` of that point's sum
            (broadcasts against ``sums``; pre-LN ``LN1`` has none: its beta is attributed to the token).
        extras: ``ff`` (n, d) FF output, ``residual`` (n, d) FF's residual input, ``ln_ff`` (n, d) the part
            of the following norm's output owed to FF, ``ln_weight`` (d,) that norm's gamma (when requested).
    """

    maps: dict[str, Tensor] = field(default_factory=dict)
    ratios: dict[str, Tensor] = field(default_factory=dict)
    sums: dict[str, Tensor] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Tensor] = field(default_factory=dict)
    bias: dict[str, Tensor] = field(default_factory=dict)


def relative_error(ours: Tensor, ref: Tensor) -> float:
    """``max_i ||ours_i - ref_i|| / ||ref_i||`` in float32 (tiny reference norms are floored)."""
    o, r = ours.float(), ref.float()
    num = (o - r).norm(dim=-1)
    den = r.norm(dim=-1).clamp_min(1e-12)
    return float((num / den).max()) if num.numel() else 0.0



@lru_cache(maxsize=16)
def real_rows(lengths: tuple[int, ...], n_max: int, device: str) -> Tensor:
    """(B, n_max) bool: which rows of a right-padded batch are real tokens. Cached per batch shape and built
    on the device by its own ops (no host-to-device copy, which could wait for the device mid-layer)."""
    pos = torch.arange(n_max, device=device)
    return torch.stack([pos < n for n in lengths])


def error_rows(outs: list[Tensor], refs: list[Tensor], lengths: list[int]) -> Tensor:
    """`relative_error` of each (B, n, d) output against its reference, per sequence over its real rows
    (pads count 0), on the device: (points, B) float32. An output may also broadcast over the rows
    ((B, 1, d))."""
    rows = []
    pad = None
    for o, r in zip(outs, refs):
        o, r = o.float(), r.float()
        if pad is None and any(n < r.shape[1] for n in lengths):
            pad = real_rows(tuple(lengths), r.shape[1], str(r.device))
        e = (o - r).norm(dim=-1) / r.norm(dim=-1).clamp_min(1e-12)
        rows.append((e if pad is None else torch.where(pad, e, 0.0)).amax(-1))
    return torch.stack(rows)
