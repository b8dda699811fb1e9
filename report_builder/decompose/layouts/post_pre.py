"""The post-LN and pre-LN layouts (SPEC §1), with their fast paths (§6), batched.

post-LN (BERT family):  x' = LN1(x + ATTN(x)),   y = LN2(x' + FF(x'))
    scopes ATB (= ATTNRESLN), ATBFF, ATBFFRES, ATBFFRESLN; K21 intermediates ATTN, ATTNRES.
pre-LN (GPT-2, Llama):  x' = x + ATTN(LN1(x)), y = x' + FF(LN2(x'))
    scopes ATB (= LN1+ATTN+RES), ATBLN, ATBLNFF, ATBLNFFRES; intermediates LN1, ATTN.

Both share one structure: the FF input term is ``(1/s_i)(sum_h alpha^h_ij M w^h_j + delta_ij M x_i)``
with M the linear part of the norm in front of FF and s_i its frozen scale, so one code path serves
both, and the first FF matmul goes through the heads (``U^h_j = M w^h_j W1``). The mathematics runs
on a batch (leading dimension B); one sequence is a batch of one.

Pitfall: the per-query chunk loop must never hold more than ``c * n * d'`` numbers; ``chunk_rows``
follows a memory budget (`decompose.chunks`).
"""
from __future__ import annotations

import torch
from torch import Tensor

from report_builder.decompose.attention import (
    attn_self, attn_terms_src, attn_total, causal_violation, gram_norms, output_bias, value_vectors,
)
from report_builder.decompose.chunks import ff_tiles, gpu_plan
from report_builder.decompose.feedforward import FFWeights, IGOptions, elementwise_kappa, gated_integrals
from report_builder.decompose.layer import LayerResult, LayerWeights, real_rows
from report_builder.decompose.layouts import ff_blocks
from report_builder.decompose.layouts.common import (
    DeviceCheck, add_diag, device_check, norm32, ratios_of, resolve_causal,
)
from report_builder.decompose.precision import HALF
from report_builder.decompose.norms import apply_norm, norm_linear, norm_scale


def decompose_one(lw: LayerWeights, x: Tensor, alpha: Tensor, want: set[str], *, ratios: bool, extras: bool,
                  ig: IGOptions, chunk_rows: int | None, budget_bytes: int | None, causal: bool, rule: str = "cpu",
                  precision: str = "float32") -> LayerResult:
    """One (unpadded) sequence, x (n, d), alpha (H, n, n): the batched mathematics on a batch of one."""
    n = x.shape[0]
    full = _decompose(lw, x.unsqueeze(0), alpha.unsqueeze(0), want, ratios, extras, ig, chunk_rows, budget_bytes,
                      causal, rule, precision)
    return _split(full, [n])[0]


def mask_pads(x: Tensor, alpha: Tensor, lengths: list[int]) -> tuple[Tensor, Tensor]:
    """Pads zeroed: their inputs and their probabilities as queries and as keys (nothing to do when every
    sequence fills the batch: multiplying by 1 changes no bit)."""
    B, n_max, _ = x.shape
    if all(n == n_max for n in lengths):
        return x, alpha
    keep = real_rows(tuple(lengths), n_max, str(x.device)).to(x.dtype)
    x = x * keep[..., None]
    alpha = alpha * (keep[:, None, :, None] * keep[:, None, None, :]).to(alpha.dtype)
    return x, alpha


def decompose_batch(lw: LayerWeights, x: Tensor, alpha: Tensor, lengths: list[int], want: set[str], *, ratios: bool,
                    extras: bool, ig: IGOptions, chunk_rows: int | None, budget_bytes: int | None,
                    causal: bool | None, rule: str = "cpu", precision: str = "float32",
                    refs: dict[str, Tensor] | None = None,
                    check_causal: bool = False) -> tuple[list[LayerResult], DeviceCheck]:
    """A right-padded batch, x (B, n_max, d), alpha (B, H, n_max, n_max): one result per sequence over
    its real tokens. Pads are masked exactly (their inputs and probabilities, as queries and as keys,
    are zeroed), so every term a real token receives from a pad is an exact zero. ``refs`` (B, n_max, d)
    and ``check_causal`` (GPU rule, ``causal=True``: whether the masked probabilities are causal): the
    errors of the whole batch and the check, on the device (the returned `DeviceCheck`; nothing read here)."""
    x, alpha = mask_pads(x, alpha, lengths)
    flag = causal_violation(alpha) if check_causal else None
    full = _decompose(lw, x, alpha, want, ratios, extras, ig, chunk_rows, budget_bytes,
                      resolve_causal(alpha, causal, rule), rule, precision, lengths)
    return _split(full, lengths), device_check(full.sums, refs, lengths, flag)


def _split(full: LayerResult, lengths: list[int]) -> list[LayerResult]:
    """Each sequence of a batched result, its real tokens only (shared (d,) tensors as they are), with one
    ``unbind`` per tensor instead of two indexing calls per tensor and sequence (per-call work that a GPU
    waits on: ~30 % of a small batch's wall time)."""
    out = [LayerResult() for _ in lengths]
    for part in ("maps", "ratios", "sums", "bias", "extras"):
        for k, v in getattr(full, part).items():
            if part in ("sums", "bias", "extras") and v.dim() == 1:  # shared (d,) tensors as they are
                for r in out:
                    getattr(r, part)[k] = v
                continue
            n_max = v.shape[1]
            for r, t, n in zip(out, v.unbind(0), lengths):
                if n < n_max:
                    t = t[:n, :n] if part == "maps" else t[:n]
                getattr(r, part)[k] = t
    return out




def _decompose(lw: LayerWeights, x: Tensor, alpha: Tensor, want: set[str], ratios: bool, extras: bool,
               ig: IGOptions, chunk_rows: int | None, budget_bytes: int | None, causal: bool, rule: str = "cpu",
               precision: str = "float32", lengths: list[int] | None = None) -> LayerResult:
    """The layer's mathematics on a batch: x (B, n, d), alpha (B, H, n, n); results keep the batch
    dimension ((B, n, n) maps, (B, n) ratios, (B, n, d) sums; token-independent bias terms (d,)).
    ``causal``: alpha is causal, every n^2 step covers only the pairs j <= i. ``rule``: the FF step's
    device class (`chunks.rule_class`: ``cpu`` chunks, ``gpu`` blocks, `ff_blocks`); ``precision``: the
    GPU rule's pair-GEMM mode."""
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
    total = attn_total(alpha, w, causal)
    res.sums["ATTN"] = total + b_o
    xres = res.sums["ATTN"] + x  # ATTN + RES: post LN1 input, pre x'
    res.sums[lay.attn_res] = xres
    res.bias["ATTN"] = res.bias[lay.attn_res] = b_o

    # --- the norm in front of FF (post: LN1, pre: LN2), frozen at the real input's scale
    nrm = lw.ln1 if post else lw.ln2
    s = norm_scale(nrm, xres)  # (B, n, 1)
    beta = nrm.bias if nrm.bias is not None else torch.zeros_like(b_o)
    ln_scope = lay.ff_input
    # FF is decomposed only when an FF scope map or the K24 extras are asked for: the ratios and the
    # attention maps never pay the n^2 d d' cost (their checks stop at the norm in front of FF)
    ff_wanted = bool(want & set(lay.ff_scopes)) or extras
    mw = norm_linear(nrm, w) if ff_wanted or want & {"ATTNRESLN-N", ln_scope} else None  # only where read
    mx = norm_linear(nrm, x) if ff_wanted else None
    n_bias = norm_linear(nrm, b_o.expand(B, n, d)) / s + beta  # (B, n, d) bias term after the norm
    xin = norm_linear(nrm, xres) / s + beta  # FF input (post: ATB, pre: ATBLN)
    res.sums[ln_scope] = xin
    res.bias[ln_scope] = n_bias

    need_self = ratios or bool(want & {"ATTNRES-N", "ATTNRESLN-N", lay.attn_res, ln_scope})
    if need_self:
        self_attn = attn_self(alpha, w)  # (B, n, d)
    a_mean = alpha.mean(1) if ratios or want & {"ATTN-W", "ATTNRES-W"} else None

    # --- K21 maps via the Gram identity (diagonal computed explicitly)
    if "ATTN-W" in want:
        res.maps["ATTN-W"] = a_mean.float()
    if "ATTNRES-W" in want:
        eye = torch.eye(n, device=x.device, dtype=alpha.dtype)
        res.maps["ATTNRES-W"] = (0.5 * a_mean + 0.5 * eye).float()
    # pre-LN: the ATTN + RES check point is also a K24 scope (ATB); post-LN: it is not (ATTNRES)
    attn_res_map = lay.attn_res in lay.scopes and lay.attn_res in want
    g_w = gram_norms(alpha, w, causal) if want & {"ATTN-N", "ATTNRES-N"} or attn_res_map else None
    if "ATTN-N" in want:
        res.maps["ATTN-N"] = g_w
    if want & {"ATTNRES-N"} or attn_res_map:
        m = g_w.clone() if "ATTN-N" in want else g_w
        m.diagonal(dim1=-2, dim2=-1).copy_(norm32(self_attn + x))
        if "ATTNRES-N" in want:
            res.maps["ATTNRES-N"] = m
        if attn_res_map:
            res.maps[lay.attn_res] = m
    if want & {"ATTNRESLN-N", ln_scope}:
        m = gram_norms(alpha, mw, causal) / s.float()
        m.diagonal(dim1=-2, dim2=-1).copy_(norm32(norm_linear(nrm, self_attn + x) / s))
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
        m_ctx, m_self = norm_linear(nrm, torch.stack([ctx, self_res])).unbind(0)  # the norm's linear part, once
        res.ratios.update(ratios_of({"ATTN-N": (ctx, self_attn), "ATTNRES-N": (ctx, self_res),
                                     "ATTNRESLN-N": (m_ctx, m_self)}))

    if ff_wanted and rule == "gpu":
        plan = gpu_plan(n, d, lw.ff.d_ff, budget_bytes=budget_bytes, batch=B, causal=causal,
                        gated=lw.ff.gated, itemsize=x.element_size(), reduced=precision in HALF, rows=chunk_rows,
                        lengths=lengths)
        ff_blocks.ff_step(lw, res, x, alpha, w, mw, mx, s, n_bias, xin, want, ig, post, plan, extras, causal,
                          precision)
    elif ff_wanted:
        _ff_step(lw, res, x, alpha, w, mw, mx, s, n_bias, xin, want, ig, post, chunk_rows,
                 budget_bytes, extras, causal)
    return res


def _into(acc: Tensor, start: int, stop: int, part: Tensor, first: bool) -> None:
    """A chunk's sum over its sources: the first tile's sum written, a later tile's added."""
    if first:
        acc[:, start:stop] = part
    else:
        acc[:, start:stop] += part


def _ff_terms(fw: FFWeights, a_s: Tensor, u: Tensor, ux: Tensor, g1: Tensor, g2: Tensor | None, j0: int,
              start: int) -> Tensor:
    """FF output terms (B, S, c, d) of one tile: sources ``j0 ..`` of query rows ``start ..``.

    ``a_s`` (B, S, c, H): the tile's probabilities, rows scaled by 1/s_i; ``u`` (B, S, H, k d'): the
    sources' head vectors through the first projection(s); ``ux`` (B, c, k d'): the rows' residual
    vectors through them, scaled; ``g1``, ``g2``: the rows' IG factors (element-wise: kappa; gated:
    I1, I2). Gated: gate and up terms come from one GEMM over the source token, the hidden terms
    overwrite the gate half in place and feed the second matmul as a strided 2-D view.
    """
    p = a_s @ u  # (B, S, c, k d')
    add_diag(p, j0, start, ux)
    B, S, c = p.shape[:3]
    if fw.gated:
        dff = fw.d_ff
        p[..., :dff].mul_(g1).addcmul_(p[..., dff:], g2)
        return torch.mm(p.view(B * S * c, 2 * dff)[:, :dff], fw.w2).view(B, S, c, -1)  # the n^2 d d' part
    return p.mul_(g1) @ fw.w2  # the n^2 d d' part


def _ff_step(lw, res, x, alpha, w, mw, mx, s, n_bias, xin, want, ig, post, chunk_rows, budget_bytes, extras, causal):
    """Decompose FF (through the heads), FF+RES and (post-LN) LN2, chunked over query rows (causal:
    each chunk over its source prefix only; the maps are exact zeros beyond it)."""
    B, n, d = x.shape
    fw: FFWeights = lw.ff
    dff = fw.d_ff
    sf = s  # (B, n, 1)
    # the first projection(s) of everything FF reads, in one GEMM (gated: [W_gate | W_up], both at once): the
    # head vectors (B, n, H, k d') and x through the norm, the real FF input and the bias term
    u_heads, u_x, pre_tot, pre_bias = fw.project_all(mw, mx, xin, n_bias)
    pre_tot = fw.with_bias(pre_tot)  # the real FF input's pre-activations (biases included)
    pre_bias = fw.with_bias(pre_bias)  # the bias term's
    if fw.gated:
        uab, uxab = u_heads, u_x
        i1, i2 = gated_integrals(fw.act, pre_tot[..., :dff], pre_tot[..., dff:], ig)
        ff_bias_hidden = pre_bias[..., :dff] * i1 + pre_bias[..., dff:] * i2
    else:
        u, ux = u_heads, u_x
        kappa, g0 = elementwise_kappa(fw.act, pre_tot, ig)
        ff_bias_hidden = pre_bias * kappa + g0
    # the bias term's FF output and the un-decomposed FF output (it fixes the following norm's scale): one GEMM
    rows = ff_bias_hidden.numel() // dff
    both = torch.cat([ff_bias_hidden.reshape(rows, dff), fw.hidden(pre_tot).reshape(-1, dff)]) @ fw.w2
    ff_bias = both[:rows].view(B, n, d) + (fw.b2 if fw.b2 is not None else 0)  # (B, n, d)
    ff_total = both[rows:].view(B, n, d)
    if fw.b2 is not None:
        ff_total = ff_total + fw.b2
    res_bias = n_bias if post else output_bias(lw.attn, d, x).expand(B, n, d)
    lay = lw.layout
    resid = xin if post else res.sums[lay.attn_res]
    after_res = resid + ff_total
    if post:
        s2 = norm_scale(lw.ln2, after_res)
        beta2 = lw.ln2.bias if lw.ln2.bias is not None else torch.zeros(d, device=x.device, dtype=x.dtype)

    ff_name, ffres_name, ln2_name = lay.ff_after, lay.scope_after("RES"), lay.whole_layer
    new_map = torch.zeros if causal else torch.empty  # causal: the pairs j > i are never written
    maps_ff = new_map(B, n, n, dtype=torch.float32, device=x.device) if ff_name in want else None
    maps_ffres = new_map(B, n, n, dtype=torch.float32, device=x.device) if ffres_name in want else None
    maps_ln2 = new_map(B, n, n, dtype=torch.float32, device=x.device) if post and ln2_name in want else None
    sum_ff = torch.zeros(B, n, d, dtype=x.dtype, device=x.device)
    sum_ffres = torch.zeros_like(sum_ff)

    c, tile = (chunk_rows, n) if chunk_rows else ff_tiles(n, d, fw.d_ff, budget_bytes=budget_bytes,
                                                          itemsize=x.element_size(), gated=fw.gated, batch=B)
    inv_all = 1.0 / sf  # (B, n, 1)
    # Chunks are source-major, (n_src, c, .): every head-sum is one batched GEMM over the source
    # token, the FF second matmul is one (n c, d') x (d', d) GEMM, and the diagonal (residual) terms
    # are a strided view. 1/s_i is folded into the chunk's attention rows once. Long sequences cut a
    # chunk's sources into tiles (`chunks.ff_tiles`); their partial sums add up in source order.
    for start in range(0, n, c):
        stop = min(n, start + c)
        m = stop if causal else n  # the sources these rows read
        a_c = alpha[:, :, start:stop, :m]  # (B, H, c, m)
        inv = inv_all[:, start:stop]  # (B, c, 1)
        # (B, m, c, H), rows scaled by 1/s_i
        a_s = (a_c * inv.unsqueeze(1)).permute(0, 3, 2, 1).contiguous()
        for j0 in range(0, m, tile):
            j1 = min(m, j0 + tile)
            first = j0 == 0
            f = _ff_terms(fw, a_s[:, j0:j1], uab[:, j0:j1] if fw.gated else u[:, j0:j1],
                          (uxab if fw.gated else ux)[:, start:stop] * inv, i1[:, None, start:stop] if fw.gated
                          else kappa[:, None, start:stop], i2[:, None, start:stop] if fw.gated else None, j0, start)
            _into(sum_ff, start, stop, f.sum(1), first)
            if maps_ff is not None:
                maps_ff[:, start:stop, j0:j1] = norm32(f).transpose(-1, -2)
            # residual terms: post = ATB terms (normalised), pre = ATTN + RES terms
            if post:
                r = a_s[:, j0:j1] @ mw[:, j0:j1]
                add_diag(r, j0, start, mx[:, start:stop] * inv)
            else:
                r = attn_terms_src(a_c[..., j0:j1], w[:, j0:j1])
                add_diag(r, j0, start, x[:, start:stop])
            t = f.add_(r)
            del r
            _into(sum_ffres, start, stop, t.sum(1), first)
            if maps_ffres is not None:
                maps_ffres[:, start:stop, j0:j1] = norm32(t).transpose(-1, -2)
            if maps_ln2 is not None:
                # ||M(t)|| / s2_i with M = LN2's linear part, in place on t (no longer needed)
                if lw.ln2.kind != "RMSNorm":
                    t.sub_(t.mean(-1, keepdim=True))
                t.mul_(lw.ln2.weight)
                maps_ln2[:, start:stop, j0:j1] = norm32(t).transpose(-1, -2) / s2[:, start:stop].float()
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

