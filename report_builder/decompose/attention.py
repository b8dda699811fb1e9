"""Attention as a sum over source tokens: per-head transformed value vectors and their mixtures.

``f^h(x) = (x W_V^h + b_V^h) W_O^h`` (value bias inside f, as in the K21 code) and
``ATTN_{i<-j} = sum_h alpha^h_ij f^h(x_j)``; the output bias b_O is token-independent.

Causal attention (``alpha[..., i, j] == 0`` for every j > i, `is_causal`): every term a token
receives from a later one is an exact zero, so the n^2 steps here cover only the pairs j <= i, in
blocks that keep the GEMMs large (query rows over their source prefix; sources over the queries at
or after them): ``causal=True``.

Pitfall: never materialise (H, n, n, d). Sum heads first (``attn_terms_src``) and chunk query rows.
Grouped-query attention: query head h reads key/value group ``h // (H / H_kv)`` (HF's repeat_kv).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from report_builder.decompose.chunks import BLOCK_ROWS


@dataclass(frozen=True)
class AttentionWeights:
    """Value/output projections of one attention block in row-vector convention (y = x @ W + b).

    Attributes:
        w_v: (d, H_kv * d_h); b_v: (H_kv * d_h,) or None.
        w_o: (H * d_h, d); b_o: (d,) or None.
        n_heads, n_kv_heads, head_dim.
    """

    w_v: Tensor
    b_v: Tensor | None
    w_o: Tensor
    b_o: Tensor | None
    n_heads: int
    n_kv_heads: int
    head_dim: int

    def to(self, device=None, dtype=None) -> "AttentionWeights":
        cv = lambda t: None if t is None else t.to(device=device, dtype=dtype)  # noqa: E731
        return AttentionWeights(cv(self.w_v), cv(self.b_v), cv(self.w_o), cv(self.b_o),
                                self.n_heads, self.n_kv_heads, self.head_dim)

    @property
    def d_model(self) -> int:
        return self.w_o.shape[1]


def value_vectors(aw: AttentionWeights, y: Tensor) -> Tensor:
    """Transformed value vectors ``f^h(y_j)`` for every source token and query head.

    Args:
        y: (..., n, d) attention input (a leading batch dimension is allowed).
    Returns:
        (..., n, H, d) tensor ``w[j, h] = (y_j W_V^{g(h)} + b_V^{g(h)}) W_O^h``.
    """
    lead = y.shape[:-1]
    v = y @ aw.w_v
    if aw.b_v is not None:
        v = v + aw.b_v
    v = v.reshape(-1, aw.n_kv_heads, aw.head_dim)
    rep = aw.n_heads // aw.n_kv_heads
    if rep > 1:
        v = v.repeat_interleave(rep, dim=1)  # (N, H, d_h), head h uses group h // rep
    w_o = aw.w_o.view(aw.n_heads, aw.head_dim, -1)  # (H, d_h, d)
    # one batched GEMM over heads (einsum picked a slow path here), back to source-major (N, H, d)
    out = torch.bmm(v.transpose(0, 1), w_o).transpose(0, 1).contiguous()
    return out.view(*lead, aw.n_heads, -1)


def output_bias(aw: AttentionWeights, d: int, like: Tensor) -> Tensor:
    """b_O, or zeros when the projection has no bias."""
    return aw.b_o if aw.b_o is not None else like.new_zeros(d)


def attn_terms_src(alpha: Tensor, w: Tensor) -> Tensor:
    """Head-summed attention terms, source-major: one batched GEMM over source tokens.

    Args:
        alpha: (..., H, c, n) attention probabilities for c query rows (any row scaling already applied).
        w: (..., n, H, D) per-source, per-head vectors.
    Returns:
        (..., n, c, D) contiguous with ``out[j, i] = sum_h alpha[h, i, j] * w[j, h]``.
    """
    return alpha.movedim(-3, -1).transpose(-3, -2).contiguous() @ w


def is_causal(alpha: Tensor) -> bool:
    """True when every probability above the diagonal is exactly zero (a causal mask; any padding
    masked as `decompose_batch` does keeps it), checked a block of query rows at a time."""
    n = alpha.shape[-1]
    for s in range(0, n, BLOCK_ROWS):
        e = min(n, s + BLOCK_ROWS)
        if bool(torch.triu(alpha[..., s:e, s:], diagonal=1).any()):
            return False
    return True


def causal_violation(alpha: Tensor) -> Tensor:
    """A 0-dim bool tensor: whether any probability above the diagonal is non-zero (no value read on the
    host; the GPU rule reads it with the layer's errors)."""
    return torch.triu(alpha, diagonal=1).ne(0).any()


def attn_total(alpha: Tensor, w: Tensor, causal: bool = False) -> Tensor:
    """Sum over sources of the attention terms: (..., H, n_q, n), (..., n, H, d) -> (..., n_q, d), one GEMM
    (causal: one per block of query rows, over the sources up to the block's last row)."""
    a = alpha.movedim(-3, -1)  # (..., n_q, n, H)
    if not causal:
        return a.reshape(*a.shape[:-2], -1) @ w.reshape(*w.shape[:-3], -1, w.shape[-1])
    n = a.shape[-2]
    out = w.new_empty(*a.shape[:-2], w.shape[-1])
    for s in range(0, n, BLOCK_ROWS):
        e = min(n, s + BLOCK_ROWS)
        blk = a[..., s:e, :e, :]
        out[..., s:e, :] = blk.reshape(*blk.shape[:-2], -1) @ w[..., :e, :, :].reshape(*w.shape[:-3], -1, w.shape[-1])
    return out


def attn_self(alpha: Tensor, w: Tensor) -> Tensor:
    """Self terms ``sum_h alpha[h, i, i] w[i, h]``: (..., H, n, n), (..., n, H, d) -> (..., n, d)."""
    diag = torch.diagonal(alpha, dim1=-2, dim2=-1)  # (..., H, n)
    return (diag.transpose(-1, -2).unsqueeze(-2) @ w).squeeze(-2)


def gram_norms(alpha: Tensor, mw: Tensor, causal: bool = False) -> Tensor:
    """Norms of ``sum_h alpha[h,i,j] mw[j,h]`` for all (i, j) through per-source H x H Gram matrices.

    ``||sum_h a_h v_h||^2 = a^T G a`` with ``G[h,h'] = <v_h, v_h'>``: O(n H^2 d + n^2 H^2) instead of
    O(n^2 H d). Squared norms are accumulated in float32 and clamped at 0 before the square root.
    All contractions are batched GEMMs over the source token.

    Args:
        alpha: (..., H, n_q, n) probabilities (rows may be a chunk of queries).
        mw: (..., n, H, d) per-source per-head vectors, already mapped by any linear map M.
        causal: alpha is causal (n_q == n): each block of sources pairs only with the queries at or
            after it; the norms of the other pairs are exact zeros.
    Returns:
        (..., n_q, n) norms.
    """
    mwf = mw.float()
    g = mwf @ mwf.transpose(-1, -2)  # (..., n, H, H)
    if causal:
        n = alpha.shape[-1]
        out = torch.zeros(*alpha.shape[:-3], n, n, dtype=torch.float32, device=alpha.device)
        for s in range(0, n, BLOCK_ROWS):
            e = min(n, s + BLOCK_ROWS)
            out[..., s:, s:e] = _gram_block(alpha[..., s:, s:e], g[..., s:e, :, :])
        return out
    return _gram_block(alpha, g)


def _gram_block(alpha: Tensor, g: Tensor) -> Tensor:
    """Norms for the queries and sources of ``alpha`` (..., H, n_q, n_s) with the sources' Gram matrices."""
    af = alpha.float().movedim(-3, -1).transpose(-3, -2).contiguous()  # (..., n_s, n_q, H)
    tmp = af @ g  # (..., n_s, n_q, H): tmp[j, i, g] = sum_h alpha[h, i, j] G_j[h, g]
    sq = (tmp * af).sum(-1)  # (..., n_s, n_q)
    return sq.clamp_min(0).sqrt().transpose(-1, -2).contiguous()
