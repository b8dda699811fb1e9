"""K21 analyses end to end on tiny random models: table schemas, value ranges, the naive oracle, and
every K21 figure built from the computed tables (not from the synthetic fixtures)."""
from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch

from report_builder.analyses import k21_compute
from report_builder.data.encode import EncodedSeq
from report_builder.decompose.reference import reference_layer, reference_ratio
from report_builder.figures import k21
from report_builder.figures.k21 import categories, mixing
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured, Roles
from report_builder.models.capture import forward_capture
from report_builder.stats import k21 as k21_stats
from report_builder import schema
from tests.tiny_models import tiny

METHODS = list(schema.K21_METHODS)
COLS = schema.K21
MODEL_COLS = schema.MODELS
DATASET_COLS = schema.DATASETS
CLS, SEP, MASK = 101, 102, 103  # ids inside the tiny vocab (120)
SPECIAL_CAT = {"[CLS]": "[CLS]", "[SEP]": "[SEP]", "[MASK]": "[MASK]"}


def _enc_pair(seq: int, words_a: list[str], words_b: list[str], mask_at=(), rng=None) -> EncodedSeq:
    """A hand-made ``[CLS] A [SEP] B [SEP]`` sequence; ``mask_at``: positions (within the full sequence) masked."""
    rng = rng or np.random.default_rng(seq)
    tokens = ["[CLS]", *words_a, "[SEP]", *words_b, "[SEP]"]
    ids, tt = [], []
    seg = 0
    for k, t in enumerate(tokens):
        ids.append({"[CLS]": CLS, "[SEP]": SEP}.get(t, 5 + (sum(map(ord, t)) % 90)))
        tt.append(seg)
        if t == "[SEP]":
            seg = 1
    masked = [False] * len(tokens)
    for p in mask_at:
        assert tokens[p] not in ("[CLS]", "[SEP]")
        tokens[p], ids[p], masked[p] = "[MASK]", MASK, True
    special = [t in ("[CLS]", "[SEP]") for t in tokens]
    word_ids, w = [], -1
    for t, sp in zip(tokens, special):
        if sp:
            word_ids.append(None)
            continue
        if not t.startswith("##"):
            w += 1
        word_ids.append(w)
    return EncodedSeq(input_ids=ids, token_type_ids=tt, tokens=tokens, special=special, masked=masked,
                      category=[SPECIAL_CAT.get(t, "Normal") for t in tokens], word_ids=word_ids,
                      offsets=[None] * len(tokens), text=" ".join(words_a) + "\n" + " ".join(words_b),
                      item_id=f"item{seq}", seq=seq)


def _enc_causal(seq: int, words: list[str]) -> EncodedSeq:
    tokens = ["<s>", *words]
    ids = [1] + [5 + (sum(map(ord, t)) % 90) for t in words]
    n = len(tokens)
    return EncodedSeq(input_ids=ids, token_type_ids=None, tokens=tokens, special=[True] + [False] * (n - 1),
                      masked=[False] * n, category=["[CLS]"] + ["Normal"] * (n - 1),
                      word_ids=[None, *range(n - 1)], offsets=[None] * n, text=" ".join(words),
                      item_id=f"c{seq}", seq=seq)


SENTS = [
    (["the", "man", "went", "to", "the", "store", "."], ["he", "bought", "a", "gallon", "of", "milk", "."]),
    (["a", "cat", "sat", ",", "on", "the", "mat", "."], ["it", "was", "warm", "##er", "."]),
    (["rain", "fell", "."], ["the", "river", "rose", "quick", "##ly", ",", "too", "."]),
]
MASKS = [(2, 11), (3,), (1, 8)]


def _wiki(masked: bool) -> list[EncodedSeq]:
    return [_enc_pair(k, a, b, MASKS[k] if masked else ()) for k, (a, b) in enumerate(SENTS)]


def _sst2(masked: bool) -> list[EncodedSeq]:
    out = []
    for k, words in enumerate([["a", "fine", "film", "."], ["bor", "##ing", "and", "long", "!"]]):
        e = _enc_pair(k, words, [], (2,) if masked else ())
        # single sentence: drop the empty second segment's trailing [SEP]
        for f in ("input_ids", "token_type_ids", "tokens", "special", "masked", "category", "word_ids", "offsets"):
            setattr(e, f, getattr(e, f)[:-1])
        out.append(e)
    return out


def _ranks(encoded: list[EncodedSeq]) -> dict[int, int]:
    ids = sorted({i for e in encoded for i in e.input_ids})
    rng = np.random.default_rng(1)
    return {i: int(r) + 1 for i, r in zip(ids, rng.permutation(len(ids)))}


@pytest.fixture(scope="module")
def bert():
    return tiny("bert")


@pytest.fixture(scope="module")
def gpt2():
    return tiny("gpt2")


@pytest.fixture(scope="module")
def computed(bert, gpt2):
    """Every K21 table computed on tiny BERT (wiki, sst2) and tiny GPT-2 (wiki)."""
    parts: dict[str, list[pd.DataFrame]] = {}
    ds_rows = []
    causal_wiki = [_enc_causal(k, a + b) for k, (a, b) in enumerate(SENTS)]
    runs = [(bert, "wiki", _wiki), (bert, "sst2", _sst2),
            (gpt2, "wiki", lambda masked: [_enc_causal(k, a + b) for k, (a, b) in enumerate(SENTS)])]
    for lm, ds, make in runs:
        masked = make(True)
        out = k21_compute.mixing_ratios(lm, masked, model=lm.name, dataset=ds, batch_size=2)
        parts.setdefault("k21_tokens", []).append(out["k21_tokens"])
        parts.setdefault("recon_errors", []).append(out["recon_errors"])
        plain = make(False)
        toks = k21_compute.mixing_ratios(lm, plain, model=lm.name, dataset=ds)["k21_tokens"]
        parts.setdefault("k21_freq", []).append(k21_compute.frequency_table(toks, plain, _ranks(plain)))
        ds_rows.append(dict(dataset=ds, model=lm.name, name=f"{ds} (hand-made)", n_samples=len(masked),
                            mean_tokens=float(np.mean([len(e) for e in masked])),
                            domain="Wikipedia" if ds == "wiki" else "movie reviews", source="test", licence="CC0",
                            hash=f"test-{ds}", built="2024-01-01T00:00:00Z"))
    for lm in (bert, gpt2):
        parts.setdefault("k21_expansion", []).append(k21_compute.expansion_rates(lm, model=lm.name))
        parts.setdefault("models", []).append(pd.DataFrame([lm.facts()]))
    ex = _enc_pair(0, *SENTS[0])
    parts.setdefault("k21_maps", []).append(k21_compute.example_maps(bert, ex, model=bert.name)["k21_maps"])
    parts.setdefault("k21_maps", []).append(
        k21_compute.example_maps(gpt2, causal_wiki[0], model=gpt2.name)["k21_maps"])
    tables = {k: pd.concat(v, ignore_index=True) for k, v in parts.items()}
    tables["models"] = tables["models"][MODEL_COLS]
    tables["datasets"] = pd.DataFrame(ds_rows)[DATASET_COLS]
    return tables


# ------------------------------------------------------------------ schemas and ranges


def test_schemas_exact(computed):
    for name, cols in COLS.items():
        assert list(computed[name].columns) == cols, name
        assert len(computed[name]), name
    assert list(computed["models"].columns) == MODEL_COLS
    m = computed["models"].set_index("model")
    assert m.loc["tiny-bert", "ln_position"] == schema.POST_LN.id and m.loc["tiny-gpt2", "ln_position"] == schema.PRE_LN.id
    assert int(m.loc["tiny-bert", "layers"]) == 2 and int(m.loc["tiny-bert", "d_model"]) == 32


def test_tokens_rows_ranges_and_categories(computed):
    tok = computed["k21_tokens"]
    # one row per (model, dataset, seq, layer, pos)
    assert not tok.duplicated(["model", "dataset", "seq", "layer", "pos"]).any()
    bw = tok[(tok.model == "tiny-bert") & (tok.dataset == "wiki")]
    assert len(bw) == 2 * sum(len(e) for e in _wiki(True))
    assert tok[METHODS].stack().between(0, 100).all()
    # ATTNRES-W = ATTN-W / 2 token by token
    np.testing.assert_allclose(tok["ATTNRES-W"], tok["ATTN-W"] / 2, rtol=1e-6, atol=1e-5)
    assert set(bw.category) == {"Normal", "[MASK]", "[CLS]", "[SEP]"}
    assert (bw[bw.category == "[MASK]"].token == "[MASK]").all()
    assert set(tok[tok.model == "tiny-gpt2"].category) == {"Normal", "[CLS]"}
    # ratios are in positions order and tokens are the sequence's own
    e = _wiki(True)[1]
    got = bw[(bw.seq == 1) & (bw.layer == 0)]
    assert got.pos.tolist() == list(range(len(e))) and got.token.tolist() == e.tokens
    assert (computed["recon_errors"].max_rel_error <= 1e-4).all()
    assert set(computed["recon_errors"].scope) >= {"ATTN", "ATTNRES", "ATB"}  # ratios stop before FF


def test_freq_table(computed):
    f = computed["k21_freq"]
    assert pd.api.types.is_integer_dtype(f.freq_rank) and (f.freq_rank >= 1).all()
    assert not f.duplicated(["model", "dataset", "seq", "pos"]).any()
    assert f[METHODS].stack().between(0, 100).all()
    assert "[MASK]" not in set(f.category)  # unmasked inputs
    plain = _wiki(False)
    ranks = _ranks(plain)
    sub = f[(f.model == "tiny-bert") & (f.dataset == "wiki")]
    assert sub.freq_rank.tolist() == [ranks[i] for e in plain for i in e.input_ids]
    rho = k21_stats.frequency_spearman(sub)
    assert rho[["rho_all", "rho_no_special"]].stack().between(-1, 1).all()


def test_expansion_rates_match_naive(bert, gpt2, computed):
    llama = tiny("llama")
    for lm in (bert, gpt2, llama):
        got = k21_compute.expansion_rates(lm, model=lm.name)
        assert list(got.columns) == COLS["k21_expansion"] and got.layer.tolist() == list(range(lm.n_layers))
        assert (got.expansion_rate > 0).all()
        np.testing.assert_allclose(got.expansion_rate, _naive_expansion(lm), rtol=1e-5)


def _naive_expansion(lm) -> list[float]:
    """From the raw HF modules, head by head: T = [[sum_h W_V^g(h) W_O^h, 0], [sum_h b_V^g(h) W_O^h, 1]]."""
    m, cfg = lm.model, lm.model.config
    out = []
    for layer in range(cfg.num_hidden_layers if hasattr(cfg, "num_hidden_layers") else cfg.n_layer):
        if cfg.model_type == "bert":
            a = m.encoder.layer[layer].attention
            wv, bv = a.self.value.weight.T, a.self.value.bias
            wo = a.output.dense.weight.T
            H, kv = cfg.num_attention_heads, cfg.num_attention_heads
        elif cfg.model_type == "gpt2":
            a = m.h[layer].attn
            d = cfg.n_embd
            wv, bv = a.c_attn.weight[:, 2 * d:], a.c_attn.bias[2 * d:]  # Conv1D: (in, out)
            wo = a.c_proj.weight
            H, kv = cfg.n_head, cfg.n_head
        else:  # llama, grouped-query
            a = m.layers[layer].self_attn
            wv, bv = a.v_proj.weight.T, a.v_proj.bias
            wo = a.o_proj.weight.T
            H, kv = cfg.num_attention_heads, cfg.num_key_value_heads
        d = wo.shape[1]
        dh = d // H
        lin = torch.zeros(d, d, dtype=torch.float64)
        bias = torch.zeros(d, dtype=torch.float64)
        for h in range(H):
            g = h // (H // kv)
            v = wv[:, g * dh:(g + 1) * dh].double()
            o = wo[h * dh:(h + 1) * dh].double()
            lin += v @ o
            if bv is not None:
                bias += bv[g * dh:(g + 1) * dh].double() @ o
        t = torch.zeros(d + 1, d + 1, dtype=torch.float64)
        t[:d, :d], t[d, :d], t[d, d] = lin, bias, 1.0
        out.append(float(torch.linalg.matrix_norm(t.detach()) / np.sqrt(d + 1)))
    return out


def test_example_maps(computed):
    maps = computed["k21_maps"]
    for model, n in (("tiny-bert", len(_enc_pair(0, *SENTS[0]))), ("tiny-gpt2", 1 + len(SENTS[0][0] + SENTS[0][1]))):
        sub = maps[maps.model == model]
        assert len(sub) == 2 * len(METHODS) * n * n
        assert set(sub.method) == set(METHODS)
        assert (sub.value >= 0).all()
        w = sub[sub.method == "ATTN-W"].groupby(["layer", "i"]).value.sum()
        np.testing.assert_allclose(w, 1.0, atol=1e-5)  # attention rows sum to 1
        aw = sub[sub.method == "ATTN-W"].set_index(["layer", "i", "j"]).value
        arw = sub[sub.method == "ATTNRES-W"].set_index(["layer", "i", "j"]).value
        eye = (aw.index.get_level_values("i") == aw.index.get_level_values("j")).astype(float)
        np.testing.assert_allclose(arw.loc[aw.index], 0.5 * aw + 0.5 * eye, atol=1e-6)
        if model == "tiny-gpt2":  # causal: nothing flows from the future
            assert (sub[sub.j > sub.i].value.abs() < 1e-6).all()


# ------------------------------------------------------------------ the naive oracle


def _oracle_tokens(lm, encoded: list[EncodedSeq], dataset: str) -> pd.DataFrame:
    """``k21_tokens`` built from the naive reference decomposition (one unpadded forward per sequence)."""
    scope_of = lm.adapter.layout.k21_points
    rows = []
    for e in encoded:
        ids = torch.tensor([e.input_ids])
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if e.token_type_ids is not None:
            inputs["token_type_ids"] = torch.tensor([e.token_type_ids])
        caps = forward_capture(lm.model, lm.adapter, inputs)
        for layer, cap in enumerate(caps):
            x, alpha = cap.x[0], cap.alpha[0]
            ref = reference_layer(lm.layer_weights(layer), x, alpha, ig="closed")
            r = {"ATTN-W": 1 - torch.diagonal(alpha.mean(0))}
            r["ATTNRES-W"] = r["ATTN-W"] / 2
            for m, s in scope_of.items():
                r[m] = reference_ratio(ref[s][0])
            for p in range(len(e)):
                rows.append(dict(model=lm.name, dataset=dataset, seq=e.seq, layer=layer, pos=p, token=e.tokens[p],
                                 category=e.category[p], **{m: 100 * float(r[m][p]) for m in METHODS}))
    return pd.DataFrame(rows, columns=COLS["k21_tokens"])


@pytest.mark.parametrize("which", ["bert", "gpt2"])
def test_oracle_reproduces_ratios_and_statistics(which, bert, gpt2, computed):
    lm = bert if which == "bert" else gpt2
    masked = _wiki(True) if which == "bert" else [_enc_causal(k, a + b) for k, (a, b) in enumerate(SENTS)]
    fast = computed["k21_tokens"]
    fast = fast[(fast.model == lm.name) & (fast.dataset == "wiki")].reset_index(drop=True)
    oracle = _oracle_tokens(lm, masked, "wiki").sort_values(["seq", "layer", "pos"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(fast.drop(columns=METHODS), oracle.drop(columns=METHODS))
    # every layer, token and method (percent)
    np.testing.assert_allclose(fast[METHODS].to_numpy(float), oracle[METHODS].to_numpy(float), atol=2e-3)

    # Table 2 and Fig. 3 from the oracle equal those from the engine
    pd.testing.assert_frame_equal(k21_stats.pooled_stats(fast), k21_stats.pooled_stats(oracle), atol=2e-3)
    pd.testing.assert_frame_equal(k21_stats.layer_category_means(fast), k21_stats.layer_category_means(oracle),
                                  atol=2e-3)
    # Table 3: Spearman on unmasked inputs
    plain = _wiki(False) if which == "bert" else masked
    ranks = _ranks(plain)
    f_fast = computed["k21_freq"]
    f_fast = f_fast[(f_fast.model == lm.name) & (f_fast.dataset == "wiki")].reset_index(drop=True)
    f_oracle = k21_compute.frequency_table(_oracle_tokens(lm, plain, "wiki"), plain, ranks)
    # (float32 storage can turn two ratios 1e-5 apart into a tie: that moves rho by O(1/n^2), not more)
    pd.testing.assert_frame_equal(k21_stats.frequency_spearman(f_fast), k21_stats.frequency_spearman(f_oracle),
                                  atol=5e-3)


# ------------------------------------------------------------------ every K21 figure from computed tables


NOT_CONFIGURED = (["k21-tab5"] + [f"k21-fig{k}" for k in range(5, 12)] + ["k21-fig13", "k21-fig14", "k21-tab7",
                                                                          "k21-fig15", "k21-fig16", "k21-fig17",
                                                                          "k21-tab11"])


def test_every_k21_figure_builds_and_validates(computed):
    roles = Roles(primary_encoder="tiny-bert", primary_causal="tiny-gpt2", encoders=("tiny-bert", "tiny-gpt2"),
                  variants=(), seed_group=(), datasets=("wiki", "sst2"))
    ctx = FigureContext(tables=computed, roles=roles)
    failing = []
    for spec in k21.SPECS:
        try:
            r = spec.build(ctx)
        except NotConfigured as e:
            failing.append(spec.id)
            assert e.config_entry.strip()
            continue
        assert isinstance(r, FigureResult) and isinstance(r.data, pd.DataFrame) and len(r.data), spec.id
        assert r.reading, spec.id
        if spec.kind == "table":
            assert isinstance(r.table, pd.DataFrame) and len(r.table), spec.id
        if spec.kind == "chart":
            assert r.chart is not None, spec.id
        if r.chart is not None:
            with alt.data_transformers.enable("default", max_rows=None):
                d = r.chart.to_dict(validate=True)
            assert json.dumps(d)
        for c in r.data.columns:
            if c in {"mean", "max", "min", "value", *METHODS} and pd.api.types.is_numeric_dtype(r.data[c]) \
                    and "expansion_rate" not in r.data.columns:
                assert r.data[c].dropna().between(0, 100).all(), (spec.id, c)
            if c.startswith("rho") and pd.api.types.is_numeric_dtype(r.data[c]):
                assert r.data[c].dropna().between(-1, 1).all(), (spec.id, c)
    # NotConfigured only for the ids that need variants, a seed group or more datasets
    assert failing == NOT_CONFIGURED


def test_fig1_and_tab2_values_come_from_the_tables(computed):
    roles = Roles(primary_encoder="tiny-bert", primary_causal=None, encoders=("tiny-bert",), variants=(),
                  seed_group=(), datasets=("wiki", "sst2"))
    ctx = FigureContext(tables=computed, roles=roles)
    tab2 = mixing.build_tab2(ctx)
    tok = computed["k21_tokens"]
    want = k21_stats.pooled_stats(tok[(tok.model == "tiny-bert") & (tok.dataset == "wiki")]).set_index("method")
    got = tab2.data[tab2.data.model == "tiny-bert"].set_index("method") if "model" in tab2.data else \
        tab2.data.set_index("method")
    for m in METHODS:
        assert got.loc[m, "mean"] == pytest.approx(want.loc[m, "mean"], abs=1e-4)
    fig3 = categories.build_fig3(ctx)
    assert set(fig3.data.category) == {"Normal", "[MASK]", "[CLS]", "[SEP]", "Overall"}


# ------------------------------------------------------------------ a real tokenizer (MiniLM)


def test_minilm_on_wiki_items():
    from report_builder.data import load_eval_set
    from report_builder.data.encode import encode
    from report_builder.models.loading import load

    try:
        lm = load("minilm")
    except Exception as e:  # pragma: no cover - the package is a declared dependency
        pytest.skip(f"MiniLM not installed: {e}")
    es = load_eval_set("wiki", n=3)
    enc = encode(es, lm.tokenizer, causal=False, max_length=48, mask_rate=0.12, mask_seed=0)
    out = k21_compute.mixing_ratios(lm, enc, model="minilm", dataset="wiki", batch_size=3)
    tok = out["k21_tokens"]
    assert list(tok.columns) == COLS["k21_tokens"]
    assert len(tok) == lm.n_layers * sum(len(e) for e in enc)
    assert tok[METHODS].stack().between(0, 100).all()
    np.testing.assert_allclose(tok["ATTNRES-W"], tok["ATTN-W"] / 2, rtol=1e-6, atol=1e-5)
    assert set(tok.category) == {"Normal", "[MASK]", "[CLS]", "[SEP]"}
    assert (tok[tok.category == "[MASK]"].token == "[MASK]").all()
    assert (out["recon_errors"].max_rel_error <= 1e-4).all()
    # the ATTNRESLN-N ratios are far smaller than ATTN-N (K21's main finding holds on a trained model)
    st = k21_stats.pooled_stats(tok).set_index("method")
    assert st.loc["ATTNRESLN-N", "mean"] < st.loc["ATTN-N", "mean"]
