"""SiLU's gated IG integrals in closed form: a handful of element-wise ops per neuron, no quadrature.

For a gated FF with ``act = SiLU`` (Llama, SmolLM2, Mistral, Qwen), `feedforward.gated_integrals` needs
``I2 = int_0^1 silu(tA) dt = S(A) / A`` with ``S(A) = int_0^A silu(u) du``, and ``I1 = B (silu(A) - I2) / A``
(by parts). S has a closed form through the dilogarithm:

    S(-x) = -x softplus(-x) + Li2(-e^-x) + pi^2/12        (x >= 0)
    S(x)  = x^2 / 2 - S(-x)                               (silu(u) = u + silu(-u))

and ``Li2(-y)`` for ``y = e^-x`` in (0, 1] is Cephes' ``spence(1 + y)`` (S. L. Moshier's rational
approximation, relative error < 4e-15): ``w = y`` on (0, 1/2], else ``w = 1/(1 + y) - 1`` with
``Li2 = w P(w) / Q(w) - log1p(y)^2 / 2``. Near ``A = 0`` the sum cancels (``S ~ A^2/4``), so for
``|A| < SMALL`` both integrals come from their Taylor series (to the a^8 term: < 1e-13 relative there). Everything is float64;
the result equals a converged quadrature to ~1e-12 relative (`tests/decompose/test_silu_ig.py`).

Why: the GPU rule's quadrature (`feedforward._gated_ladder`) evaluates 56 float64 nodes per neuron, held
as (neurons, 56) temporaries: on an H200 it took 4.2 ms of a causal SmolLM2 batch (8 x 128) whose pair
GEMMs take ~2.5 ms. This form reads and writes a few (neurons,) vectors instead. No value is read on
the host (the branches are `torch.where`), so it is sync-free.
"""
from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import Tensor

SMALL = 0.1
"""Below this |A| the Taylor series (the closed form cancels: its relative error grows like 4e-16 / A^2)."""

_P = (4.65128586073990045278E-5, 7.31589045238094711071E-3, 1.33847639578309018650E-1,
      8.79691311754530315341E-1, 2.71149851196553469920E0, 4.25697156008121755724E0,
      3.29771340985225106936E0, 1.00000000000000000126E0)
_Q = (6.90990488912553276999E-4, 2.54043763932544379113E-2, 2.82974860602568089943E-1,
      1.41172597751831069617E0, 3.63800533345137075418E0, 5.03278880143316990390E0,
      3.54771340985225096217E0, 9.99999999999999998740E-1)
"""Cephes ``spence``'s numerator and denominator, highest power first (``Li2(1 - v) = -w P(w)/Q(w)``,
``w = v - 1`` on [1/2, 3/2])."""

_PI2_12 = math.pi ** 2 / 12


@lru_cache(maxsize=8)
def _coefficients(device: str) -> Tensor:
    """(8, 2) float64: column 0 P's, column 1 Q's coefficients, lowest power first (for the powers of w).
    Made once per device: a copy from host memory to a GPU on every call would wait for the device."""
    return torch.tensor([_P[::-1], _Q[::-1]], dtype=torch.float64, device=device).T.contiguous()


def _li2_neg(y: Tensor, lp: Tensor) -> Tensor:
    """``Li2(-y)`` for y in [0, 1] (float64), with ``lp = log1p(y)``: the polynomials as one (N, 8) x (8, 2)
    GEMM over the powers of w (|w| <= 1/2: every power <= 1, no cancellation beyond a factor ~10)."""
    far = y > 0.5
    w = torch.where(far, 1.0 / (1.0 + y) - 1.0, y)
    powers = torch.cat([torch.ones_like(w)[:, None], w[:, None].expand(-1, 7)], dim=1).cumprod(dim=1)
    pq = powers @ _coefficients(str(y.device))  # (N, 2): P(w), Q(w)
    ratio = w * pq[:, 0] / pq[:, 1]
    return torch.where(far, ratio - 0.5 * lp * lp, -ratio)


def silu_integrals(a: Tensor, b: Tensor, max_numbers: int = 1 << 26) -> tuple[Tensor, Tensor]:
    """``(I1, I2)`` of SiLU-gated neurons for totals ``a`` (gate) and ``b`` (up), float64, any shape:
    ``I2 = int_0^1 silu(tA) dt``, ``I1 = int_0^1 silu'(tA) t B dt``, so that ``A I1 + B I2 = silu(A) B``.
    ``max_numbers``: float64 temporaries per step (~16 per neuron; the step count follows from the shape)."""
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    i1, i2 = torch.empty_like(flat_a), torch.empty_like(flat_a)
    step = max(1, max_numbers // 16)
    for s in range(0, flat_a.numel(), step):
        i1[s:s + step], i2[s:s + step] = _integrals(flat_a[s:s + step], flat_b[s:s + step])
    return i1.view(a.shape), i2.view(a.shape)


def _integrals(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """`silu_integrals` of flat vectors."""
    x = a.abs()
    y = torch.exp(-x)
    lp = torch.log1p(y)  # softplus(-x)
    s_neg = _li2_neg(y, lp).sub_(x * lp).add_(_PI2_12)  # S(-x)
    s = torch.where(a > 0, 0.5 * a * a - s_neg, s_neg)
    small = x < SMALL
    safe = torch.where(small, 1.0, a)
    i2 = s / safe
    j = (torch.nn.functional.silu(a) - i2) / safe  # I1 / B
    # the series (silu(u) = u/2 + u^2/4 - u^4/48 + u^6/480 - 17 u^8/80640 + ...):
    # I2 = a/4 + a^2/12 - a^4/240 + a^6/3360 - 17 a^8/725760, I1/B = 1/4 + a/6 - a^3/60 + a^5/560 - 17 a^7/90720
    a2 = a * a
    i2_small = a * (0.25 + a * (1 / 12 + a2 * (-1 / 240 + a2 * (1 / 3360 - a2 * (17 / 725760)))))
    j_small = 0.25 + a * (1 / 6 + a2 * (-1 / 60 + a2 * (1 / 560 - a2 * (17 / 90720))))
    return torch.where(small, j_small, j) * b, torch.where(small, i2_small, i2)
