"""Naive reference decomposition written straight from the formulas (test oracle, benchmark baseline).

Materialises the per-head term tensor (H, n, n, d) exactly as the K21 authors' code does, loops over
heads, and builds every scope's (n, n, d) terms explicitly. Slow and memory-hungry by design: use it
only on short sequences. Pitfall: keep it independent of the fast path (no shared helpers beyond the
norm weights and activation lookup), or it stops being an oracle.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from report_builder.decompose.feedforward import activation


def _ln_lin(nw, t):
    return t * nw.weight if nw.kind == "RMSNorm" else (t - t.mean(-1, keepdim=True)) * nw.weight


def _ln_scale(nw, u):
    if nw.kind == "RMSNorm":
        return torch.sqrt((u * u).mean(-1, keepdim=True) + nw.eps)
    return torch.sqrt(((u - u.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + nw.eps)


def _norm_terms(nw, terms, bias, total):
    """Frozen-scale norm applied to terms (n, n, d) and bias (n, d) given the real total (n, d)."""
    s = _ln_scale(nw, total)  # (n, 1)
    t = _ln_lin(nw, terms) / s.unsqueeze(1)
    b = _ln_lin(nw, bias) / s + (nw.bias if nw.bias is not None else 0)
    return t, b


def _ig_elementwise(act, p_terms, p_bias):
    """IG over n + 1 summands by the definition, with a fine trapezoid rule (2001 points)."""
    p = p_terms.sum(1) + p_bias  # (n, d')
    ts = torch.linspace(0, 1, 2001, dtype=torch.float64)
    grads = []
    for t in ts:
        with torch.enable_grad():  # works under no_grad / inference callers too
            z = (p.double() * t).requires_grad_(True)
            (g,) = torch.autograd.grad(act(z).sum(), z)
        grads.append(g)
    g = torch.stack(grads)  # (T, n, d')
    avg = torch.trapezoid(g, ts, dim=0).to(p.dtype)
    g0 = act(torch.zeros((), dtype=p.dtype))
    return p_terms * avg.unsqueeze(1), p_bias * avg + g0


def _ig_elementwise_closed(act, p_terms, p_bias):
    """Closed-form IG over the n + 1 summands, computed naively on the full (n, n, d') terms.

    ``kappa = (g(p) - g(0)) / p`` (``g'(0)`` by autograd where p == 0); written here from the formula,
    independently of the fast path's `elementwise_kappa`.
    """
    p = p_terms.sum(1) + p_bias  # (n, d')
    pd = p.double()
    g0 = act(torch.zeros((), dtype=torch.float64))
    with torch.enable_grad():
        z = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        d0 = float(torch.autograd.grad(act(z).sum(), z)[0])
    g0 = float(g0)
    kappa = torch.where(pd == 0, d0, (act(pd) - g0) / torch.where(pd == 0, torch.ones_like(pd), pd))
    kappa = kappa.to(p.dtype)
    return p_terms * kappa.unsqueeze(1), p_bias * kappa + g0


def _ig_gated(act, a_terms, b_terms, a_bias, b_bias):
    """IG of act(a) * b along the straight path, by a fine Gauss-Legendre rule in float64."""
    a = (a_terms.sum(1) + a_bias).double()
    b = (b_terms.sum(1) + b_bias).double()
    x, wq = np.polynomial.legendre.leggauss(200)
    ts, ws = (x + 1) / 2, wq / 2
    i1 = torch.zeros_like(a)
    i2 = torch.zeros_like(a)
    for t, w in zip(ts, ws):
        with torch.enable_grad():
            z = (a * float(t)).requires_grad_(True)
            (g,) = torch.autograd.grad(act(z).sum(), z)
        i1 += w * g * float(t) * b
        i2 += w * act(a * float(t))
    i1, i2 = i1.to(a_terms.dtype), i2.to(a_terms.dtype)
    return a_terms * i1.unsqueeze(1) + b_terms * i2.unsqueeze(1), a_bias * i1 + b_bias * i2


def reference_layer(lw, x: Tensor, alpha: Tensor, *, ig: str = "trapezoid") -> dict[str, tuple[Tensor, Tensor]]:
    """All scopes' full terms for one layer.

    Args:
        lw: `LayerWeights`.
        x: (n, d) layer input; alpha: (H, n, n).
        ig: element-wise FF IG by ``"trapezoid"`` (default: 2001-point rule over autograd gradients,
            the oracle) or ``"closed"`` (the closed-form factor, still applied to the full (n, n, d')
            terms; the naive benchmark baseline). Gated FFs always use the 200-point Gauss-Legendre rule.
    Returns:
        scope name -> (terms (n, n, d), bias (n, d)) for the K21 intermediates (``ATTN``, ``ATTNRES``)
        and every scope of the layer.
    """
    aw, fw = lw.attn, lw.ff
    n, d = x.shape
    H, dh = aw.n_heads, aw.head_dim
    rep = H // aw.n_kv_heads
    lay = lw.layout
    post = not lay.norm_first  # written for the two layouts of `schema.LAYOUTS`
    if post:
        y = x
    else:
        y = _ln_lin(lw.ln1, x) / _ln_scale(lw.ln1, x) + (lw.ln1.bias if lw.ln1.bias is not None else 0)
    b_o = aw.b_o if aw.b_o is not None else torch.zeros(d, dtype=x.dtype, device=x.device)
    # (H, n, n, d) per-head terms, the way the K21 code does it
    per_head = torch.zeros(H, n, n, d, dtype=x.dtype, device=x.device)
    for h in range(H):
        g = h // rep
        wv = aw.w_v[:, g * dh:(g + 1) * dh]
        bv = aw.b_v[g * dh:(g + 1) * dh] if aw.b_v is not None else 0
        wo = aw.w_o[h * dh:(h + 1) * dh]
        fx = (y @ wv + bv) @ wo  # (n, d)
        per_head[h] = alpha[h].unsqueeze(-1) * fx.unsqueeze(0)
    attn = per_head.sum(0)
    out = {"ATTN": (attn, b_o.expand(n, d))}
    eye = torch.eye(n, dtype=x.dtype, device=x.device).unsqueeze(-1)
    res_terms = attn + eye * x.unsqueeze(0)
    res_bias = b_o.expand(n, d)
    total = res_terms.sum(1) + res_bias
    out[lay.attn_res] = (res_terms, res_bias)
    ffin_t, ffin_b = _norm_terms(lw.ln1 if post else lw.ln2, res_terms, res_bias, total)
    out[lay.ff_input] = (ffin_t, ffin_b)
    act = activation(fw.act)
    if fw.gated:
        a_t = ffin_t @ fw.w_gate
        a_b = ffin_b @ fw.w_gate + (fw.b_gate if fw.b_gate is not None else 0)
        b_t = ffin_t @ fw.w_up
        b_b = ffin_b @ fw.w_up + (fw.b_up if fw.b_up is not None else 0)
        h_t, h_b = _ig_gated(act, a_t, b_t, a_b, b_b)
    else:
        p_t = ffin_t @ fw.w1
        p_b = ffin_b @ fw.w1 + (fw.b1 if fw.b1 is not None else 0)
        if ig not in ("trapezoid", "closed"):
            raise ValueError(f"ig must be 'trapezoid' or 'closed', not {ig!r}")
        h_t, h_b = (_ig_elementwise_closed if ig == "closed" else _ig_elementwise)(act, p_t, p_b)
    ff_t = h_t @ fw.w2
    ff_b = h_b @ fw.w2 + (fw.b2 if fw.b2 is not None else 0)
    resid_t, resid_b = (ffin_t, ffin_b) if post else (res_terms, res_bias)
    out[lay.ff_after] = (ff_t, ff_b)
    fr_t, fr_b = resid_t + ff_t, resid_b + ff_b
    out[lay.scope_after("RES")] = (fr_t, fr_b)
    if post:
        out[lay.whole_layer] = _norm_terms(lw.ln2, fr_t, fr_b, fr_t.sum(1) + fr_b)
    return out


def reference_maps(terms: dict[str, tuple[Tensor, Tensor]]) -> dict[str, Tensor]:
    """``||z_{i<-j}||`` for every scope of `reference_layer`'s output."""
    return {k: t.norm(dim=-1) for k, (t, _) in terms.items()}


def reference_ratio(terms: Tensor) -> Tensor:
    """K21 mixing ratio from full terms (n, n, d): ||sum_{j!=i} t_ij|| / (that + ||t_ii||)."""
    n = terms.shape[0]
    idx = torch.arange(n)
    self_ = terms[idx, idx]
    ctx = terms.sum(1) - self_
    c, s = ctx.norm(dim=-1), self_.norm(dim=-1)
    return c / (c + s)
