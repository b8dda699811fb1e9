"""The sandwich-norm layout (SPEC §7; Gemma-2/3, OLMo-2), one sequence at a time.

    h = x + N_pa(ATTN(N_in(x))),   y = h + N_po(FF(N_pf(h)))
    scopes ATB (N_in, ATTN, N_pa, RES), ATBLN (N_pf), ATBLNFF, ATBLNFFLN (N_po), ATBLNFFLNRES (= layer).

Every norm is applied term by term with its scale frozen at the real vector it normalises
(``N(t) = M(t) / s_i``, beta to the bias term), so the terms still sum exactly to the real tensor.
K21 methods here: ATTN-N is the attention output before the post-attention norm, ATTNRES-N is ATB
and ATTNRESLN-N is the norm in front of FF (ATBLN).

Pitfall: a norm's scale ``s_i`` comes from the real (summed) input, never from a term; the FF step
holds ``c * n * d'`` numbers per query chunk, ``chunk_rows`` follows the memory budget.
"""
from __future__ import annotations

import torch
from torch import Tensor

from report_builder.decompose.attention import (
    attn_self, attn_terms_src, attn_total, gram_norms, output_bias, value_vectors,
)
from report_builder.decompose.chunks import ff_tiles, gpu_plan
from report_builder.decompose.feedforward import IGOptions, elementwise_kappa, ff_forward, gated_integrals
from report_builder.decompose.layer import LayerResult, LayerWeights
from report_builder.decompose.layouts.common import add_diag, k21_weight_maps, norm32, ratio
from report_builder.decompose.norms import NormWeights, apply_norm, norm_linear, norm_scale
from report_builder.decompose.precision import HALF, input_dtype, pair_mm


def _beta(nw: NormWeights, like: Tensor) -> Tensor:
    return nw.bias if nw.bias is not None else like.new_zeros(like.shape[-1])


def _norm_terms(nw: NormWeights, t: Tensor, s: Tensor) -> Tensor:
    """Source-major terms (n, c, d) through a norm frozen at per-query scales s (c, 1)."""
    return norm_linear(nw, t) / s.unsqueeze(0)


def _norm_bias(nw: NormWeights, b: Tensor, s: Tensor) -> Tensor:
    """Bias rows (c, d) through a norm frozen at s (c, 1); beta joins the bias."""
    return norm_linear(nw, b) / s + _beta(nw, b)


class _HeadFF:
    """The sandwich FF step with its first matmul pushed through the heads (SPEC §6, identity 2).

    FF's input terms are ``u_{i<-j} = sum_h alpha^h_ij / (s_pa_i s_pf_i) M_pf M_pa w^h_j + delta_ij M_pf x_i / s_pf_i``
    (plus a bias term), so the gate/up (or first) projection of a term is a head mixture of
    ``U^h_j = (M_pf M_pa w^h_j) W``, computed once per source token; only the second matmul costs
    ``n^2 d d'``. The IG integrals use the real FF input's totals, shared by every term.
    """

    def __init__(self, lw: LayerWeights, x: Tensor, w: Tensor, s_pa: Tensor, s_pf: Tensor, ffin: Tensor,
                 ub: Tensor, ig: IGOptions, rule: str = "cpu", precision: str = "float32"):
        fw = lw.ff
        self.fw = fw
        self.precision = precision
        self.w2 = fw.w2 if input_dtype(precision) == torch.float32 else fw.w2.to(input_dtype(precision))
        mw = norm_linear(lw.ln2, norm_linear(lw.post_attn_norm, w))  # (n, H, d)
        mx = norm_linear(lw.ln2, x)
        self.inv = 1.0 / (s_pa * s_pf)  # (n, 1): the attention terms' per-query factor
        self.inv_x = 1.0 / s_pf  # the residual (diagonal) term's
        if fw.gated:
            bg = fw.b_gate if fw.b_gate is not None else 0
            bu = fw.b_up if fw.b_up is not None else 0
            self.u = (mw @ fw.w_gate, mw @ fw.w_up)
            self.ux = (mx @ fw.w_gate, mx @ fw.w_up)
            self.i1, self.i2 = gated_integrals(fw.act, ffin @ fw.w_gate + bg, ffin @ fw.w_up + bu, ig,
                                               sync_free=rule == "gpu")
            hb = (ub @ fw.w_gate + bg) * self.i1 + (ub @ fw.w_up + bu) * self.i2
        else:
            b1 = fw.b1 if fw.b1 is not None else 0
            self.u = (mw @ fw.w1,)
            self.ux = (mx @ fw.w1,)
            self.kappa, g0 = elementwise_kappa(fw.act, ffin @ fw.w1 + b1, ig)
            hb = (ub @ fw.w1 + b1) * self.kappa + g0
        self.bias = hb @ fw.w2 + (fw.b2 if fw.b2 is not None else 0)  # (n, d)

    def terms(self, alpha: Tensor, start: int, stop: int, j0: int, j1: int) -> Tensor:
        """FF output terms (S, c, d) of query rows ``start:stop`` from the sources ``j0:j1`` (their bias
        is ``self.bias[start:stop]``)."""
        a_s = (alpha[:, start:stop, j0:j1] * self.inv[start:stop].unsqueeze(0)).permute(2, 1, 0).contiguous()
        ps = []
        for u, ux in zip(self.u, self.ux):
            p = torch.bmm(a_s, u[j0:j1])  # (S, c, d')
            add_diag(p, j0, start, ux[start:stop] * self.inv_x[start:stop])
            ps.append(p)
        if self.fw.gated:
            hidden = ps[0].mul_(self.i1[start:stop]).addcmul_(ps[1], self.i2[start:stop])
        else:
            hidden = ps[0].mul_(self.kappa[start:stop])
        del ps
        if self.precision == "float32":
            return hidden @ self.fw.w2
        S, c, dff = hidden.shape
        h = hidden.to(input_dtype(self.precision)).view(S * c, dff)
        return pair_mm(h, self.w2, self.precision).view(S, c, -1)


def _add(part: dict, key: str, v: Tensor) -> None:
    """A chunk's sum over its sources: the first tile's sum kept, a later tile's added."""
    if key in part:
        part[key] += v
    else:
        part[key] = v


def decompose_one(lw: LayerWeights, x: Tensor, alpha: Tensor, want: set, *, ratios: bool, extras: bool,
                  ig: IGOptions, chunk_rows: int | None, budget_bytes: int | None, causal: bool = False,
                  rule: str = "cpu", precision: str = "float32") -> LayerResult:
    """Sandwich layer, x (n, d), alpha (H, n, n): attention-side quantities in closed form, the maps by
    query-row chunks (causal: each over its source prefix only): the CPU rule's chunks and tiles, or
    (``rule`` gpu) the GPU rule's row blocks over every source of their prefix, the pair GEMM in
    ``precision``."""
    n, d = x.shape
    res = LayerResult()
    n_pa, n_pf, n_po = lw.post_attn_norm, lw.ln2, lw.post_ff_norm
    y = apply_norm(lw.ln1, x)  # N_in(x_j) depends on x_j alone: attributed wholly to j
    res.sums["LN1"] = y
    w = value_vectors(lw.attn, y)
    b_o = output_bias(lw.attn, d, x)
    total = attn_total(alpha, w, causal)
    a_real = total + b_o
    res.sums["ATTN"] = a_real
    s_pa = norm_scale(n_pa, a_real)  # (n, 1)
    res.sums["ATTNLN"] = norm_linear(n_pa, a_real) / s_pa + _beta(n_pa, x)
    h = res.sums["ATTNLN"] + x
    res.sums["ATB"] = h
    s_pf = norm_scale(n_pf, h)
    ffin = norm_linear(n_pf, h) / s_pf + _beta(n_pf, x)
    res.sums["ATBLN"] = ffin
    b_al = norm_linear(n_pa, b_o.expand(n, d)) / s_pa + _beta(n_pa, x)  # (n, d) bias after N_pa
    res.bias.update(LN1=torch.zeros_like(x[0]), ATTN=b_o, ATTNLN=b_al, ATB=b_al,
                    ATBLN=norm_linear(n_pf, b_al) / s_pf + _beta(n_pf, x))
    k21_weight_maps(res, alpha, want, ratios)
    self_attn = attn_self(alpha, w)
    if ratios:
        ctx = total - self_attn
        res.ratios["ATTN-N"] = ratio(ctx, self_attn)
        ctx_atb = norm_linear(n_pa, ctx) / s_pa
        self_atb = norm_linear(n_pa, self_attn) / s_pa + x
        res.ratios["ATTNRES-N"] = ratio(ctx_atb, self_atb)
        res.ratios["ATTNRESLN-N"] = ratio(norm_linear(n_pf, ctx_atb), norm_linear(n_pf, self_atb))
    if "ATTN-N" in want:
        res.maps["ATTN-N"] = gram_norms(alpha, w, causal)

    ff_scopes = set(lw.scopes[2:])
    need_ff = bool(want & ff_scopes) or extras
    need_loop = need_ff or bool(want & {"ATB", "ATBLN", "ATTNRES-N", "ATTNRESLN-N"})
    if not need_loop:
        return res
    sc = lw.scopes
    new_map = torch.zeros if causal else torch.empty  # causal: the pairs j > i are never written
    mp = {k: new_map(n, n, dtype=torch.float32, device=x.device)
          for k in set(sc) | {"ATTNRES-N", "ATTNRESLN-N"} if k in want}
    acc = {k: torch.empty(n, d, dtype=x.dtype, device=x.device) for k in sc[2:]} if need_ff else {}
    bias = {k: torch.empty(n, d, dtype=x.dtype, device=x.device) for k in sc[2:]} if need_ff else {}
    if need_ff:
        ff_real = ff_forward(lw.ff, ffin)
        s_po = norm_scale(n_po, ff_real)
        head_ff = _HeadFF(lw, x, w, s_pa, s_pf, ffin, res.bias["ATBLN"], ig, rule, precision)
    if rule == "gpu":  # the GPU rule's blocks: equal rows, every source of the prefix at once
        c = chunk_rows or gpu_plan(n, d, lw.ff.d_ff, budget_bytes=budget_bytes, causal=causal,
                                   gated=lw.ff.gated, itemsize=x.element_size(), reduced=precision in HALF).rows
        tile = n
    else:  # one row's terms over every source held per chunk, as before gated FFs had one GEMM (gated=False)
        c, tile = (chunk_rows, n) if chunk_rows else ff_tiles(n, d, lw.ff.d_ff, budget_bytes=budget_bytes,
                                                              itemsize=x.element_size())
    for start in range(0, n, c):
        stop = min(n, start + c)
        rows = slice(start, stop)
        m = stop if causal else n  # the sources these rows read; long sequences: in tiles
        tb = _norm_bias(n_pa, b_o.expand(stop - start, d), s_pa[rows])
        part: dict[str, Tensor] = {}  # each FF scope's sum over the sources, tile by tile
        for j0 in range(0, m, tile):
            cols = slice(j0, min(m, j0 + tile))
            t = _norm_terms(n_pa, attn_terms_src(alpha[:, rows, cols], w[cols]), s_pa[rows])  # N_pa(ATTN) terms
            add_diag(t, j0, start, x[rows])  # RES: x_i to the j = i term
            if "ATB" in mp:
                mp["ATB"][rows, cols] = norm32(t).T
            if "ATTNRES-N" in mp:
                mp["ATTNRES-N"][rows, cols] = norm32(t).T
            if want & {"ATBLN", "ATTNRESLN-N"}:
                u = _norm_terms(n_pf, t, s_pf[rows])
                for k in ("ATBLN", "ATTNRESLN-N"):
                    if k in mp:
                        mp[k][rows, cols] = norm32(u).T
                del u
            if not need_ff:
                continue
            f = head_ff.terms(alpha, start, stop, cols.start, cols.stop)
            _add(part, sc[2], f.sum(0))
            if sc[2] in mp:
                mp[sc[2]][rows, cols] = norm32(f).T
            f = _norm_terms(n_po, f, s_po[rows])
            _add(part, sc[3], f.sum(0))
            if sc[3] in mp:
                mp[sc[3]][rows, cols] = norm32(f).T
            t.add_(f)
            del f
            _add(part, sc[4], t.sum(0))
            if sc[4] in mp:
                mp[sc[4]][rows, cols] = norm32(t).T
            del t
        if need_ff:
            fb = head_ff.bias[rows]
            acc[sc[2]][rows] = part[sc[2]] + fb
            bias[sc[2]][rows] = fb
            fb = _norm_bias(n_po, fb, s_po[rows])
            acc[sc[3]][rows] = part[sc[3]] + fb
            bias[sc[3]][rows] = fb
            acc[sc[4]][rows] = part[sc[4]] + tb + fb
            bias[sc[4]][rows] = tb + fb
    res.maps.update(mp)
    res.sums.update(acc)
    res.bias.update(bias)
    if extras:
        res.extras["ff"] = ff_real
        res.extras["residual"] = h
        res.extras["ln_ff"] = norm_linear(n_po, ff_real) / s_po
        res.extras["ln_weight"] = n_po.weight
    return res
