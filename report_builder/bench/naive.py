"""The naive K21 baseline of the benchmark: full tensors, the way the K21 authors' code works.

K21's modified ``BertAttention`` builds the per-head transformed vectors ``f^h(x_j)`` (H, n, d), the
weighted per-head terms ``alpha^h_ij f^h(x_j)`` as one (H, n, n, d) tensor (einsum
``'bhks,bhsd->bhksd'``), sums heads to (n, n, d) for ATTN-N, adds the residual on the diagonal for
ATTNRES-N, and applies the frozen-scale LayerNorm to every (i, j) term for ATTNRESLN-N; maps are
norms of those tensors and mixing ratios are read off the same tensors.

Pitfall: this is a baseline, not an oracle; it shares nothing with the fast path (`decompose/`)
beyond the weight containers, so the speed-up is measured against an independent implementation.
Pre-LN layers get the analogous construction (LN1 in front of attention, the norm in front of FF
after ATTN+RES).
"""
from __future__ import annotations

import torch
from torch import Tensor


def _ln_lin(nw, t: Tensor) -> Tensor:
    return t * nw.weight if nw.kind == "RMSNorm" else (t - t.mean(-1, keepdim=True)) * nw.weight


def _ln_scale(nw, u: Tensor) -> Tensor:
    if nw.kind == "RMSNorm":
        return torch.sqrt((u * u).mean(-1, keepdim=True) + nw.eps)
    return torch.sqrt(((u - u.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + nw.eps)


def _ratio_full(terms: Tensor) -> Tensor:
    """K21 mixing ratio from the full (n, n, d) terms."""
    n = terms.shape[0]
    idx = torch.arange(n, device=terms.device)
    self_ = terms[idx, idx]
    ctx = terms.sum(1) - self_
    c, s = ctx.float().norm(dim=-1), self_.float().norm(dim=-1)
    return c / (c + s)


def naive_k21(lw, x: Tensor, alpha: Tensor, *, maps: bool = True, ratios: bool = False) -> dict[str, Tensor]:
    """K21's ATTN-N, ATTNRES-N and ATTNRESLN-N maps (and/or ratios) from full tensors.

    Args:
        lw: `LayerWeights`; x: (n, d) layer input; alpha: (H, n, n) attention probabilities.
        maps: return the three (n, n) norm maps. ratios: return the five K21 mixing ratios.
    Returns:
        ``{"ATTN-N": map, ..., "ratio:ATTN-N": (n,), ...}``.
    """
    aw = lw.attn
    n, d = x.shape
    H, dh = aw.n_heads, aw.head_dim
    rep = H // aw.n_kv_heads
    post = not lw.layout.norm_first  # post-LN: the norm after ATTN + RES; else LN1 before attention
    y = x if post else _ln_lin(lw.ln1, x) / _ln_scale(lw.ln1, x) + (lw.ln1.bias if lw.ln1.bias is not None else 0)
    v = y @ aw.w_v + (aw.b_v if aw.b_v is not None else 0)
    v = v.view(n, aw.n_kv_heads, dh).repeat_interleave(rep, dim=1).permute(1, 0, 2)  # (H, n, dh)
    dense = aw.w_o.view(H, dh, d)
    transformed = torch.einsum("hsv,hvd->hsd", v, dense)  # (H, n, d)
    weighted = torch.einsum("hks,hsd->hksd", alpha, transformed)  # (H, n, n, d): the K21 tensor
    summed = weighted.sum(0)  # (n, n, d)  ATTN terms
    del weighted
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    residual = torch.einsum("sk,sd->skd", eye, x)  # (n, n, d), x_i on the diagonal
    res_w = summed + residual  # ATTNRES terms
    b_o = aw.b_o if aw.b_o is not None else 0
    nrm = lw.ln1 if post else lw.ln2
    s = _ln_scale(nrm, res_w.sum(1) + b_o)  # frozen scale of the real LN input
    ln_w = _ln_lin(nrm, res_w) / s.unsqueeze(1)  # ATTNRESLN terms
    out: dict[str, Tensor] = {}
    if maps:
        out["ATTN-N"] = summed.float().norm(dim=-1)
        out["ATTNRES-N"] = res_w.float().norm(dim=-1)
        out["ATTNRESLN-N"] = ln_w.float().norm(dim=-1)
    if ratios:
        diag = torch.diagonal(alpha.mean(0)).float()
        out["ratio:ATTN-W"] = 1 - diag
        out["ratio:ATTNRES-W"] = 0.5 * (1 - diag)
        out["ratio:ATTN-N"] = _ratio_full(summed)
        out["ratio:ATTNRES-N"] = _ratio_full(res_w)
        out["ratio:ATTNRESLN-N"] = _ratio_full(ln_w)
    return out
