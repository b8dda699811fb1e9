"""The parallel attention + FF layout (SPEC §7; GPT-NeoX with ``use_parallel_residual``, Phi), one
sequence at a time.

    y = x + ATTN(N1(x)) + FF(N2(x))
    scopes ATB (x + attention branch), ATBPFF (= layer: + FF branch).

In the per-layer view FF at position i reads only x_i, so its whole output is attributed to token i:
the FF branch only changes the diagonal of the map (stated on the site), and every map comes from
the Gram identity (no chunk loop). K21 here: ATTN-N is the attention output, ATTNRES-N is ATB; a
parallel layer has no norm after the attention block, so its ATTNRESLN-N is not defined (NaN).

Pitfall: the norms' beta and the whole FF branch are attributed to the token they read, so their bias
terms are zero; only the attention output bias is token-independent.
"""
from __future__ import annotations

import torch
from torch import Tensor

from report_builder.decompose.attention import attn_self, attn_total, gram_norms, output_bias, value_vectors
from report_builder.decompose.feedforward import IGOptions, ff_forward
from report_builder.decompose.layer import LayerResult, LayerWeights
from report_builder.decompose.layouts.common import k21_weight_maps, norm32, ratio
from report_builder.decompose.norms import apply_norm, norm_linear, norm_scale


def decompose_one(lw: LayerWeights, x: Tensor, alpha: Tensor, want: set, *, ratios: bool, extras: bool,
                  ig: IGOptions, chunk_rows: int | None, budget_bytes: int | None, causal: bool = False,
                  rule: str = "cpu", precision: str = "float32") -> LayerResult:
    """Parallel layer, x (n, d), alpha (H, n, n): every map through the Gram identity (causal: over the
    pairs j <= i only); FF only changes the diagonal. ``ig``, ``chunk_rows``, ``budget_bytes``, ``rule``
    and ``precision`` are not used (FF is not decomposed: no pair GEMM)."""
    n, d = x.shape
    res = LayerResult()
    y1 = apply_norm(lw.ln1, x)  # N1(x_j) depends on x_j alone: attributed wholly to j
    res.sums["LN1"] = y1
    w = value_vectors(lw.attn, y1)
    b_o = output_bias(lw.attn, d, x)
    total = attn_total(alpha, w, causal)
    res.sums["ATTN"] = total + b_o
    atb = total + b_o + x
    res.sums["ATB"] = atb
    y2 = apply_norm(lw.ln2, x)
    res.sums["LN2"] = y2
    ff = ff_forward(lw.ff, y2)  # FF(N2(x_i)) reads x_i alone: attributed wholly to token i
    res.sums["FF"] = ff
    out = atb + ff
    res.sums["ATBPFF"] = out
    zero = torch.zeros_like(x[0])  # the norms' beta and the FF branch are attributed to the token they read
    res.bias.update(LN1=zero, ATTN=b_o, ATB=b_o, LN2=zero, FF=zero, ATBPFF=b_o)
    k21_weight_maps(res, alpha, want, ratios)
    self_attn = attn_self(alpha, w)
    if want & {"ATTN-N", "ATTNRES-N", "ATB", "ATBPFF", "ATTNRESLN-N"}:
        g = gram_norms(alpha, w, causal)
        if "ATTN-N" in want:
            res.maps["ATTN-N"] = g.clone()
        for key, diag in (("ATB", self_attn + x), ("ATBPFF", self_attn + x + ff)):
            if key in want or (key == "ATB" and "ATTNRES-N" in want):
                m = g.clone()
                m.diagonal().copy_(norm32(diag))
                if key in want:
                    res.maps[key] = m
                if key == "ATB" and "ATTNRES-N" in want:
                    res.maps["ATTNRES-N"] = m
        if "ATTNRESLN-N" in want:
            res.maps["ATTNRESLN-N"] = torch.full((n, n), float("nan"), device=x.device)
    if ratios:
        ctx = total - self_attn
        res.ratios["ATTN-N"] = ratio(ctx, self_attn)
        res.ratios["ATTNRES-N"] = ratio(ctx, self_attn + x)
        res.ratios["ATTNRESLN-N"] = torch.full((n,), float("nan"), device=x.device)
    if extras:
        res.extras["ff"] = ff
        res.extras["residual"] = atb
        if lw.next_norm is not None:
            res.extras["ln_ff"] = norm_linear(lw.next_norm, ff) / norm_scale(lw.next_norm, out)
            res.extras["ln_weight"] = lw.next_norm.weight
    return res

