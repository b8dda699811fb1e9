"""Feed-forward blocks as sums over source tokens, through Integrated Gradients (IG).

Element-wise FF ``g(u W1 + b1) W2 + b2``: the pre-activation splits as p_i = sum_j p_{i<-j} + p_{i<-bias}.
IG with a zero baseline over these n+1 summands shares one path point, so it has the closed form
``IG_{i<-j} = p_{i<-j} * kappa_i``, ``kappa_i = (g(p_i) - g(0)) / p_i`` (limit g'(0) at p_i = 0), exact
completeness. ``g(0)`` (zero for GELU/ReLU/SiLU) and b2 go to the bias term.

Gated FF ``W_down(act(W_gate u) * W_up u)``: with per-neuron totals A = sum_j a_j, B = sum_j b_j,
IG on the straight path gives ``attr_j = a_j I1 + b_j I2`` with ``I1 = int_0^1 act'(tA) t B dt`` and
``I2 = int_0^1 act(tA) dt``, shared by all j; computed by composite Gauss-Legendre quadrature in float64 whose panel count
adapts to |A| per neuron (16 nodes for the usual |A| <= 4 instead of a fixed 128).

The optional m-step numerical IG (midpoint Riemann sum, as K24 did numerically) replaces the
integrals by sums over the path; it converges to the closed form as m grows.

Pitfall: activations must be evaluated in float32 (or higher) for kappa near p = 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from report_builder.decompose.options import IGOptions  # noqa: F401 - re-exported (torch-free home)
from report_builder.decompose.silu_ig import silu_integrals

# ---------------------------------------------------------------- activations


def _gelu(x: Tensor) -> Tensor:
    return torch.nn.functional.gelu(x)


def _gelu_tanh(x: Tensor) -> Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


def _relu(x: Tensor) -> Tensor:
    return torch.relu(x)


def _silu(x: Tensor) -> Tensor:
    return torch.nn.functional.silu(x)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": _gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "gelu_fast": _gelu_tanh,
    "relu": _relu,
    "silu": _silu,
    "swish": _silu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """Look up an element-wise activation by its HF config name."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unsupported activation {name!r}; supported: {sorted(ACTIVATIONS)}") from None


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _d_gelu(x: Tensor) -> Tensor:
    cdf = 0.5 * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))
    pdf = torch.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return cdf + x * pdf


def _d_gelu_tanh(x: Tensor) -> Tensor:
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
    th = torch.tanh(inner)
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)


def _d_silu(x: Tensor) -> Tensor:
    sg = torch.sigmoid(x)
    return sg * (1 + x * (1 - sg))


def _d_relu(x: Tensor) -> Tensor:
    return (x > 0).to(x.dtype)


_DERIVATIVES = {_gelu: _d_gelu, _gelu_tanh: _d_gelu_tanh, _silu: _d_silu, _relu: _d_relu}


def derivative(act: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """Element-wise derivative of ``act`` at ``x``: analytic for the known activations, else autograd."""
    d = _DERIVATIVES.get(act)
    if d is not None:
        return d(x)
    with torch.enable_grad():
        t = x.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(act(t).sum(), t)
    return g.detach()


@dataclass(frozen=True)
class FFWeights:
    """FF weights in row-vector convention.

    Element-wise: ``w1`` (d, d'), ``b1``, ``w2`` (d', d), ``b2``.
    Gated: ``w_gate``, ``w_up`` (d, d'), optional ``b_gate``/``b_up``, ``w2`` = W_down (d', d), ``b2``.
    """

    act: str
    gated: bool
    w1: Tensor | None  # element-wise: first matmul; gated: None
    b1: Tensor | None
    w2: Tensor
    b2: Tensor | None
    w_gate: Tensor | None = None
    b_gate: Tensor | None = None
    w_up: Tensor | None = None
    b_up: Tensor | None = None

    def to(self, device=None, dtype=None) -> "FFWeights":
        cv = lambda t: None if t is None else t.to(device=device, dtype=dtype)  # noqa: E731
        return FFWeights(self.act, self.gated, cv(self.w1), cv(self.b1), cv(self.w2), cv(self.b2),
                         cv(self.w_gate), cv(self.b_gate), cv(self.w_up), cv(self.b_up))

    @property
    def d_ff(self) -> int:
        return self.w2.shape[0]

    def first(self) -> Tensor:
        """The first projection's weight: W1 (d, d'), or for a gated FF ``[W_gate | W_up]`` (d, 2 d') in
        the weights' own memory order, so both projections are one GEMM (each column of a GEMM is
        computed as it is alone: the same numbers, bit for bit). Built on each call (not kept beside
        the model's weights)."""
        if not self.gated:
            return self.w1
        return torch.cat([self.w_gate.T, self.w_up.T]).T if self.w_gate.stride(0) == 1 else \
            torch.cat([self.w_gate, self.w_up], dim=1)

    def project(self, u: Tensor, bias: bool = True, w: Tensor | None = None) -> Tensor:
        """First projection(s) of ``u`` (..., d): element-wise ``u W1 (+ b1)`` (..., d'); gated
        ``[u W_gate (+ b_gate) | u W_up (+ b_up)]`` (..., 2 d'). ``w``: `first`, when already built.
        One row is a GEMV, whose numbers depend on the width: a gated one projects it twice."""
        if self.gated and u.numel() == u.shape[-1]:
            p = torch.cat([u @ self.w_gate, u @ self.w_up], dim=-1)
        else:
            p = u @ (self.first() if w is None else w)
        return self.with_bias(p) if bias else p

    def first_bias(self) -> Tensor | None:
        """The first projection's bias, (k d'): ``b1``, or gated ``[b_gate | b_up]`` with zeros for a missing
        half; None when there is none."""
        if not self.gated:
            return self.b1
        if self.b_gate is None and self.b_up is None:
            return None
        z = self.w2.new_zeros(self.d_ff)
        return torch.cat([z if t is None else t for t in (self.b_gate, self.b_up)])

    def with_bias(self, p: Tensor) -> Tensor:
        """``p`` (..., k d') from the first projection(s) plus their biases (a new tensor)."""
        b = self.first_bias()
        return p + 0 if b is None else p + b  # no bias: as ``u @ W + 0`` always did (a -0.0 becomes 0.0)

    def project_all(self, *parts: Tensor, w: Tensor | None = None) -> list[Tensor]:
        """Each of ``parts`` (..., d) through the first projection(s), without biases, as **one** GEMM: the
        weight is read (and packed by the BLAS) once instead of once per part, which dominates for short
        inputs on a CPU. Each part's rows are the ones `project` gives whenever the BLAS computes a row
        independently of the row count (here: parts of >= 12 rows); below that they may differ in the last
        bits. Returns views of the one product, in order."""
        d = parts[0].shape[-1]
        out = torch.cat([t.reshape(-1, d) for t in parts]) @ (self.first() if w is None else w)
        views, off = [], 0
        for t in parts:
            m = t.numel() // d
            views.append(out[off:off + m].view(*t.shape[:-1], out.shape[-1]))
            off += m
        return views

    def hidden(self, pre: Tensor) -> Tensor:
        """The hidden activations from the first projection(s) ``pre`` (`project` with biases)."""
        act = activation(self.act)
        return act(pre[..., :self.d_ff]) * pre[..., self.d_ff:] if self.gated else act(pre)

    def output(self, pre: Tensor) -> Tensor:
        """The FF output from the first projection(s) ``pre`` (`project` with biases)."""
        out = self.hidden(pre) @ self.w2
        return out + self.b2 if self.b2 is not None else out


def ff_forward(fw: FFWeights, u: Tensor) -> Tensor:
    """The ordinary FF output for inputs u (..., d)."""
    return fw.output(fw.project(u))


# ---------------------------------------------------------------- element-wise IG


def _at_zero(act: Callable[[Tensor], Tensor]) -> tuple[float, float]:
    zero = torch.zeros((), dtype=torch.float32)
    return float(act(zero)), float(derivative(act, zero.reshape(1))[0])


_AT_ZERO = {name: _at_zero(act) for name, act in ACTIVATIONS.items()}


def at_zero(act_name: str) -> tuple[float, float]:
    """``(g(0), g'(0))`` of an activation, as float32 numbers computed once, at import (Python floats: no
    device op, and nothing a compiled layer step would have to read back from a tensor)."""
    activation(act_name)  # an unknown name: its one error
    return _AT_ZERO[act_name]


def elementwise_kappa(act_name: str, p: Tensor, opts: IGOptions = IGOptions()) -> tuple[Tensor, float]:
    """Per-neuron IG factor ``kappa`` and ``g(0)`` for the pre-activation totals ``p`` (..., d').

    Closed form: ``(g(p) - g(0)) / p`` with ``g'(0)`` where p == 0. Numerical: midpoint rule
    ``mean_k g'(t_k p)`` with ``t_k = (k - 1/2) / m``. ``g(0)`` is a Python float.
    """
    act = activation(act_name)
    pf = p.float()
    g0, d0 = at_zero(act_name)
    if opts.method == "numerical":
        m = opts.steps
        kappa = torch.zeros_like(pf)
        for k in range(m):
            kappa += derivative(act, pf * ((k + 0.5) / m))
        kappa /= m
    else:
        at0 = pf == 0
        safe = torch.where(at0, 1.0, pf)
        num = act(pf) if g0 == 0.0 else act(pf) - g0  # x - 0.0 is x, bit for bit
        kappa = torch.where(at0, d0, num.div_(safe))
    return kappa.to(p.dtype), g0


# ---------------------------------------------------------------- gated IG


@lru_cache(maxsize=64)
def _gl_rule(nodes: int, panels: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(nodes)
    ts, ws = [], []
    for k in range(panels):
        a, b = k / panels, (k + 1) / panels
        ts.append(0.5 * (b - a) * x + 0.5 * (a + b))
        ws.append(0.5 * (b - a) * w)
    return np.concatenate(ts), np.concatenate(ws)


def _quad(f: Callable[[Tensor], Tensor], af: Tensor, ts, ws) -> Tensor:
    """``sum_k w_k f(t_k a)`` evaluated a few nodes at a time (bounded to ~8M numbers per step)."""
    flat = af.reshape(1, -1)
    out = torch.zeros(flat.shape[1], dtype=af.dtype, device=af.device)
    t_all = torch.as_tensor(ts, dtype=af.dtype, device=af.device)
    w_all = torch.as_tensor(ws, dtype=af.dtype, device=af.device)
    step = max(1, (8 << 20) // max(af.numel(), 1))
    g = _IN_PLACE.get(f, f)  # the path points are a fresh tensor: an activation may overwrite it
    for k in range(0, len(ts), step):
        t, w = t_all[k:k + step].view(-1, 1), w_all[k:k + step]
        out += w @ g(flat * t)  # the weighted node sum as one GEMV
    return out.view(af.shape)


_IN_PLACE: dict[Callable, Callable] = {_silu: lambda x: torch.nn.functional.silu(x, inplace=True), _relu: torch.relu_}
"""In-place forms of activations, the same numbers bit for bit: one large temporary fewer per node batch."""


def _panels(a_abs: Tensor, span: float) -> Tensor:
    """Panels of the composite rule per element: the smallest power of two ``P`` with ``P span >= |A|``.

    The integrands ``act(t A)`` have their nearest complex singularities (SiLU: ``t = i pi / A``; the
    GELUs are entire but grow like ``exp(t^2 A^2)`` off the axis) at a distance ~ ``1/|A|`` from the
    path, so a fixed number of nodes per ``span`` units of ``|A|`` keeps the rule's error uniform:
    16 nodes per 4 units stay below 2e-7 of ``|act(A)| + 0.01`` for SiLU, GELU and tanh-GELU on
    ``|A| <= 120`` (checked against a 16384-node float64 rule), under the float32 rounding of the terms.
    """
    p = torch.clamp(torch.ceil(a_abs / span), min=1)
    return torch.exp2(torch.ceil(torch.log2(p)))


def _adaptive_quad(f: Callable[[Tensor], Tensor], a: Tensor, nodes: int, span: float,
                   weight_t: bool = False) -> Tensor:
    """``int_0^1 f(t a) dt`` (times ``t`` when ``weight_t``) per element of ``a`` (float64), with an
    element-wise composite Gauss-Legendre rule: elements are grouped by their panel count
    (`_panels`), each group evaluated as one tensor op per node batch. Deterministic: the rule an
    element gets depends on its own value only."""
    panels = _panels(a.abs(), span)
    lo, hi = (float(v) for v in torch.aminmax(panels)) if panels.numel() else (1.0, 1.0)
    if lo == hi:  # one rule for all (the usual |A| <= 4): no selection needed
        ts, ws = _gl_rule(nodes, int(lo))
        return _quad(f, a, ts, ws * ts if weight_t else ws)
    counts = torch.unique(panels).tolist()
    out = torch.empty_like(a)
    for p in counts:
        sel = panels == p
        ts, ws = _gl_rule(nodes, int(p))
        if weight_t:
            ws = ws * ts
        out[sel] = _quad(f, a[sel], ts, ws)
    return out


def _gated_closed(act, af: Tensor, bf: Tensor, opts: "IGOptions", dtype) -> tuple[Tensor, Tensor]:
    """I2 by adaptive Gauss-Legendre quadrature in float64; I1 by parts, ``I1 = B (act(A) - I2) / A``,
    which needs no derivative.

    Where |A| is tiny the by-parts quotient cancels badly, so I1 is integrated directly there.
    Everything per neuron is float64 (n d' numbers: cheap next to the n^2 d d' term GEMM).
    """
    a64, b64 = af.double(), bf.double()
    i2 = _adaptive_quad(act, a64, opts.gl_nodes, opts.gl_span)
    small = a64.abs() < 1e-2
    safe = torch.where(small, torch.ones_like(a64), a64)
    i1 = b64 * (act(a64) - i2) / safe
    if bool(small.any()):
        a_s = a64[small]
        i1_s = _adaptive_quad(lambda z: derivative(act, z), a_s, opts.gl_nodes, opts.gl_span, weight_t=True)
        i1[small] = i1_s * b64[small]
    return i1.to(dtype), i2.to(dtype)


LADDER_EDGES = (4.0, 8.0, 16.0, 32.0)
"""The sync-free rule's panels in ``x = t A`` (`_gated_ladder`): ``[0, 4]`` with ``gl_nodes`` nodes (today's
rule for the usual |A| <= 4), then ``[4, 8]``, ``[8, 16]``, ``[16, 32]`` with `LADDER_OUTER_NODES` each; beyond
32 every activation of `ACTIVATIONS` equals ``max(x, 0)`` to float64 precision (SiLU's difference is
< 32 e^-32 ~ 4e-13), whose integral is closed-form."""
LADDER_OUTER_NODES = 8


_LADDER_RULES = {k: tuple(tuple(float(v) for v in arr) for arr in _gl_rule(k, 1))
                 for k in (IGOptions().gl_nodes, LADDER_OUTER_NODES)}
"""The ladder's Gauss-Legendre rules on [0, 1] as Python floats, made at import (``nodes`` -> (nodes, weights)):
what a compiled step builds its constants from (TorchDynamo does not keep an lru_cache's memo, and cannot
trace numpy's ``leggauss``)."""


def _ladder_constants(nodes: int, device: str) -> tuple[Tensor, ...]:
    """The ladder's nodes, weights and edges as float64 tensors on ``device``: made once per device (a copy
    from host memory to a GPU on every call would wait for the device mid-layer); in a compiled step, the
    graph's own constants (the same numbers)."""
    if torch.compiler.is_compiling() and nodes in _LADDER_RULES:
        return tuple(torch.tensor(v, dtype=torch.float64, device=device)
                     for v in (*_LADDER_RULES[nodes], *_LADDER_RULES[LADDER_OUTER_NODES], LADDER_EDGES))
    return _ladder_made(nodes, device)


@lru_cache(maxsize=8)
def _ladder_made(nodes: int, device: str) -> tuple[Tensor, ...]:
    x16, w16 = (torch.as_tensor(v, dtype=torch.float64, device=device) for v in _gl_rule(nodes, 1))
    x8, w8 = (torch.as_tensor(v, dtype=torch.float64, device=device) for v in _gl_rule(LADDER_OUTER_NODES, 1))
    return x16, w16, x8, w8, torch.tensor(LADDER_EDGES, dtype=torch.float64, device=device)


def _gated_ladder(act, a64: Tensor, b64: Tensor, opts: "IGOptions", max_numbers: int) -> tuple[Tensor, Tensor]:
    """``(I1, I2)`` in float64 without reading any value on the host (the GPU rule's form of
    `_gated_closed`, equal to it within ~1e-12 relative): every element gets the same fixed panels in
    ``x = t A`` (`LADDER_EDGES`), empty ones weighted 0, plus the closed-form tail beyond the last edge;
    ``I1`` by parts, or (|A| < 1e-2) directly with one panel, both computed and selected element-wise.
    Evaluated ``max_numbers // 40`` elements at a time (a count known from the shapes)."""
    flat_a, flat_b = a64.reshape(-1), b64.reshape(-1)
    i1 = torch.empty_like(flat_a)
    i2 = torch.empty_like(flat_a)
    x16, w16, x8, w8, edges = _ladder_constants(opts.gl_nodes, str(a64.device))
    top = LADDER_EDGES[-1]
    dact = lambda z: derivative(act, z)  # noqa: E731
    per = len(x16) + (len(LADDER_EDGES) - 1) * len(x8)
    step = max(1, max_numbers // per)
    for s in range(0, flat_a.numel(), step):
        a, b = flat_a[s:s + step], flat_b[s:s + step]
        mag = a.abs()
        t = (edges / mag[:, None]).clamp_(max=1.0)  # panel edges in t (|A| = 0: all 1)
        width = t[:, 1:] - t[:, :-1]  # (N, 3): zero for panels beyond |A|
        ts = torch.cat([t[:, :1] * x16, (t[:, :-1, None] + width[..., None] * x8).flatten(1)], dim=1)
        ws = torch.cat([t[:, :1] * w16, (width[..., None] * w8).flatten(1)], dim=1)
        v = act(ts * a[:, None]).mul_(ws).sum(-1)
        # beyond the last edge the integrand is max(x, 0): int_{top/|A|}^1 t A dt for A > top
        v += torch.where(a > top, 0.5 * a * (1 - (top / a) ** 2), 0.0)
        i2[s:s + step] = v
        small = mag < 1e-2
        direct = dact(x16 * a[:, None]).mul_(w16 * x16).sum(-1)  # int_0^1 act'(t A) t dt, one panel
        by_parts = (act(a) - v) / torch.where(small, 1.0, a)
        i1[s:s + step] = torch.where(small, direct, by_parts) * b
    return i1.view(a64.shape), i2.view(a64.shape)


def gated_integrals(act_name: str, a_tot: Tensor, b_tot: Tensor, opts: IGOptions = IGOptions(), *,
                    sync_free: bool = False, max_numbers: int = 1 << 26) -> tuple[Tensor, Tensor]:
    """The two per-neuron IG integrals of a gated FF.

    Args:
        a_tot, b_tot: (..., d') totals of the gate and up projections (bias parts included).
        sync_free: the GPU rule's form, no value read on the host: SiLU in closed form (`silu_ig`, ~1e-13 of
            a converged quadrature), other activations by `_gated_ladder` (equal to the adaptive rule within
            ~1e-12 relative); otherwise the adaptive rule (`_gated_closed`, which
            groups the elements by their panel count on the host: the CPU rule's, bit for bit as before).
        max_numbers: with ``sync_free``, the quadrature's temporaries (float64 numbers) per step.
    Returns:
        ``(I1, I2)`` with ``I1 = int_0^1 act'(t A) t B dt`` and ``I2 = int_0^1 act(t A) dt``, so that
        ``A I1 + B I2 = act(A) B`` (completeness).
    """
    act = activation(act_name)
    af, bf = a_tot.float(), b_tot.float()
    if opts.method == "numerical":
        m = opts.steps
        ts = [(k + 0.5) / m for k in range(m)]
        ws = [1.0 / m] * m
    elif sync_free:
        if act is _silu:  # closed form (`silu_ig`): a few (neurons,) vectors instead of 56 nodes per neuron
            i1, i2 = silu_integrals(af.double(), bf.double(), max_numbers)
        else:
            i1, i2 = _gated_ladder(act, af.double(), bf.double(), opts, max_numbers)
        return i1.to(a_tot.dtype), i2.to(a_tot.dtype)
    else:
        return _gated_closed(act, af, bf, opts, a_tot.dtype)
    i2 = _quad(act, af, ts, ws)
    i1 = _quad(lambda z: derivative(act, z), af, ts, [w * t for t, w in zip(ts, ws)]) * bf
    return i1.to(a_tot.dtype), i2.to(a_tot.dtype)
