"""SiLU's gated IG integrals in closed form (`decompose.silu_ig`), the GPU rule's form for SiLU-gated FFs."""
from __future__ import annotations

import mpmath
import pytest
import torch

from report_builder.decompose.feedforward import IGOptions, _gated_ladder, activation, gated_integrals
from report_builder.decompose.silu_ig import SMALL, silu_integrals

POINTS = [0.0, 1e-300, -1e-12, 1e-6, -1e-3, 0.05, -0.05, SMALL * 0.999, SMALL, -SMALL * 1.001, 0.2, -0.3, 0.5, 0.69,
          0.7, 1.0, -1.0, 2.0, -2.0, 3.7, -5.0, 8.0, -12.0, 20.0, -40.0, 80.0, 300.0, -300.0, 1e4, -1e4]


def _reference(a: float) -> tuple[float, float]:
    """(I1/B, I2) by 40-digit adaptive quadrature of the definition."""
    mpmath.mp.dps = 40
    am = mpmath.mpf(a)
    silu = lambda u: u / (1 + mpmath.exp(-u))  # noqa: E731
    if am == 0:
        return 0.25, 0.0
    i2 = mpmath.quad(lambda t: silu(t * am), [0, 0.25, 0.5, 0.75, 1])
    return float((silu(am) - i2) / am), float(i2)


def test_closed_form_equals_the_definition_to_1e12():
    a = torch.tensor(POINTS, dtype=torch.float64)
    j, i2 = silu_integrals(a, torch.ones_like(a))
    for k, v in enumerate(POINTS):
        rj, ri = _reference(v)
        assert abs(float(j[k]) - rj) <= 1e-12 * abs(rj), (v, float(j[k]), rj)
        assert abs(float(i2[k]) - ri) <= 1e-12 * abs(ri) + 1e-300, (v, float(i2[k]), ri)


def test_complete_and_equal_to_the_quadratures():
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.logspace(-5, 3, 400, dtype=torch.float64), -torch.logspace(-5, 3, 400, dtype=torch.float64),
                   torch.zeros(2, dtype=torch.float64), torch.randn(500, generator=g, dtype=torch.float64) * 8])
    b = torch.randn(a.shape, generator=g, dtype=torch.float64)
    i1, i2 = silu_integrals(a, b)
    silu = torch.nn.functional.silu(a) * b
    scale = (a * i1).abs() + (b * i2).abs() + 1e-300
    assert float(((a * i1 + b * i2 - silu).abs() / scale).max()) <= 1e-13  # completeness (the series near 0: ~4e-14)
    l1, l2 = _gated_ladder(activation("silu"), a, b, IGOptions(), max_numbers=1 << 20)
    for r, got in ((l1, i1), (l2, i2)):
        assert float(((r - got).abs() / (r.abs() + 1e-3)).max()) <= 1e-9
    c1, c2 = silu_integrals(a.view(6, -1), b.view(6, -1), max_numbers=64)  # many steps, any shape (a vector
    # math library may round a step's tail apart from its body: equal to ~1e-13, not bit for bit)
    assert torch.allclose(c1.reshape(-1), i1, rtol=1e-12, atol=0) and torch.allclose(c2.reshape(-1), i2, rtol=1e-12,
                                                                                      atol=0)


@pytest.mark.parametrize("act", ["silu", "swish"])
def test_the_sync_free_rule_uses_it_for_silu(act):
    a = torch.randn(3, 7, 16) * 5
    b = torch.randn_like(a)
    i1, i2 = gated_integrals(act, a, b, sync_free=True)
    c1, c2 = silu_integrals(a.double(), b.double())
    assert torch.equal(i1, c1.float()) and torch.equal(i2, c2.float())
    k1, k2 = gated_integrals(act, a, b)  # the CPU rule's adaptive quadrature: the same to float32 rounding
    assert torch.allclose(k1, i1, rtol=1e-6, atol=1e-7) and torch.allclose(k2, i2, rtol=1e-6, atol=1e-7)
