"""LayerNorm / RMSNorm with the scale frozen at its actual value, applied to decomposed terms.

A normalisation layer is affine once its per-token scale ``s_i`` is frozen at the value computed from
the real input ``u_i``:  LN(u_i) = M(u_i) / s_i + beta  with  M(t) = gamma * (t - mean(t))  (LayerNorm)
or  M(t) = gamma * t  (RMSNorm, no centring). Each term ``t_{i<-j}`` then maps to ``M(t_{i<-j}) / s_i``
and ``beta`` joins the bias term, so the terms still sum exactly to the real output.

Pitfall: ``s_i`` must come from the *sum* (the real input), never from a single term.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class NormWeights:
    """Weights of one normalisation layer.

    Attributes:
        kind: ``"LayerNorm"`` or ``"RMSNorm"``.
        weight: gamma, shape (d,).
        bias: beta, shape (d,), or None (RMSNorm, or LayerNorm without bias).
        eps: the epsilon inside the square root.
    """

    kind: str
    weight: Tensor
    bias: Tensor | None
    eps: float

    def to(self, device=None, dtype=None) -> "NormWeights":
        return NormWeights(
            self.kind,
            self.weight.to(device=device, dtype=dtype),
            None if self.bias is None else self.bias.to(device=device, dtype=dtype),
            self.eps,
        )


def norm_scale(nw: NormWeights, u: Tensor) -> Tensor:
    """Per-token scale ``s`` of the real input ``u`` (..., d) -> (..., 1)."""
    uf = u.float()
    if nw.kind == "RMSNorm":
        s = torch.sqrt(uf.pow(2).mean(-1, keepdim=True) + nw.eps)
    else:
        s = torch.sqrt(uf.var(-1, keepdim=True, unbiased=False) + nw.eps)
    return s.to(u.dtype)


def norm_linear(nw: NormWeights, t: Tensor) -> Tensor:
    """The linear part ``M(t)`` (gamma times centred t for LayerNorm, gamma times t for RMSNorm)."""
    if nw.kind == "RMSNorm":
        return t * nw.weight
    return (t - t.mean(-1, keepdim=True)) * nw.weight


def apply_norm(nw: NormWeights, u: Tensor) -> Tensor:
    """The ordinary (un-decomposed) normalisation of ``u`` (..., d)."""
    out = norm_linear(nw, u) / norm_scale(nw, u)
    if nw.bias is not None:
        out = out + nw.bias
    return out
