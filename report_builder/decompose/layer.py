"""One Transformer layer as exact token-to-token terms at every scope (SPEC §1), with fast paths (§6).

post-LN (BERT family):  x' = LN1(x + ATTN(x)),   y = LN2(x' + FF(x'))
    scopes ATB (= ATTNRESLN), ATBFF, ATBFFRES, ATBFFRESLN; K21 intermediates ATTN, ATTNRES.
pre-LN (GPT-2, Llama):  x' = x + ATTN(LN1(x)), y = x' + FF(LN2(x'))
    scopes ATB (= LN1+ATTN+RES), ATBLN, ATBLNFF, ATBLNFFRES; intermediates LN1, ATTN.

Both share one structure: the FF input term is ``(1/s_i)(sum_h alpha^h_ij M w^h_j + delta_ij M x_i)``
with M the linear part of the norm in front of FF and s_i its frozen scale, so one code path serves
both, and the first FF matmul goes through the heads (``U^h_j = M w^h_j W1``).

Every result carries the relative reconstruction error of each scope against the tensors the real
HF model computed (when given). Pitfall: the per-query chunk loop must never hold more than
``c * n * d'`` numbers; ``chunk_rows`` follows a memory budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import torch
from torch import Tensor

from report_builder.decompose.attention import (
    AttentionWeights, attn_self, attn_terms_src, attn_total, gram_norms, output_bias, value_vectors,
)
from report_builder.decompose.feedforward import (
    FFWeights, IGOptions, elementwise_kappa, ff_forward, gated_integrals,
)
from report_builder.decompose.norms import NormWeights, apply_norm, norm_linear, norm_scale
from report_builder.schema import K21_METHODS, PARALLEL, SANDWICH, Layout



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


# Numbers one chunk's FF terms may hold for cache locality (~16 MB of float32): measured on a 2-core
# x86 CPU, chunks of a few query rows run the element-wise passes over the terms from cache and
# reach 64-88 % of the matmul roofline, whole-sequence chunks 45-75 % (`report-builder bench`).
CACHE_NUMBERS = 4 << 20


def default_chunk_rows(n: int, d: int, d_ff: int, *, budget_bytes: int = 512 << 20, itemsize: int = 4,
                       gated: bool = False, batch: int = 1) -> int:
    """Query rows per chunk: as many as keep one chunk's FF terms near `CACHE_NUMBERS` numbers, never
    more than ``budget_bytes`` allows.

    Per query row the loop holds at most ``n * (2 d' + 3 d)`` numbers (gated: both projections'
    terms; FF terms; residual terms), plus GEMM temporaries; the budget counts ``n * (3 d' + 5 d)``
    to leave room for them. Depends only on the shapes and the budget, never on the data or the
    thread count, so a sequence is always cut the same way. ``batch`` sequences share a chunk.
    """
    per_row = batch * n * (3 * d_ff + 5 * d) * itemsize
    by_budget = budget_bytes // max(per_row, 1)
    by_cache = CACHE_NUMBERS // max(batch * n * ((2 if gated else 1) * d_ff + 2 * d), 1)
    return max(1, min(n, by_budget, max(by_cache, 1)))


def _norm32(t: Tensor) -> Tensor:
    """Euclidean norm over the last dim, accumulated in float32 whatever t's dtype."""
    return torch.linalg.vector_norm(t, dim=-1, dtype=torch.float32)


def _ratio(ctx: Tensor, self_: Tensor) -> Tensor:
    c = _norm32(ctx)
    s = _norm32(self_)
    return c / (c + s).clamp_min(1e-30)


def _src_diag(t: Tensor, start: int) -> Tensor:
    """View of the diagonal terms of a source-major chunk: t (..., n, c, D) holds query rows
    ``start .. start + c``; returns the (..., D, c) view of ``t[..., start + k, k, :]``."""
    c = t.shape[-2]
    return torch.diagonal(t[..., start:start + c, :, :], dim1=-3, dim2=-2)


def decompose_layer(
    lw: LayerWeights,
    x: Tensor,
    alpha: Tensor,
    *,
    maps: Iterable[str] = (),
    ratios: bool = False,
    refs: dict[str, Tensor] | None = None,
    extras: bool = False,
    ig: IGOptions = IGOptions(),
    chunk_rows: int | None = None,
    budget_bytes: int = 512 << 20,
) -> LayerResult:
    """Decompose one layer for one (unpadded) sequence.

    Args:
        lw: the layer's weights, on x's device and dtype.
        x: (n, d) layer input.
        alpha: (H, n, n) attention probabilities read from the model (eager attention).
        maps: which maps to compute: any of the layer's scopes and the K21 methods (`K21_METHODS`).
        ratios: compute the five K21 context-mixing ratios (no n x n x d tensor needed).
        refs: HF tensors at the check points (`LayerWeights.checks`), each (n, d); errors are computed
            for every check point whose sum was computed.
        extras: also return FF output, residual and the norm-after-FF quantities (K24 RES/LN analyses).
        ig: IG options (closed form by default).
        chunk_rows: query rows per chunk of the FF step (default: from ``budget_bytes``).
    Returns:
        A `LayerResult`.
    """
    if lw.layout in (SANDWICH, PARALLEL):  # SPEC §7 layouts: decompose/layouts.py
        from report_builder.decompose.layouts import decompose_layout

        return decompose_layout(lw, x, alpha, maps=maps, ratios=ratios, refs=refs, extras=extras, ig=ig,
                                chunk_rows=chunk_rows, budget_bytes=budget_bytes)
    n = x.shape[0]
    full = _decompose(lw, x.unsqueeze(0), alpha.unsqueeze(0), _wanted(lw, maps), ratios, extras, ig, chunk_rows,
                      budget_bytes)
    res = _take(full, 0, n)
    _errors(res, refs)
    return res


def _wanted(lw: LayerWeights, maps: Iterable[str]) -> set[str]:
    want = set(maps)
    unknown = want - set(lw.scopes) - set(K21_METHODS)
    if unknown:
        raise ValueError(f"unknown scopes {sorted(unknown)}; this layer has {lw.scopes} and {K21_METHODS}")
    return want


def _errors(res: LayerResult, refs: dict[str, Tensor] | None) -> None:
    for key, ref in (refs or {}).items():
        if key in res.sums:
            res.errors[key] = relative_error(res.sums[key], ref)


def _take(full: LayerResult, b: int, n: int) -> LayerResult:
    """Sequence ``b`` of a batched result, its first ``n`` (real) tokens; shared (d,) tensors as they are."""
    def rows(t: Tensor) -> Tensor:
        return t if t.dim() == 1 else t[b, :n]
    return LayerResult(maps={k: v[b, :n, :n] for k, v in full.maps.items()},
                       ratios={k: v[b, :n] for k, v in full.ratios.items()},
                       sums={k: rows(v) for k, v in full.sums.items()},
                       bias={k: rows(v) for k, v in full.bias.items()},
                       extras={k: rows(v) for k, v in full.extras.items()})


def _decompose(lw: LayerWeights, x: Tensor, alpha: Tensor, want: set[str], ratios: bool, extras: bool,
               ig: IGOptions, chunk_rows: int | None, budget_bytes: int) -> LayerResult:
    """The layer's mathematics on a batch: x (B, n, d), alpha (B, H, n, n); results keep the batch
    dimension ((B, n, n) maps, (B, n) ratios, (B, n, d) sums; token-independent bias terms (d,))."""
    lay = lw.layout
    post = not lay.norm_first  # the mathematics below serves the two layouts of `schema.LAYOUTS`
    B, n, d = x.shape
    res = LayerResult()
    aw = lw.attn

    # --- attention input and per-head transformed values
    if post:
        y = x
    else:
        y = apply_norm(lw.ln1, x)  # pre-LN: LN1(x_j) depends on x_j alone, attributed wholly to j
        res.sums["LN1"] = y
        res.bias["LN1"] = x.new_zeros(d)
    w = value_vectors(aw, y)  # (B, n, H, d)
    b_o = output_bias(aw, d, x)
    total = attn_total(alpha, w)
    res.sums["ATTN"] = total + b_o
    xres = total + b_o + x  # ATTN + RES: post LN1 input, pre x'
    res.sums[lay.attn_res] = xres
    res.bias["ATTN"] = res.bias[lay.attn_res] = b_o

    # --- the norm in front of FF (post: LN1, pre: LN2), frozen at the real input's scale
    nrm = lw.ln1 if post else lw.ln2
    s = norm_scale(nrm, xres)  # (B, n, 1)
    beta = nrm.bias if nrm.bias is not None else torch.zeros_like(b_o)
    mw = norm_linear(nrm, w)
    mx = norm_linear(nrm, x)
    n_bias = norm_linear(nrm, b_o.expand(B, n, d)) / s + beta  # (B, n, d) bias term after the norm
    xin = norm_linear(nrm, xres) / s + beta  # FF input (post: ATB, pre: ATBLN)
    ln_scope = lay.ff_input
    res.sums[ln_scope] = xin
    res.bias[ln_scope] = n_bias

    need_self = ratios or bool(want & {"ATTNRES-N", "ATTNRESLN-N", lay.attn_res, ln_scope})
    if need_self:
        self_attn = attn_self(alpha, w)  # (B, n, d)
    a_mean = alpha.mean(1)
    eye = torch.eye(n, device=x.device, dtype=alpha.dtype)

    # --- K21 maps via the Gram identity (diagonal computed explicitly)
    if "ATTN-W" in want:
        res.maps["ATTN-W"] = a_mean.float()
    if "ATTNRES-W" in want:
        res.maps["ATTNRES-W"] = (0.5 * a_mean + 0.5 * eye).float()
    # pre-LN: the ATTN + RES check point is also a K24 scope (ATB); post-LN: it is not (ATTNRES)
    attn_res_map = lay.attn_res in lay.scopes and lay.attn_res in want
    g_w = gram_norms(alpha, w) if want & {"ATTN-N", "ATTNRES-N"} or attn_res_map else None
    if "ATTN-N" in want:
        res.maps["ATTN-N"] = g_w
    if want & {"ATTNRES-N"} or attn_res_map:
        m = g_w.clone() if "ATTN-N" in want else g_w
        m.diagonal(dim1=-2, dim2=-1).copy_(_norm32(self_attn + x))
        if "ATTNRES-N" in want:
            res.maps["ATTNRES-N"] = m
        if attn_res_map:
            res.maps[lay.attn_res] = m
    if want & {"ATTNRESLN-N", ln_scope}:
        m = gram_norms(alpha, mw) / s.float()
        m.diagonal(dim1=-2, dim2=-1).copy_(_norm32(norm_linear(nrm, self_attn + x) / s))
        for k in ("ATTNRESLN-N", ln_scope):
            if k in want:
                res.maps[k] = m

    # --- K21 ratios: two vectors per token
    if ratios:
        ctx = total - self_attn
        self_res = self_attn + x
        diag = torch.diagonal(a_mean, dim1=-2, dim2=-1).float()
        res.ratios["ATTN-W"] = 1 - diag
        res.ratios["ATTNRES-W"] = 0.5 * (1 - diag)
        res.ratios["ATTN-N"] = _ratio(ctx, self_attn)
        res.ratios["ATTNRES-N"] = _ratio(ctx, self_res)
        res.ratios["ATTNRESLN-N"] = _ratio(norm_linear(nrm, ctx), norm_linear(nrm, self_res))

    ff_scopes = set(lay.ff_scopes)
    # FF is decomposed only when an FF scope map or the K24 extras are asked for: the ratios and the
    # attention maps never pay the n^2 d d' cost (their checks stop at the norm in front of FF)
    ff_wanted = bool(want & ff_scopes) or extras
    if ff_wanted:
        _ff_step(lw, res, x, alpha, w, mw, mx, s, n_bias, xin, want, ig, post, chunk_rows, budget_bytes, extras)
    return res


def _ff_step(lw, res, x, alpha, w, mw, mx, s, n_bias, xin, want, ig, post, chunk_rows, budget_bytes, extras):
    """Decompose FF (through the heads), FF+RES and (post-LN) LN2, chunked over query rows."""
    B, n, d = x.shape
    fw: FFWeights = lw.ff
    dff = fw.d_ff
    sf = s  # (B, n, 1)
    if fw.gated:
        ua = mw @ fw.w_gate  # (n, H, d')
        ub = mw @ fw.w_up
        uxa, uxb = mx @ fw.w_gate, mx @ fw.w_up
        bias_a = n_bias @ fw.w_gate + (fw.b_gate if fw.b_gate is not None else 0)
        bias_b = n_bias @ fw.w_up + (fw.b_up if fw.b_up is not None else 0)
        a_tot = xin @ fw.w_gate + (fw.b_gate if fw.b_gate is not None else 0)
        b_tot = xin @ fw.w_up + (fw.b_up if fw.b_up is not None else 0)
        i1, i2 = gated_integrals(fw.act, a_tot, b_tot, ig)
        ff_bias_hidden = bias_a * i1 + bias_b * i2
        uab = torch.cat([ua, ub], dim=-1)  # (B, n, H, 2 d')
        uxab = torch.cat([uxa, uxb], dim=-1)
        del ua, ub
    else:
        u = mw @ fw.w1
        ux = mx @ fw.w1
        bias_p = n_bias @ fw.w1 + (fw.b1 if fw.b1 is not None else 0)
        p_tot = xin @ fw.w1 + (fw.b1 if fw.b1 is not None else 0)
        kappa, g0 = elementwise_kappa(fw.act, p_tot, ig)
        ff_bias_hidden = bias_p * kappa + g0
    ff_bias = ff_bias_hidden @ fw.w2 + (fw.b2 if fw.b2 is not None else 0)  # (n, d)
    res_bias = n_bias if post else output_bias(lw.attn, d, x).expand(B, n, d)

    ff_total = ff_forward(fw, xin)  # the un-decomposed FF output: fixes the following norm's scale
    lay = lw.layout
    resid = xin if post else res.sums[lay.attn_res]
    after_res = resid + ff_total
    if post:
        s2 = norm_scale(lw.ln2, after_res)
        beta2 = lw.ln2.bias if lw.ln2.bias is not None else torch.zeros(d, device=x.device, dtype=x.dtype)

    ff_name, ffres_name, ln2_name = lay.ff_after, lay.scope_after("RES"), lay.whole_layer
    maps_ff = torch.empty(B, n, n, dtype=torch.float32, device=x.device) if ff_name in want else None
    maps_ffres = torch.empty(B, n, n, dtype=torch.float32, device=x.device) if ffres_name in want else None
    maps_ln2 = torch.empty(B, n, n, dtype=torch.float32, device=x.device) if post and ln2_name in want else None
    sum_ff = torch.zeros(B, n, d, dtype=x.dtype, device=x.device)
    sum_ffres = torch.zeros_like(sum_ff)

    c = chunk_rows or default_chunk_rows(n, d, fw.d_ff, budget_bytes=budget_bytes, itemsize=x.element_size(),
                                        gated=fw.gated, batch=B)
    inv_all = 1.0 / sf  # (B, n, 1)
    # Chunks are source-major, (n_src, c, .): every head-sum is one batched GEMM over the source
    # token, the FF second matmul is one (n c, d') x (d', d) GEMM, and the diagonal (residual) terms
    # are a strided view. 1/s_i is folded into the chunk's attention rows once.
    for start in range(0, n, c):
        stop = min(n, start + c)
        cc = stop - start
        a_c = alpha[:, :, start:stop]  # (B, H, c, n)
        inv = inv_all[:, start:stop]  # (B, c, 1)
        # (B, n, c, H), rows scaled by 1/s_i
        a_s = (a_c * inv.unsqueeze(1)).permute(0, 3, 2, 1).contiguous()
        if fw.gated:
            # gate and up terms in one GEMM over the source token: (B, n, c, 2 d'); the hidden terms
            # overwrite the gate half in place and feed the second matmul as a strided 2-D view
            pab = a_s @ uab
            _src_diag(pab, start).add_((uxab[:, start:stop] * inv).transpose(-1, -2))
            hidden = pab[..., :dff].mul_(i1[:, None, start:stop]).addcmul_(pab[..., dff:], i2[:, None, start:stop])
            f = torch.mm(pab.view(B * n * cc, 2 * dff)[:, :dff], fw.w2).view(B, n, cc, d)  # the n^2 d d' part
            del pab, hidden
        else:
            p = a_s @ u  # (B, n, c, d')
            _src_diag(p, start).add_((ux[:, start:stop] * inv).transpose(-1, -2))
            hidden = p.mul_(kappa[:, None, start:stop])
            f = hidden @ fw.w2  # (B, n, c, d): the n^2 d d' part
            del hidden
        sum_ff[:, start:stop] = f.sum(1)
        if maps_ff is not None:
            maps_ff[:, start:stop] = _norm32(f).transpose(-1, -2)
        # residual terms: post = ATB terms (normalised), pre = ATTN + RES terms
        if post:
            r = a_s @ mw
            _src_diag(r, start).add_((mx[:, start:stop] * inv).transpose(-1, -2))
        else:
            r = attn_terms_src(a_c, w)
            _src_diag(r, start).add_(x[:, start:stop].transpose(-1, -2))
        t = f.add_(r)
        del r
        sum_ffres[:, start:stop] = t.sum(1)
        if maps_ffres is not None:
            maps_ffres[:, start:stop] = _norm32(t).transpose(-1, -2)
        if maps_ln2 is not None:
            # ||M(t)|| / s2_i with M = LN2's linear part, in place on t (no longer needed)
            if lw.ln2.kind != "RMSNorm":
                t.sub_(t.mean(-1, keepdim=True))
            t.mul_(lw.ln2.weight)
            maps_ln2[:, start:stop] = _norm32(t).transpose(-1, -2) / s2[:, start:stop].float()
        del t
    if post:
        # LN2 is linear with its scale frozen: the sum of its terms is M(sum of FFRES terms) / s2
        sum_ln2 = norm_linear(lw.ln2, sum_ffres) / s2

    res.sums[ff_name] = sum_ff + ff_bias
    res.sums[ffres_name] = sum_ffres + res_bias + ff_bias
    res.bias[ff_name] = ff_bias
    res.bias[ffres_name] = res_bias + ff_bias
    if maps_ff is not None:
        res.maps[ff_name] = maps_ff
    if maps_ffres is not None:
        res.maps[ffres_name] = maps_ffres
    if post:
        ln2_bias = norm_linear(lw.ln2, res_bias + ff_bias) / s2 + beta2
        res.sums[ln2_name] = sum_ln2 + ln2_bias
        res.bias[ln2_name] = ln2_bias
        if maps_ln2 is not None:
            res.maps[ln2_name] = maps_ln2
    if extras:
        res.extras["ff"] = ff_total
        res.extras["residual"] = resid
        follow = lw.ln2 if post else lw.next_norm
        if follow is not None:
            s_f = norm_scale(follow, after_res)
            res.extras["ln_ff"] = norm_linear(follow, ff_total) / s_f
            res.extras["ln_weight"] = follow.weight


def decompose_batch(
    lw: LayerWeights,
    x: Tensor,
    alpha: Tensor,
    lengths: list[int],
    *,
    maps: Iterable[str] = (),
    ratios: bool = False,
    refs: dict[str, Tensor] | None = None,
    extras: bool = False,
    ig: IGOptions = IGOptions(),
    chunk_rows: int | None = None,
    budget_bytes: int = 512 << 20,
) -> list[LayerResult]:
    """Decompose one layer for a right-padded batch at once (one set of GEMMs for all sequences).

    Args:
        x: (B, n_max, d) layer inputs; alpha: (B, H, n_max, n_max) probabilities; ``lengths`` the real
            lengths; refs: (B, n_max, d) per check point. Other arguments as in `decompose_layer`;
            ``budget_bytes`` bounds the whole batch's chunk.
    Returns:
        One `LayerResult` per sequence over its real tokens only. Pads are masked exactly: their
        inputs and attention probabilities (as queries and as keys) are set to zero, so every term a
        real token receives from a pad is an exact zero and pad rows are dropped. Equal to
        `decompose_layer` on each sequence alone up to float rounding (the GEMM shapes differ).
    """
    if lw.layout in (SANDWICH, PARALLEL):  # decompose/layouts.py works one sequence at a time
        return [decompose_layer(lw, x[b, :n], alpha[b, :, :n, :n], maps=maps, ratios=ratios, extras=extras, ig=ig,
                                refs=None if refs is None else {k: t[b, :n] for k, t in refs.items()},
                                chunk_rows=chunk_rows, budget_bytes=budget_bytes)
                for b, n in enumerate(lengths)]
    B, n_max, _ = x.shape
    real = torch.arange(n_max, device=x.device)[None, :] < torch.tensor(lengths, device=x.device)[:, None]
    keep = real.to(x.dtype)
    x = x * keep[..., None]
    alpha = alpha * (keep[:, None, :, None] * keep[:, None, None, :]).to(alpha.dtype)
    full = _decompose(lw, x, alpha, _wanted(lw, maps), ratios, extras, ig, chunk_rows, budget_bytes)
    out = []
    for b, n in enumerate(lengths):
        r = _take(full, b, n)
        _errors(r, None if refs is None else {k: t[b, :n] for k, t in refs.items()})
        out.append(r)
    return out
