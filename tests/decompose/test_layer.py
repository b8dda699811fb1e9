"""Exactness of every scope against the real HF forward, fast path vs naive oracle, IG, padding, hooks."""
from __future__ import annotations

import pytest
import torch

from report_builder.decompose.feedforward import IGOptions, elementwise_kappa, gated_integrals
from report_builder.decompose.chunks import default_chunk_rows
from report_builder.decompose.layouts import decompose_batch, decompose_layer
from report_builder.decompose.reference import reference_layer, reference_maps, reference_ratio
from report_builder.engine import Tokens, decompose_sequences
from report_builder.models.capture import capture_hooks, forward_capture
from report_builder.errors import FusedAttention, SequenceTooLong
from report_builder.schema import K21_METHODS
from tests.tiny_models import FAMILIES, tiny

SEQS = [Tokens(list(range(5, 21))), Tokens(list(range(7, 16)))]


def _one(lm, n=12):
    ids = torch.arange(5, 5 + n).unsqueeze(0)
    caps = forward_capture(lm.model, lm.adapter, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    return caps


@pytest.mark.parametrize("family", FAMILIES)
def test_every_scope_matches_hf_tensors(family):
    lm = tiny(family)
    scopes = lm.layer_weights(0).scopes
    seen = {}
    for _, layer, r in decompose_sequences(lm, SEQS, maps=scopes, ratios=True, batch_size=2):
        assert set(r.errors) == set(lm.layer_weights(layer).checks), r.errors.keys()
        for scope, err in r.errors.items():
            assert err <= 1e-5, (family, layer, scope, err)
            seen[(layer, scope)] = err
    assert len(seen) == 2 * 6


@pytest.mark.parametrize("family", FAMILIES)
def test_fast_path_equals_naive_oracle(family):
    lm = tiny(family)
    caps = _one(lm)
    for layer, cap in enumerate(caps):
        lw = lm.layer_weights(layer)
        x, a = cap.x[0], cap.alpha[0]
        ref = reference_layer(lw, x, a)
        ref_maps = reference_maps(ref)
        fast = decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True, chunk_rows=5)
        for s in lw.scopes:
            err = (fast.maps[s] - ref_maps[s]).abs().max() / ref_maps[s].abs().max()
            assert err < 1e-5, (family, layer, s, float(err))
        for method, scope in lw.layout.k21_points.items():
            m_err = (fast.maps[method] - ref_maps[scope]).abs().max() / ref_maps[scope].abs().max()
            assert m_err < 1e-5, (method, float(m_err))
            r_err = (fast.ratios[method] - reference_ratio(ref[scope][0])).abs().max()
            assert r_err < 1e-5, (method, float(r_err))
        # ATTN-W / ATTNRES-W from the head-mean attention
        diag = torch.diagonal(a.mean(0))
        assert torch.allclose(fast.ratios["ATTN-W"], 1 - diag, atol=1e-6)
        assert torch.allclose(fast.ratios["ATTNRES-W"], fast.ratios["ATTN-W"] / 2, atol=1e-7)


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_chunking_does_not_change_results(family):
    lm = tiny(family)
    cap = _one(lm, 14)[1]
    lw = lm.layer_weights(1)
    full = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, chunk_rows=14)
    one = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, chunk_rows=1)
    for s in lw.scopes:
        assert torch.allclose(full.maps[s], one.maps[s], rtol=1e-5, atol=1e-6)


def test_elementwise_ig_completeness_and_zero_limit():
    p = torch.tensor([[-3.0, -1e-9, 0.0, 1e-9, 0.5, 4.0]])
    for act in ("gelu", "gelu_new", "relu", "silu"):
        kappa, g0 = elementwise_kappa(act, p)
        from report_builder.decompose.feedforward import activation
        assert torch.allclose(p * kappa + g0, activation(act)(p), atol=1e-6)
    kappa, _ = elementwise_kappa("gelu", torch.zeros(1, 1))
    assert abs(float(kappa) - 0.5) < 1e-6  # g'(0) for GELU


def test_gated_quadrature_completeness_and_accuracy():
    torch.manual_seed(0)
    a = torch.randn(64, 32, dtype=torch.float64) * 8
    b = torch.randn(64, 32, dtype=torch.float64)
    i1, i2 = gated_integrals("silu", a.float(), b.float())
    target = torch.nn.functional.silu(a) * b
    err = ((a * i1.double() + b * i2.double()) - target).abs().max() / target.abs().max()
    assert err < 1e-6
    # I2 against a very fine midpoint rule in float64
    t = (torch.arange(20000, dtype=torch.float64) + 0.5) / 20000
    i2_ref = torch.nn.functional.silu(a.unsqueeze(0) * t.view(-1, 1, 1)).mean(0)
    assert (i2.double() - i2_ref).abs().max() < 1e-5


def test_numerical_ig_converges_to_closed_form():
    p = torch.linspace(-4, 4, 101).unsqueeze(0)
    closed, _ = elementwise_kappa("gelu", p)
    errs = [float((elementwise_kappa("gelu", p, IGOptions("numerical", m))[0] - closed).abs().max())
            for m in (2, 8, 32, 128)]
    assert errs == sorted(errs, reverse=True) and errs[-1] < 1e-4


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_numerical_ig_option_is_close_and_complete(family):
    lm = tiny(family)
    cap = _one(lm)[0]
    lw = lm.layer_weights(0)
    closed = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes)
    num = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, ig=IGOptions("numerical", 256))
    ff = lw.layout.ff_after
    assert (num.maps[ff] - closed.maps[ff]).abs().max() / closed.maps[ff].max() < 1e-3


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_decomposition_equals_one_at_a_time(family):
    """The padded batched path (one forward and one decomposition per batch, pads masked) gives every
    map, ratio, sum, bias term and extra of the per-sequence path within 1e-6, and its own checks."""
    lm = tiny(family)
    scopes = lm.layer_weights(0).scopes
    seqs = [Tokens(list(range(7, 7 + n)), [0] * (n // 2) + [1] * (n - n // 2)) for n in (9, 16, 4, 13, 11)]
    kw = dict(maps=scopes + K21_METHODS, ratios=True, extras=True)
    single = {(k, l): r for k, l, r in decompose_sequences(lm, seqs, batched=False, **kw)}
    batched = list(decompose_sequences(lm, seqs, batched=True, batch_size=3, **kw))
    assert sorted((k, l) for k, l, _ in batched) == sorted(single)
    for k, layer, r in batched:
        one = single[k, layer]
        n = len(seqs[k].input_ids)
        for part in ("maps", "ratios", "sums", "bias", "extras"):
            got, ref = getattr(r, part), getattr(one, part)
            assert got.keys() == ref.keys(), part
            for name in ref:
                assert got[name].shape == ref[name].shape, (part, name)
                assert _rel(got[name], ref[name]) <= 1e-6, (family, k, layer, part, name)
        assert r.maps[scopes[-1]].shape == (n, n)
        assert r.errors.keys() == one.errors.keys() and max(r.errors.values()) < 1e-5


def test_batched_chunks_follow_the_memory_budget():
    """A batch shares one chunk budget: more sequences per batch, fewer query rows per chunk."""
    assert default_chunk_rows(64, 32, 64, budget_bytes=1 << 20, batch=4) < default_chunk_rows(64, 32, 64,
                                                                                              budget_bytes=1 << 20)
    lm = tiny("llama")
    lw = lm.layer_weights(0)
    caps = forward_capture(lm.model, lm.adapter, {"input_ids": torch.tensor([list(range(5, 17)), list(range(5, 12)) + [0] * 5]),
                                                  "attention_mask": torch.tensor([[1] * 12, [1] * 7 + [0] * 5])}, [0])
    a = decompose_batch(lw, caps[0].x, caps[0].alpha, [12, 7], maps=lw.scopes, chunk_rows=1)
    b = decompose_batch(lw, caps[0].x, caps[0].alpha, [12, 7], maps=lw.scopes)
    for ra, rb in zip(a, b):
        for s in lw.scopes:
            assert _rel(ra.maps[s], rb.maps[s]) <= 1e-6


def test_hooks_removed_even_on_error():
    lm = tiny("bert")
    before = _hook_count(lm.model)
    with pytest.raises(RuntimeError):
        with capture_hooks(lm.model, lm.adapter):
            assert _hook_count(lm.model) > before
            raise RuntimeError("boom")
    assert _hook_count(lm.model) == before


def test_fused_attention_is_an_error():
    lm = tiny("bert", attn_implementation="sdpa")
    before = _hook_count(lm.model)
    with pytest.raises(FusedAttention, match=r"not captured for layer 1 \(.*eager"):  # layers count from 1
        list(decompose_sequences(lm, SEQS, ratios=True))
    assert _hook_count(lm.model) == before


def _hook_count(model):
    """Hooks on the model, after a first forward (transformers installs its own recorders lazily)."""
    ids = torch.arange(3, 9).unsqueeze(0)
    with torch.no_grad():
        model(input_ids=ids, output_attentions=True)
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_too_long_sequence_is_an_error():
    lm = tiny("gpt2")
    with pytest.raises(SequenceTooLong, match="64 positions"):
        list(decompose_sequences(lm, [Tokens(list(range(100)))], ratios=True))


def test_bfloat16_reports_its_error():
    lm = tiny("llama")
    lm.model.to(torch.bfloat16)
    lm._weights.clear()
    errs = [e for _, _, r in decompose_sequences(lm, SEQS[:1], maps=lm.layer_weights(0).scopes) for e in r.errors.values()]
    assert errs and all(0 <= e < 0.1 for e in errs)


@pytest.mark.parametrize("family", FAMILIES)
def test_bias_terms_match_the_oracle(family):
    """``LayerResult.bias`` holds each check point's token-independent term (the notebook API shows it)."""
    lm = tiny(family)
    cap = _one(lm, 10)[0]
    lw = lm.layer_weights(0)
    x, a = cap.x[0], cap.alpha[0]
    ref = reference_layer(lw, x, a)
    fast = decompose_layer(lw, x, a, maps=lw.scopes)
    assert set(fast.bias) == set(lw.checks)
    for point, (_, ref_bias) in ref.items():
        if point not in fast.bias:
            continue
        ours = fast.bias[point].expand_as(ref_bias)
        err = float((ours - ref_bias).norm(dim=-1).max() / fast.sums[point].norm(dim=-1).max())
        assert err < 1e-5, (family, point, err)
