"""Tests of the K24 statistics in report_builder.stats: maps, ctx_change, pair_categories, context_snippet,
top_pairs, res_ln and host_stats (pure numpy/pandas; fast)."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from report_builder import schema
from report_builder.stats.context_snippet import context_snippet
from report_builder.stats.ctx_change import _rank, ctx_change, sequence_ctx_changes, summarise_ctx
from report_builder.stats.maps import ffamp, row_normalise, valid_pairs_mask
from report_builder.stats.pair_categories import (CATEGORY_ORDER, find_name_spans, infer_word_ids, pair_categories,
                                                  pair_category, pair_category_codes)
from report_builder.stats.res_ln import kept_ratio, norm_ratio_summary
from report_builder.stats.top_pairs import SeqInfo, TopPairs, category_shares, seq_pairs, top_pairs

WP_TOKENS = ["[CLS]", "the", "new", "york", "times", "play", "##ing", "the", ".", "[SEP]"]
WP_TEXT = "the New York Times playing the."
WP_OFFSETS = [(0, 0), (0, 3), (4, 7), (8, 12), (13, 18), (19, 23), (23, 26), (27, 30), (30, 31), (0, 0)]
WP_WORD_IDS = [None, 0, 1, 2, 3, 4, 4, 5, 6, None]
WP_SPECIAL = [True] + [False] * 8 + [True]

BPE_TOKENS = ["<s>", "The", "ĠNew", "ĠYork", "Ġplay", "ing", "Ġthe", "."]
BPE_TEXT = "The New York playing the."
BPE_OFFSETS = [(0, 0), (0, 3), (3, 7), (7, 12), (12, 17), (17, 20), (20, 24), (24, 25)]
BPE_SPECIAL = [True] + [False] * 7


# --- contextualization change ----------------------------------------------------------------

def test_ctx_change_identical_is_zero():
    a = np.random.default_rng(0).random((7, 7))
    assert ctx_change(a, a, causal=False) == pytest.approx(0.0)
    assert ctx_change(a, 3 * a + 1, causal=True) == pytest.approx(0.0)  # monotone transform


def test_ctx_change_reversed_ranks_is_two():
    a = np.random.default_rng(1).random((6, 6))
    assert ctx_change(a, -a, causal=False) == pytest.approx(2.0)


def test_ctx_change_range_and_matches_scipy():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n = int(rng.integers(2, 12))
        a, b = rng.random((n, n)), rng.integers(0, 3, size=(n, n)).astype(float)  # ties in b
        v = ctx_change(a, b, causal=False)
        if np.isnan(v):
            continue
        assert 0.0 <= v <= 2.0
        assert v == pytest.approx(1 - spearmanr(a.ravel(), b.ravel())[0])


def test_ctx_change_constant_map_is_nan():
    a = np.random.default_rng(3).random((4, 4))
    assert np.isnan(ctx_change(np.ones((4, 4)), a, causal=False))
    assert np.isnan(ctx_change(a[:1, :1], a[:1, :1], causal=True))  # a single valid pair


def test_causal_mask_uses_lower_triangle_only():
    m = valid_pairs_mask(4, causal=True)
    assert m.dtype == bool and m.shape == (4, 4)
    assert all(m[i, j] == (j <= i) for i in range(4) for j in range(4))
    assert valid_pairs_mask(3, causal=False).all()
    rng = np.random.default_rng(4)
    a, b = rng.random((6, 6)), rng.random((6, 6))
    b2 = b.copy()
    b2[np.triu_indices(6, 1)] = rng.random(15) * 100  # upper triangle must not matter
    assert ctx_change(a, b, causal=True) == pytest.approx(ctx_change(a, b2, causal=True))
    assert ctx_change(a, b, causal=False) != pytest.approx(ctx_change(a, b2, causal=False))


def test_sequence_ctx_changes_and_summary():
    rng = np.random.default_rng(5)
    rows = []
    for seq in range(3):
        maps = {s: rng.random((5, 5)) for s in schema.PRE_LN.scopes}
        for r in sequence_ctx_changes(maps, schema.PRE_LN.id, causal=True):
            rows.append(dict(model="m", dataset="d", layer=0, seq=seq, **r))
    df = summarise_ctx(pd.DataFrame(rows))
    assert list(df.columns) == ["model", "dataset", "layer", "kind", "component", "from_scope", "to_scope",
                                "change", "change_sd", "n_seqs"]
    comp = df[df.kind == "component"]
    assert list(comp.component) == ["LN", "FF", "RES"]
    assert list(comp.from_scope) == ["ATB", "ATBLN", "ATBLNFF"]
    cum = df[df.kind == "cumulative"]
    assert list(cum.component) == ["ATB→ATBLN", "ATB→ATBLNFF", "ATB→ATBLNFFRES"]
    assert (df.n_seqs == 3).all()
    # first cumulative equals first component
    assert cum.change.iloc[0] == pytest.approx(comp.change.iloc[0])


# --- FF-amp ------------------------------------------------------------------------------------

def test_row_normalise_and_ffamp_rows_sum_to_zero():
    rng = np.random.default_rng(6)
    a, b = rng.random((5, 5)), rng.random((5, 5))
    a[2] = 0.0
    na = row_normalise(a)
    assert np.allclose(na[[0, 1, 3, 4]].sum(1), 1.0) and (na[2] == 0).all()
    amp = ffamp(rng.random((5, 5)), b)
    assert np.allclose(amp.sum(1), 0.0)
    causal = ffamp(np.tril(rng.random((5, 5))), np.tril(b))
    assert np.allclose(causal.sum(1), 0.0) and np.allclose(np.triu(causal, 1), 0.0)


# --- categories --------------------------------------------------------------------------------

def test_categories_wordpiece():
    c = pair_categories(WP_TOKENS, WP_WORD_IDS, WP_OFFSETS, WP_TEXT, WP_SPECIAL)
    assert c.shape == (10, 10)
    assert c[0, 1] == c[9, 4] == c[1, 9] == "special token"
    assert c[5, 6] == c[6, 5] == "same word"  # play ##ing
    assert c[2, 4] == c[4, 2] == "multi-word name"  # new … times inside "New York Times"
    assert c[2, 3] == "multi-word name"  # adjacent but inside the name: name wins (order)
    assert c[4, 5] == "adjacent"  # times → play
    assert c[1, 7] == "identical token"  # the … the
    assert c[6, 7] == "adjacent"  # ##ing → the (adjacent before identical/punctuation)
    assert c[2, 8] == "punctuation"
    assert c[1, 5] == "other"
    assert pair_category(WP_TOKENS, WP_WORD_IDS, WP_OFFSETS, WP_TEXT, WP_SPECIAL, 5, 6) == "same word"
    # word ids inferred from ## markers give the same answer
    assert (pair_categories(WP_TOKENS, None, WP_OFFSETS, WP_TEXT, WP_SPECIAL) == c).all()
    assert set(np.unique(c.astype(str))) <= set(CATEGORY_ORDER)


def test_categories_bpe():
    wids = infer_word_ids(BPE_TOKENS, BPE_SPECIAL)
    assert wids == [None, 0, 1, 2, 3, 3, 4, 5]  # "." is its own word, "ing" continues "Ġplay"
    c = pair_categories(BPE_TOKENS, None, BPE_OFFSETS, BPE_TEXT, BPE_SPECIAL)
    assert c[0, 3] == "special token"
    assert c[4, 5] == c[5, 4] == "same word"
    assert c[2, 3] == "multi-word name"  # "New York" (leading "The" dropped)
    assert c[1, 2] == "adjacent"  # The → ĠNew: "The" is not part of the name
    assert c[1, 6] == "other"  # "The" vs "Ġthe": case differs
    assert c[7, 2] == "punctuation"
    assert c[6, 7] == "adjacent"


def test_identical_token_across_marker():
    toks = ["<s>", "the", "Ġcat", "Ġsaw", "Ġthe", "Ġdog"]
    c = pair_categories(toks, None, None, "", [True] + [False] * 5)
    assert c[1, 4] == "identical token"  # "the" and "Ġthe" are the same string after the marker


def test_find_name_spans():
    assert find_name_spans("The New York Times said so.") == [(4, 18)]
    assert find_name_spans("In Berlin, Albert Einstein worked.") == [(11, 26)]
    assert find_name_spans("nothing here. The end") == []


def test_context_snippet_marks_tokens():
    s = context_snippet(WP_TEXT, WP_OFFSETS, 6, 2, width=40, tokens=WP_TOKENS)
    assert s == "the ⟦New⟧ York Times play⟦ing⟧ the."
    s = context_snippet(WP_TEXT, WP_OFFSETS, 2, 9, width=4, tokens=WP_TOKENS)
    assert s == "the ⟦New⟧ York Times playing the.⟦[SEP]⟧"  # a special token sits after the last word
    s = context_snippet(WP_TEXT, WP_OFFSETS, 4, 2, width=4, tokens=WP_TOKENS)
    assert s == "the ⟦New⟧ York ⟦Times⟧ pla…"
    s = context_snippet(WP_TEXT, WP_OFFSETS, 8, 9, width=3, tokens=WP_TOKENS)
    assert s == "…the⟦.⟧⟦[SEP]⟧"
    s = context_snippet(BPE_TEXT, BPE_OFFSETS, 3, 2, width=0)
    assert s == "…⟦New⟧ ⟦York⟧…"


# --- top pairs ---------------------------------------------------------------------------------

def _info(n):
    toks = ["[CLS]"] + [f"w{k}" for k in range(n - 2)] + ["[SEP]"]
    return SeqInfo(tokens=toks, special=[True] + [False] * (n - 2) + [True])


@pytest.mark.parametrize("causal", [False, True])
def test_top_pairs_keeps_k_largest(causal):
    rng = np.random.default_rng(7)
    seqs = [(s, rng.normal(size=(n, n)), _info(n)) for s, n in enumerate([5, 8, 3, 9])]
    top, base = top_pairs(seqs, k=7, causal=causal)
    brute = sorted(((float(a[i, j]), s, i, j) for s, a, info in seqs
                    for i, j in itertools.product(range(a.shape[0]), repeat=2)
                    if i != j and (j <= i or not causal)), reverse=True)[:7]
    assert list(top["rank"]) == list(range(1, 8))
    assert np.allclose(top["amp"], [b[0] for b in brute])
    assert list(zip(top.seq, top.i, top.j)) == [b[1:] for b in brute]
    if causal:
        assert (top.j < top.i).all()
    n_valid = sum((a.shape[0] * (a.shape[0] - 1)) // (2 if causal else 1) for _, a, _ in seqs)
    assert base.base_count.sum() == n_valid
    assert list(base.category) == list(CATEGORY_ORDER)
    # order of feeding does not matter
    top2, _ = top_pairs(reversed(seqs), k=7, causal=causal)
    assert list(zip(top2.seq, top2.i, top2.j)) == list(zip(top.seq, top.i, top.j))


def test_top_pairs_records_before_after_and_context():
    info = SeqInfo(WP_TOKENS, WP_SPECIAL, WP_TEXT, WP_OFFSETS, WP_WORD_IDS)
    rng = np.random.default_rng(8)
    b, a = row_normalise(rng.random((10, 10))), row_normalise(rng.random((10, 10)))
    tp = TopPairs(k=3)
    tp.add(0, a - b, info, before=b, after=a)
    top = tp.top_frame()
    assert np.allclose(top.amp, top.after - top.before)
    assert top.context.str.count("⟦").ge(1).all()


def test_category_shares():
    top = pd.DataFrame({"layer": [0, 0, 0, 1], "category": ["same word", "same word", "other", "adjacent"]})
    base = pd.DataFrame({"layer": [0, 0, 1], "category": ["same word", "other", "other"],
                         "base_count": [10, 90, 50]})
    out = category_shares(top, base)
    assert list(out.columns) == ["layer", "category", "top_count", "top_share", "base_count", "base_share"]
    assert len(out) == 2 * len(CATEGORY_ORDER)
    l0 = out[out.layer == 0].set_index("category")
    assert l0.loc["same word", "top_share"] == pytest.approx(2 / 3)
    assert l0.loc["same word", "base_share"] == pytest.approx(0.1)
    assert out.groupby("layer").top_share.sum().tolist() == pytest.approx([1.0, 1.0])


def test_norm_summaries():
    d = norm_ratio_summary(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 0.0]))
    assert d["ratio_mean"] == pytest.approx(0.75) and d["ff_norm_mean"] == pytest.approx(2.0)
    k = kept_ratio(np.array([2.0, 0.0]), np.array([1.0, 1.0]))
    assert k[0] == pytest.approx(0.5) and np.isnan(k[1])


# --- the fast host statistics equal the previous implementation bit for bit (issue #16) ---------

def test_rank_equals_stable_rank_bit_for_bit():
    from tests.reference.k24_host_stats import old_rank

    rng = np.random.default_rng(11)
    for x in (rng.random(500), rng.integers(0, 5, 500).astype(float), np.array([0.0, -0.0, 1.0, 0.0]),
              np.array([np.nan, 1.0, np.nan, 1.0, -np.inf, np.inf, 0.5]), np.ones(7), np.zeros(0), np.ones(1)):
        new, old = _rank(x), old_rank(x)
        assert new.tobytes() == old.tobytes(), x
        x32 = x.astype(np.float32)  # float32 maps are ranked as they are: as their exact float64 casts
        assert _rank(x32).tobytes() == old_rank(x32.astype(np.float64)).tobytes(), x
    x = rng.integers(0, 9, 300).astype(float)
    assert np.array_equal(_rank(x), __import__("scipy.stats").stats.rankdata(x))


@pytest.mark.parametrize("causal", [False, True])
def test_ctx_change_equals_previous_implementation(causal):
    from tests.reference.k24_host_stats import old_ctx_change, old_sequence_ctx_changes

    rng = np.random.default_rng(12)
    lay = schema.PRE_LN if causal else schema.POST_LN
    for n in (1, 2, 3, 9, 17):
        for kind in ("random", "ties", "constant", "nan"):
            maps = {}
            for s in lay.scopes:
                m = rng.random((n, n)) if kind != "ties" else rng.integers(0, 3, (n, n)) / 3
                maps[s] = np.tril(m) if causal else m
            if kind == "constant":
                maps[lay.scopes[1]] = np.ones((n, n))
            if kind == "nan" and n > 1:
                maps[lay.scopes[0]][n - 1, 0] = np.nan
                maps[lay.scopes[2]][0, 0] = np.nan
            new = sequence_ctx_changes(maps, lay.id, causal)
            old = old_sequence_ctx_changes(maps, lay.id, causal)
            assert [r["component"] for r in new] == [r["component"] for r in old]
            assert np.array([r["change"] for r in new]).tobytes() == np.array([r["change"] for r in old]).tobytes()
            mask = rng.random((n, n)) > 0.3
            a, b = maps[lay.scopes[0]], maps[lay.scopes[-1]]
            assert np.array(ctx_change(a, b, causal, mask)).tobytes() == \
                np.array(old_ctx_change(a, b, causal, mask)).tobytes()
    with pytest.raises(ValueError, match="equal"):
        ctx_change(np.ones((3, 3)), np.ones((4, 4)), causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_host_stats_equal_previous_implementation(causal, ties):
    """`stats.host_stats.HostStats` (the K24 pass's per-sequence statistics) against the code it replaced, on
    random maps with WordPiece/BPE sequences, with and without special tokens: bit-identical tables."""
    from report_builder.bench.host_stats import random_maps, run_host
    from tests.reference.k24_host_stats import NaiveHostStats, tables_identical
    from report_builder.data.encode import EncodedSeq
    from report_builder.stats.host_stats import HostStats

    def enc(seq, toks, special, text, offsets, word_ids):
        n = len(toks)
        return EncodedSeq(input_ids=list(range(n)), token_type_ids=None, tokens=toks, special=special,
                          masked=[False] * n, category=["Normal"] * n, word_ids=word_ids, offsets=offsets,
                          text=text, item_id=f"s{seq}", seq=seq)

    seqs = [enc(0, WP_TOKENS, WP_SPECIAL, WP_TEXT, WP_OFFSETS, WP_WORD_IDS),
            enc(1, BPE_TOKENS, BPE_SPECIAL, BPE_TEXT, BPE_OFFSETS, None),
            enc(2, WP_TOKENS[:3], WP_SPECIAL[:3], WP_TEXT, WP_OFFSETS[:3], WP_WORD_IDS[:3])]
    lay = schema.PRE_LN if causal else schema.POST_LN
    maps = random_maps(lay, causal, [len(e) for e in seqs], 3, seed=13, ties=ties)
    for inc in (True, False):
        new_st = HostStats(lay, causal, top_k=4, include_special=inc, n_layers=3)
        for e, per_layer in zip(seqs, maps):
            for layer, m in enumerate(per_layer):
                new_st.add(e, layer, m)
        assert new_st._pairs == {}  # each sequence's pairs are dropped after its last layer
        _, old = run_host(NaiveHostStats, lay, causal, seqs, maps, 4, inc)
        assert tables_identical(new_st.tables(), old)
        assert len(old["top_pairs"]) == 3 * 4
    # the check itself can fail: a one-ulp change is caught
    other = new_st.tables()
    other["top_pairs"].loc[0, "amp"] = np.nextafter(other["top_pairs"].loc[0, "amp"], 2.0)
    assert not tables_identical(other, new_st.tables())


def test_pair_category_codes_match_names():
    codes = pair_category_codes(WP_TOKENS, WP_WORD_IDS, WP_OFFSETS, WP_TEXT, WP_SPECIAL)
    names = pair_categories(WP_TOKENS, WP_WORD_IDS, WP_OFFSETS, WP_TEXT, WP_SPECIAL)
    assert codes.dtype == np.int8 and [[CATEGORY_ORDER[c] for c in r] for r in codes] == names.tolist()
    sp = seq_pairs(SeqInfo(WP_TOKENS, WP_SPECIAL, WP_TEXT, WP_OFFSETS, WP_WORD_IDS), causal=True)
    assert sp.counts.sum() == 10 * 9 // 2 and len(sp.flat) == 45


def test_no_torch_import():
    code = ("import sys, report_builder.stats.host_stats, report_builder.bench.host_stats, "
            "tests.reference.k24_host_stats; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
