"""The GPU rule's FF step of the post-/pre-LN layouts (`decompose.chunks.gpu_plan`): few, large kernels.

The same terms as `post_pre`'s chunk loop (the FF input term of pair (i, j) is
``(1/s_i)(sum_h alpha^h_ij M w^h_j + delta_ij M x_i)``, through the first projection per head and source),
laid out for a GPU:

- operands are built once per layer, source-major with the batch inside, ``(n_src, B, n_q, .)``, and the
  residual (diagonal) term rides along as one more "head": ``A[j, b, i] = [alpha^h_bij / s_bi, delta_ij /
  s_bi]`` and ``U[j, b] = [M w^h_bj, M x_bj] W1``, so one batched GEMM per row block writes a block's
  hidden terms straight into a buffer, the diagonal included;
- a buffer holds several row blocks (`FFPlan.groups`): the IG factor is applied per block in place (or
  while writing the 16-bit copy of a reduced precision), then **one GEMM per buffer** does the
  ``2 P d' d`` part (`precision.pair_mm`: float32, TF32, bfloat16 or float16 inputs, float32 output);
- the residual terms are added by one batched GEMM per block, in place (``F += A @ [M w, M x]``), the
  maps are written by one norm and one indexed copy per buffer, and each block's sums over its sources
  by one reduction: no per-tile loop, no host synchronisation.

Residual terms per pair are computed only for the maps that need them (the scope after RES, and LN2);
otherwise the sum after RES is the FF terms' sum plus the residual terms' sum (the total already
checked at the norm in front of FF). Results equal the CPU rule's to float rounding (~1e-7).

Pitfall: the buffers are ``P (k d' + d)`` numbers (`chunks.ff_pair_bytes`); the plan sizes them to the
budget, never this module. And no ``out=`` into a strided view (a permuted or row-sliced one): the step must
trace as one graph (tests/decompose/test_compiled_step.py), and TorchDynamo breaks the graph at such a write.
"""
from __future__ import annotations

from functools import lru_cache

import torch
from torch import Tensor

from report_builder.decompose.attention import output_bias
from report_builder.decompose.chunks import FFPlan
from report_builder.decompose.feedforward import FFWeights, elementwise_kappa, gated_integrals
from report_builder.decompose.layouts.common import norm32
from report_builder.decompose.norms import norm_linear, norm_scale
from report_builder.decompose.precision import input_dtype, pair_mm


def augmented(alpha: Tensor, inv: Tensor | None) -> Tensor:
    """``(n_src, B, n_q, H + 1)``: ``alpha[b, h, i, j] * inv[b, i]`` for the heads and ``delta_ij inv[b, i]`` as
    the last channel (``inv`` None: 1), contiguous."""
    B, H, n, _ = alpha.shape
    out = alpha.new_zeros(n, B, n, H + 1)
    out[..., :H].copy_(alpha.permute(3, 0, 2, 1))
    out[..., H].diagonal(dim1=0, dim2=2).fill_(1.0)
    if inv is not None:  # every channel times inv[b, i], in place (the zeros stay zeros: inv > 0)
        out.mul_(inv.unsqueeze(0))
    return out


def stacked(heads: Tensor, tokens: Tensor) -> Tensor:
    """``(n, B, H + 1, d)``: per-source head vectors (B, n, H, d) and the token's own vector (B, n, d) last."""
    B, n, H, d = heads.shape
    out = heads.new_empty(n, B, H + 1, d)
    out[:, :, :H].copy_(heads.transpose(0, 1))
    out[:, :, H].copy_(tokens.transpose(0, 1))
    return out


@lru_cache(maxsize=8)
def _map_index(blocks: tuple, B: int, n: int, device: str) -> Tensor:
    """Flat positions in a (B, n, n) map of a group's pairs (its ``blocks``), in buffer order (source,
    sequence, row); cached per shape (built on the device once)."""
    parts = []
    for seq, start, stop, src in blocks:
        j = torch.arange(src, device=device).view(-1, 1, 1)
        bb = (torch.arange(B, device=device) if seq < 0 else torch.arange(seq, seq + 1, device=device)).view(1, -1, 1)
        i = torch.arange(start, stop, device=device).view(1, 1, -1)
        parts.append((bb * (n * n) + i * n + j).reshape(-1))
    return torch.cat(parts)


def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``x (..., k) @ w (k, m) + b``: one GEMM with the bias (addmm)."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    out = torch.mm(x2, w) if b is None else torch.addmm(b, x2, w)
    return out.view(*lead, w.shape[1])


def ff_step(lw, res, x, alpha, w, mw, mx, s, n_bias, xin, want, ig, post, plan: FFPlan, extras, causal,
            precision: str = "float32") -> None:
    """Decompose FF, FF+RES and (post-LN) LN2 of a batch by `plan`'s blocks, into ``res`` (maps, sums,
    bias terms, extras), as `post_pre._ff_step` does by the CPU rule's chunks."""
    B, n, d = x.shape
    H = alpha.shape[1]
    fw: FFWeights = lw.ff
    dff = fw.d_ff
    kd = 2 * dff if fw.gated else dff
    lay = lw.layout
    dev = x.device
    w1 = fw.first()
    b1 = fw.first_bias()
    pre_tot = _linear(xin, w1, b1)  # the real FF input's pre-activations (biases included)
    pre_bias = _linear(n_bias, w1, b1)  # the bias term's
    if fw.gated:
        i1, i2 = gated_integrals(fw.act, pre_tot[..., :dff], pre_tot[..., dff:], ig, sync_free=True,
                                 max_numbers=max(1 << 20, plan.budget_bytes // 32))
        ff_bias_hidden = pre_bias[..., :dff].mul_(i1).addcmul_(pre_bias[..., dff:], i2)
    else:
        kappa, g0 = elementwise_kappa(fw.act, pre_tot, ig)
        ff_bias_hidden = pre_bias.mul_(kappa)
        if g0 != 0.0:
            ff_bias_hidden += g0
    hidden_tot = fw.hidden(pre_tot)
    ff_bias = _linear(ff_bias_hidden, fw.w2, fw.b2)
    ff_total = _linear(hidden_tot, fw.w2, fw.b2)  # the un-decomposed FF output: fixes the next norm's scale
    b_o = output_bias(lw.attn, d, x)
    resid = xin if post else res.sums[lay.attn_res]
    after_res = resid + ff_total
    s2 = norm_scale(lw.ln2, after_res) if post else None

    ff_name, ffres_name, ln2_name = lay.ff_after, lay.scope_after("RES"), lay.whole_layer
    want_ff, want_res, want_ln2 = ff_name in want, ffres_name in want, post and ln2_name in want
    need_res = want_res or want_ln2  # residual terms per pair: only for their maps
    new_map = torch.zeros if causal else torch.empty  # causal: pairs j > i outside the blocks never written
    maps = {k: new_map(B, n, n, dtype=torch.float32, device=dev)
            for k, on in ((ff_name, want_ff), (ffres_name, want_res), (ln2_name, want_ln2)) if on}

    A = augmented(alpha, torch.reciprocal(s))  # FF input terms: rows scaled by 1/s_i, the residual term on the diagonal
    U = stacked(mw, mx)  # (n, B, H + 1, d): [M w, M x]
    u = (U.view(-1, d) @ w1).view(n, B, H + 1, kd)
    if need_res and not post:  # pre-LN's residual terms are the ATTN + RES terms (alpha unscaled, x)
        A_res, V_res = augmented(alpha, None), stacked(w, x)
    else:
        A_res, V_res = A, U
    hdt = input_dtype(precision)
    w2 = fw.w2 if hdt == torch.float32 else fw.w2.to(hdt)
    # each block's sums over its sources, written by one reduction (`out=`) into a contiguous slice: rows of one
    # sequence in (B, n, d); row blocks of the whole batch only in a query-major (n, B, d) accumulator (an
    # `out=` into a strided slice is also what a compiled layer step cannot trace)
    qmajor = len(plan.blocks) > 1 and plan.blocks[0][0] < 0
    sum_ff = x.new_empty(n, B, d) if qmajor else x.new_empty(B, n, d)
    sum_res = (x.new_empty(n, B, d) if qmajor else x.new_empty(B, n, d)) if need_res else None

    def block_sum(acc: Tensor, terms: Tensor, bs: slice, nb: int, start: int, stop: int, src: int) -> None:
        v = terms.view(src, nb, stop - start, d)
        if qmajor:
            torch.sum(v.transpose(1, 2), 0, out=acc[start:stop])
        else:
            torch.sum(v, 0, out=acc[bs, start:stop])
    for g, (ga, gb) in enumerate(plan.groups):
        blocks = plan.blocks[ga:gb]
        sizes = [plan.block_pairs(blk) for blk in blocks]
        buf = x.new_empty(sum(sizes), kd)  # hidden terms, block after block, each (src, nb, rows, kd)
        hid = buf if hdt == torch.float32 and not fw.gated else None
        if hid is None:
            hid = buf[:, :dff] if hdt == torch.float32 else buf.new_empty(sum(sizes), dff, dtype=hdt)
        views = []
        off = 0
        for (seq, start, stop, src), size in zip(blocks, sizes):
            r = stop - start
            bs = slice(None) if seq < 0 else slice(seq, seq + 1)  # the batch, or one sequence of it
            nb = size // (r * src)
            p = buf[off:off + size].view(src * nb, r, kd)
            torch.bmm(A[:src, bs, start:stop].reshape(src * nb, r, H + 1), u[:src, bs].reshape(src * nb, H + 1, kd),
                      out=p)
            p = p.view(src, nb, r, kd)
            h = hid[off:off + size].view(src, nb, r, dff)
            if fw.gated:  # hidden = gate * I1 + up * I2 (in place in the gate half, or into the 16-bit copy)
                gate = p[..., :dff].mul_(i1[bs, start:stop])
                if hdt == torch.float32:  # h is the gate half itself (no `out=` into a strided view)
                    gate.addcmul_(p[..., dff:], i2[bs, start:stop])
                else:
                    torch.addcmul(gate, p[..., dff:], i2[bs, start:stop], out=h)
            else:
                torch.mul(p, kappa[bs, start:stop], out=h)
            views.append((bs, nb, start, stop, src, off, size))
            off += size
        f = pair_mm(hid, w2, precision)  # (P, d): the 2 P d' d part, one GEMM for the buffer
        del buf, hid
        idx = _map_index(blocks, B, n, str(dev)) if maps else None
        if want_ff:
            maps[ff_name].view(-1).index_put_((idx,), norm32(f))
        for bs, nb, start, stop, src, off, size in views:
            block_sum(sum_ff, f[off:off + size], bs, nb, start, stop, src)
        if not need_res:
            continue
        for bs, nb, start, stop, src, off, size in views:
            r = stop - start
            f[off:off + size].view(src * nb, r, d).baddbmm_(A_res[:src, bs, start:stop].reshape(src * nb, r, H + 1),
                                                           V_res[:src, bs].reshape(src * nb, H + 1, d))
        if want_res:
            maps[ffres_name].view(-1).index_put_((idx,), norm32(f))
        for bs, nb, start, stop, src, off, size in views:
            block_sum(sum_res, f[off:off + size], bs, nb, start, stop, src)
        if want_ln2:  # ||M(t)|| with M = LN2's linear part, in place on the terms (divided by s2 below)
            if lw.ln2.kind != "RMSNorm":
                f.sub_(f.mean(-1, keepdim=True))
            f.mul_(lw.ln2.weight)
            maps[ln2_name].view(-1).index_put_((idx,), norm32(f))
        del f
    if want_ln2:
        maps[ln2_name].div_(s2.float())
    if qmajor:  # (B, n, d) views; every result below is made with a (B, n, d) operand first, so it is contiguous
        sum_ff = sum_ff.transpose(0, 1)
        sum_res = None if sum_res is None else sum_res.transpose(0, 1)
    if sum_res is None:  # the residual terms' sum: the norm's input terms (post) or ATTN + RES (pre), less bias
        sum_res = (xin - n_bias if post else resid - b_o) + sum_ff
    res_bias = n_bias if post else b_o
    res.sums[ff_name] = ff_bias + sum_ff
    res.bias[ff_name] = ff_bias
    ffres_bias = res_bias + ff_bias
    res.bias[ffres_name] = ffres_bias
    res.maps.update(maps)
    if post:  # LN2 is linear with its scale frozen: its terms' sum is M(sum of FF+RES terms) / s2
        beta2 = lw.ln2.bias if lw.ln2.bias is not None else 0
        ln2_bias = norm_linear(lw.ln2, ffres_bias).div_(s2).add_(beta2)
        res.sums[ln2_name] = ln2_bias + norm_linear(lw.ln2, sum_res).div_(s2)
        res.bias[ln2_name] = ln2_bias
    res.sums[ffres_name] = ffres_bias + sum_res
    if extras:
        res.extras["ff"] = ff_total
        res.extras["residual"] = resid
        follow = lw.ln2 if post else lw.next_norm
        if follow is not None:
            res.extras["ln_ff"] = norm_linear(follow, ff_total) / norm_scale(follow, after_res)
            res.extras["ln_weight"] = follow.weight
