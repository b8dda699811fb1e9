"""K24 analyses end to end on tiny random BERT (post-LN) and Llama (pre-LN, RMSNorm, SwiGLU, GQA):
table schemas and ranges, FF-amp from the maps, pair categories, numerical IG, and every K24 figure
built from the computed tables."""
from __future__ import annotations

import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch

from report_builder.analyses import k24_compute
from report_builder.data.encode import EncodedSeq
from report_builder.decompose.feedforward import IGOptions
from report_builder.decompose.layouts import decompose_layer
from report_builder.engine import Tokens, decompose_sequences
from report_builder.figures import k24
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured, Roles
from report_builder.models.capture import forward_capture
from report_builder.stats.ctx_change import ctx_change
from report_builder.stats.maps import row_normalise, valid_pairs_mask
from report_builder.stats.pair_categories import CATEGORY_ORDER, pair_categories, strip_marker
from report_builder import schema
from tests.tiny_models import tiny

SCHEMA = {**schema.K24, "recon_errors": schema.RECON_ERRORS}
MODEL_COLS = schema.MODELS
TOP_K = 8
TEXTS = [
    ("The New York Times reported on Sunday.", "It rained in Paris, again."),
    ("Researchers at Tohoku University studied attention.", "Their results were surprising."),
    ("A dog barked.", "Nobody answered the unbelievable noise."),
]
PIECES = {"reported": ["report", "ed"], "Researchers": ["Research", "ers"], "surprising": ["surpris", "ing"],
          "unbelievable": ["un", "believ", "able"], "Tohoku": ["To", "hoku"]}


def _tid(tok: str) -> int:
    return 5 + sum(map(ord, tok)) % 100  # within the tiny vocab (120)


def _pieces(text: str, base: int, style: str, word0: int):
    """(token, offsets, word id) of ``text`` whose first char is at ``base`` in the full text."""
    out = []
    words = list(re.finditer(r"\w+|[^\w\s]", text))
    for w, m in enumerate(words):
        start = base + m.start()
        for q, p in enumerate(PIECES.get(m.group(), [m.group()])):
            if style == "wordpiece":
                tok = p.lower() if q == 0 else "##" + p.lower()
            else:  # SentencePiece-like BPE: a leading-space marker on the first piece of a spaced word
                spaced = m.start() > 0 and text[m.start() - 1] == " " or (m.start() == 0 and base > 0)
                tok = ("▁" + p) if q == 0 and (spaced or m.start() == 0) else p
            out.append((tok, (start, start + len(p)), word0 + w))
            start += len(p)
    return out, word0 + len(words)


def _encoder_seq(seq: int, a: str, b: str) -> EncodedSeq:
    text = a + "\n" + b
    pa, nw = _pieces(a, 0, "wordpiece", 0)
    pb, _ = _pieces(b, len(a) + 1, "wordpiece", nw)
    tokens = ["[CLS]"] + [t for t, _, _ in pa] + ["[SEP]"] + [t for t, _, _ in pb] + ["[SEP]"]
    offsets = [None] + [o for _, o, _ in pa] + [None] + [o for _, o, _ in pb] + [None]
    word_ids = [None] + [w for _, _, w in pa] + [None] + [w for _, _, w in pb] + [None]
    special = [o is None for o in offsets]
    tt = [0] * (len(pa) + 2) + [1] * (len(pb) + 1)
    ids = [101 if t == "[CLS]" else 102 if t == "[SEP]" else _tid(t) for t in tokens]
    return EncodedSeq(input_ids=ids, token_type_ids=tt, tokens=tokens, special=special, masked=[False] * len(ids),
                      category=["[CLS]" if t == "[CLS]" else "[SEP]" if t == "[SEP]" else "Normal" for t in tokens],
                      word_ids=word_ids, offsets=offsets, text=text, item_id=f"e{seq}", seq=seq)


def _causal_seq(seq: int, a: str, b: str) -> EncodedSeq:
    text = a + " " + b
    p, _ = _pieces(text, 0, "bpe", 0)
    tokens = ["<s>"] + [t for t, _, _ in p]
    n = len(tokens)
    return EncodedSeq(input_ids=[1] + [_tid(t) for t in tokens[1:]], token_type_ids=None, tokens=tokens,
                      special=[True] + [False] * (n - 1), masked=[False] * n, category=["[CLS]"] + ["Normal"] * (n - 1),
                      word_ids=[None] + [w for _, _, w in p], offsets=[None] + [o for _, o, _ in p], text=text,
                      item_id=f"c{seq}", seq=seq)


def _seqs(lm) -> list[EncodedSeq]:
    make = _causal_seq if lm.causal else _encoder_seq
    return [make(k, a, b) for k, (a, b) in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def models():
    return {"bert": tiny("bert"), "llama": tiny("llama")}


@pytest.fixture(scope="module")
def computed(models):
    """scope_analyses + example_maps on both tiny models, and the maps per (model, seq, layer, scope)."""
    out, maps = {}, {}
    for key, lm in models.items():
        enc = _seqs(lm)
        out[key] = k24_compute.scope_analyses(lm, enc, model=lm.name, dataset="wiki", top_k=TOP_K, batch_size=2)
        out[key]["k24_maps"] = k24_compute.example_maps(lm, enc[:2], ["ex0", "ex1"], model=lm.name)
        scopes = lm.adapter.layout.scopes
        for k, layer, r in decompose_sequences(lm, [Tokens(e.input_ids, e.token_type_ids) for e in enc], maps=scopes):
            for s in scopes:
                maps[key, k, layer, s] = r.maps[s].numpy().astype(np.float64)
    return out, maps


def _tables(computed):
    out, _ = computed
    names = set(out["bert"]) | set(out["llama"])
    return {n: pd.concat([out["bert"][n], out["llama"][n]], ignore_index=True) for n in names}


def test_hand_made_sequences_are_consistent(models):
    for lm in models.values():
        for e in _seqs(lm):
            for t, o in zip(e.tokens, e.offsets):
                if o is not None:
                    assert strip_marker(t).lower() == e.text[o[0]:o[1]].lower(), (t, o)


def test_schemas(computed):
    t = _tables(computed)
    for name, cols in SCHEMA.items():
        assert list(t[name].columns) == cols, name
        assert len(t[name]), name
    assert (t["recon_errors"].max_rel_error <= 1e-4).all()


@pytest.mark.parametrize("key", ["bert", "llama"])
def test_ctx_table(key, models, computed):
    lm = models[key]
    lay = lm.adapter.layout
    scopes, comps = lay.scopes, lay.components
    ctx = computed[0][key]["k24_ctx"]
    assert ctx.change.between(0, 2).all() and ctx.change_sd.dropna().ge(0).all()
    assert (ctx.n_seqs == len(TEXTS)).all()
    for layer in range(lm.n_layers):
        sub = ctx[ctx.layer == layer]
        comp = sub[sub.kind == "component"]
        assert comp.component.tolist() == list(comps)
        assert comp.from_scope.tolist() == list(scopes[:-1]) and comp.to_scope.tolist() == list(scopes[1:])
        cum = sub[sub.kind == "cumulative"]
        assert cum.component.tolist() == [f"ATB→{s}" for s in scopes[1:]]
        assert (cum.from_scope == "ATB").all() and cum.to_scope.tolist() == list(scopes[1:])
        # the first component and the first cumulative step are the same pair of scopes
        assert comp.change.iloc[0] == pytest.approx(cum.change.iloc[0])
    # recompute one entry from the maps: mean over sequences of 1 - Spearman rho
    _, maps = computed
    for layer in range(lm.n_layers):
        for s, t_ in zip(scopes[:-1], scopes[1:]):
            vals = [ctx_change(maps[key, k, layer, s], maps[key, k, layer, t_], lm.causal) for k in range(len(TEXTS))]
            row = ctx[(ctx.layer == layer) & (ctx.kind == "component") & (ctx.from_scope == s)]
            assert row.change.iloc[0] == pytest.approx(np.mean(vals), abs=1e-9)
            assert ctx_change(maps[key, 0, layer, s], maps[key, 0, layer, s], lm.causal) == 0.0


@pytest.mark.parametrize("key", ["bert", "llama"])
def test_ffamp_from_maps(key, models, computed):
    lm = models[key]
    before_s, after_s = lm.adapter.layout.ff_before, lm.adapter.layout.ff_after
    _, maps = computed
    pairs = computed[0][key]["k24_ffamp_pairs"]
    for layer in range(lm.n_layers):
        best = -np.inf
        amps = {}
        for k, e in enumerate(_seqs(lm)):
            b = row_normalise(maps[key, k, layer, before_s])
            a = row_normalise(maps[key, k, layer, after_s])
            amp = a - b
            np.testing.assert_allclose(amp.sum(1), 0.0, atol=1e-9)  # FF-amp rows sum to 0
            np.testing.assert_allclose(b.sum(1), 1.0, atol=1e-9)
            if lm.causal:
                assert np.abs(np.triu(maps[key, k, layer, after_s], 1)).max() == 0.0
            valid = valid_pairs_mask(len(e), lm.causal) & ~np.eye(len(e), dtype=bool)
            best = max(best, amp[valid].max())
            amps[k] = (amp, b, a)
        sub = pairs[pairs.layer == layer].sort_values("rank")
        assert sub["rank"].tolist() == list(range(1, TOP_K + 1))
        assert (sub.i != sub.j).all()
        if lm.causal:
            assert (sub.j <= sub.i).all()
        np.testing.assert_allclose(sub.amp, sub.after - sub.before, atol=1e-9)
        assert sub.amp.is_monotonic_decreasing
        assert sub.amp.iloc[0] == pytest.approx(best, abs=1e-6)
        for r in sub.itertuples():
            amp, b, a = amps[r.seq]
            assert r.amp == pytest.approx(amp[r.i, r.j], abs=1e-6)
            assert r.before == pytest.approx(b[r.i, r.j], abs=1e-6)
            e = _seqs(lm)[r.seq]
            assert (r.token_i, r.token_j) == (e.tokens[r.i], e.tokens[r.j])
            assert r.category == pair_categories(e.tokens, e.word_ids, e.offsets, e.text, e.special)[r.i, r.j]
            assert "⟦" in r.context


@pytest.mark.parametrize("key", ["bert", "llama"])
def test_pair_categories_end_to_end(key, models, computed):
    lm = models[key]
    enc = _seqs(lm)
    base = computed[0][key]["k24_ffamp_base"]
    n_pairs = sum(int((valid_pairs_mask(len(e), lm.causal) & ~np.eye(len(e), dtype=bool)).sum()) for e in enc)
    for layer in range(lm.n_layers):
        sub = base[base.layer == layer].set_index("category")
        assert list(sub.index) == list(CATEGORY_ORDER)
        assert sub.base_count.sum() == n_pairs
        assert sub.top_count.sum() == TOP_K
        assert sub.base_share.sum() == pytest.approx(1.0) and sub.top_share.sum() == pytest.approx(1.0)
        # the hand-made text has specials, multi-piece words, a capitalised multi-word name, punctuation
        for cat in ("special token", "same word", "multi-word name", "adjacent", "punctuation", "other"):
            assert sub.loc[cat, "base_count"] > 0, (key, cat)
    # specific pairs of the first sequence
    e = enc[0]
    cats = pair_categories(e.tokens, e.word_ids, e.offsets, e.text, e.special)
    pos = {strip_marker(t).lower(): k for k, t in enumerate(e.tokens)}
    assert cats[pos["report"], pos["ed"]] == "same word"
    assert cats[pos["new"], pos["times"]] == "multi-word name"
    assert cats[pos["new"], pos["york"]] == "multi-word name"  # before "adjacent"
    assert cats[pos["on"], pos["sunday"]] == "adjacent"
    assert cats[pos["on"], pos["paris"]] == "other"
    assert cats[pos["it"], 0] == "special token"


def test_numerical_ig_converges_to_closed_form(models):
    for lm in models.values():
        e = _seqs(lm)[0]
        ids = torch.tensor([e.input_ids])
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        cap = forward_capture(lm.model, lm.adapter, inputs)[1]
        lw = lm.layer_weights(1)
        closed = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes)
        errs = []
        for m in (4, 16, 64, 256):
            num = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, ig=IGOptions("numerical", m))
            errs.append(max(float((num.maps[s] - closed.maps[s]).abs().max() / closed.maps[s].max())
                            for s in lw.scopes))
        assert errs == sorted(errs, reverse=True), (lm.name, errs)
        assert errs[0] > 10 * errs[-1] and errs[-1] < 1e-3, (lm.name, errs)


def test_numerical_ig_through_scope_analyses(models, computed):
    """A coarse numerical IG is an accepted approximation: FF-scope errors are recorded, not fatal."""
    lm = models["bert"]
    enc = _seqs(lm)
    coarse = k24_compute.scope_analyses(lm, enc, model=lm.name, dataset="wiki", top_k=TOP_K,
                                        ig=IGOptions("numerical", 4))
    fine = k24_compute.scope_analyses(lm, enc, model=lm.name, dataset="wiki", top_k=TOP_K,
                                      ig=IGOptions("numerical", 256))
    closed = computed[0]["bert"]["k24_ctx"].change.to_numpy()
    d4 = np.abs(coarse["k24_ctx"].change.to_numpy() - closed).max()
    d256 = np.abs(fine["k24_ctx"].change.to_numpy() - closed).max()
    assert d256 <= d4 and d256 < 1e-2
    e4 = coarse["recon_errors"].set_index(["layer", "scope"]).max_rel_error
    assert e4.loc[(0, "ATB")] <= 1e-4 and e4.loc[(0, "ATBFF")] > e4.loc[(0, "ATB")]


@pytest.mark.parametrize("key", ["bert", "llama"])
def test_res_norms_and_ln_dims(key, models, computed):
    lm = models[key]
    rn = computed[0][key]["k24_res_norms"]
    assert rn.layer.tolist() == list(range(lm.n_layers))
    num = rn[SCHEMA["k24_res_norms"][3:]]
    assert (num > 0).all().all()
    assert (rn.ratio_q10 <= rn.ratio_q50).all() and (rn.ratio_q50 <= rn.ratio_q90).all()
    np.testing.assert_allclose(rn.ratio_mean.between(rn.ratio_q10 * 0.5, rn.ratio_q90 * 2), True)
    ld = computed[0][key]["k24_ln_dims"]
    d = int(lm.facts()["d_model"])
    assert len(ld) == lm.n_layers * d
    for layer in range(lm.n_layers):
        assert ld[ld.layer == layer].dim.tolist() == list(range(d))
    assert (ld.ff_change > 0).all()
    assert (ld.ln_out_change.dropna() >= 0).all()
    # every layer has a following norm (post-LN: LN2; pre-LN: next layer's LN1 or the final norm)
    assert ld.ln_weight.notna().all() and ld.kept_ratio.notna().all()
    np.testing.assert_allclose(ld.kept_ratio, ld.ln_out_change / ld.ff_change, rtol=1e-6)


@pytest.mark.parametrize("key", ["bert", "llama"])
def test_example_maps_row_normalised(key, models, computed):
    lm = models[key]
    km = computed[0][key]["k24_maps"]
    enc = _seqs(lm)[:2]
    assert set(km.example) == {"ex0", "ex1"}
    assert set(km.scope) == set(lm.adapter.layout.scopes)
    assert km.value.between(0, 1).all()
    if lm.causal:
        assert (km.j <= km.i).all()
    sums = km.groupby(["example", "layer", "scope", "i"]).value.sum()
    np.testing.assert_allclose(sums, 1.0, atol=1e-5)
    for name, e in zip(("ex0", "ex1"), enc):
        n = len(e)
        per = n * (n + 1) // 2 if lm.causal else n * n
        assert (km[km.example == name].groupby(["layer", "scope"]).size() == per).all()
        sub = km[(km.example == name) & (km.layer == 0) & (km.scope == "ATB")]
        assert sub.token_i.tolist() == [e.tokens[i] for i in sub.i]


def test_every_k24_figure_builds_from_computed_tables(models, computed):
    tables = _tables(computed)
    tables["models"] = pd.DataFrame([lm.facts() for lm in models.values()])[MODEL_COLS]
    roles = Roles(primary_encoder="tiny-bert", primary_causal="tiny-llama", encoders=("tiny-bert", "tiny-llama"),
                  variants=(), seed_group=(), datasets=("wiki",))
    ctx = FigureContext(tables=tables, roles=roles)
    for spec in k24.SPECS:
        try:
            r = spec.build(ctx)
        except NotConfigured as e:  # pragma: no cover - every K24 figure needs only these roles
            pytest.fail(f"{spec.id}: {e}")
        assert isinstance(r, FigureResult) and len(r.data) and r.reading and r.models, spec.id
        assert r.chart is not None, spec.id
        with alt.data_transformers.enable("default", max_rows=None):
            d = r.chart.to_dict(validate=True)
        assert "$schema" in d, spec.id
