"""Hand-computed checks of the K21 derived statistics (report_builder.stats.k21)."""
import math

import numpy as np
import pandas as pd
import pytest

from report_builder.stats import k21 as st


def _tokens(rows):
    """rows: (model, seq, layer, pos, category, ratio) -> k21_tokens frame with all 5 methods = ratio."""
    df = pd.DataFrame(rows, columns=["model", "seq", "layer", "pos", "category", "v"])
    df["dataset"] = "wiki"
    df["token"] = "t"
    for m in st.METHODS:
        df[m] = df["v"].astype(float)
    return df.drop(columns="v")


def test_pooled_stats_over_all_rows():
    df = _tokens([("a", 0, 0, 0, "[CLS]", 10), ("a", 0, 0, 1, "Normal", 20), ("a", 0, 1, 0, "[CLS]", 30),
                  ("a", 1, 0, 0, "Normal", 60)])
    out = st.pooled_stats(df).set_index("method")
    assert list(out.index) == list(st.METHODS)
    assert out.loc["ATTN-N", "mean"] == pytest.approx(30.0)
    assert out.loc["ATTN-N", "max"] == 60 and out.loc["ATTN-N", "min"] == 10 and out.loc["ATTN-N", "n"] == 4


def test_layer_category_means_is_mean_of_sequence_means():
    df = _tokens([
        ("a", 0, 0, 0, "[CLS]", 50), ("a", 0, 0, 1, "Normal", 10), ("a", 0, 0, 2, "Normal", 20),
        ("a", 1, 0, 0, "Normal", 60),
    ])
    out = st.layer_category_means(df)
    v = out[out["method"] == "ATTNRESLN-N"].set_index("category")
    # Normal: seq0 mean 15, seq1 mean 60 -> 37.5 (a pooled token mean would give 30)
    assert v.loc["Normal", "value"] == pytest.approx(37.5)
    assert v.loc["Normal", "n_seqs"] == 2
    # [CLS] only in seq 0 -> averaged over the sequences that have it
    assert v.loc["[CLS]", "value"] == pytest.approx(50.0)
    assert v.loc["[CLS]", "n_seqs"] == 1
    # Overall: seq0 (50+10+20)/3, seq1 60
    assert v.loc["Overall", "value"] == pytest.approx(((50 + 10 + 20) / 3 + 60) / 2)
    assert list(v.index) == ["Normal", "[CLS]", "Overall"]  # paper order, absent categories dropped
    assert set(out.columns) >= {"layer", "category", "method", "value"}


def test_layer_category_means_keeps_models_apart():
    df = _tokens([("a", 0, 0, 0, "Normal", 10), ("b", 0, 0, 0, "Normal", 30), ("b", 0, 0, 1, "Normal", 50)])
    v = st.layer_category_means(df)
    v = v[(v["method"] == "ATTN-W") & (v["category"] == "Normal")]
    # (model, seq) identifies a sequence: means 10 and 40 -> 25
    assert v["value"].iloc[0] == pytest.approx(25.0)
    assert v["n_seqs"].iloc[0] == 2


def test_seed_group_stats_mean_sd_max_min():
    df = _tokens([
        ("s0", 0, 0, 0, "Normal", 10), ("s0", 0, 0, 1, "Normal", 30),  # mean 20, max 30, min 10
        ("s1", 0, 0, 0, "Normal", 40), ("s1", 0, 0, 1, "Normal", 40),  # mean 40, max 40, min 40
        ("other", 0, 0, 0, "Normal", 99),
    ])
    out = st.seed_group_stats(df, ["s0", "s1"]).set_index("method")
    assert out.loc["ATTN-N", "mean"] == pytest.approx(30.0)
    assert out.loc["ATTN-N", "sd"] == pytest.approx(math.sqrt(((20 - 30) ** 2 + (40 - 30) ** 2) / 1))  # ddof=1
    assert out.loc["ATTN-N", "max"] == 40 and out.loc["ATTN-N", "min"] == 10
    assert out.loc["ATTN-N", "n_models"] == 2
    with pytest.raises(ValueError):
        st.seed_group_stats(df, ["missing"])


def test_frequency_spearman_all_and_without_specials():
    rank = [1, 2, 3, 4, 5, 6]
    cat = ["[CLS]", "Normal", "Normal", "Normal", "Normal", "[SEP]"]
    ratio = [0.0, 50.0, 40.0, 30.0, 20.0, 100.0]  # decreasing except the specials
    df = pd.DataFrame({"model": "a", "dataset": "wiki", "seq": 0, "pos": range(6), "token": "t", "category": cat,
                       "freq_rank": rank})
    for m in st.METHODS:
        df[m] = ratio
    out = st.frequency_spearman(df).set_index("method")
    assert out.loc["ATTNRESLN-N", "rho_no_special"] == pytest.approx(-1.0)
    from scipy.stats import spearmanr
    assert out.loc["ATTNRESLN-N", "rho_all"] == pytest.approx(spearmanr(rank, ratio).statistic)
    assert out.loc["ATTNRESLN-N", "n_all"] == 6 and out.loc["ATTNRESLN-N", "n_no_special"] == 4
    df2 = df.assign(**{m: 5.0 for m in st.METHODS})
    assert np.isnan(st.frequency_spearman(df2)["rho_all"]).all()  # constant -> undefined, not an error


def test_seed_group_spearman_mean_sd():
    frames = []
    for name, sign in (("s0", -1), ("s1", 1)):
        df = pd.DataFrame({"model": name, "dataset": "wiki", "seq": 0, "pos": range(5), "token": "t",
                           "category": "Normal", "freq_rank": [1, 2, 3, 4, 5]})
        for m in st.METHODS:
            df[m] = [sign * x for x in (1.0, 2.0, 3.0, 4.0, 5.0)]
        frames.append(df)
    out = st.seed_group_spearman(pd.concat(frames), ["s0", "s1"]).set_index("method")
    assert out.loc["ATTN-N", "rho_all_mean"] == pytest.approx(0.0)
    assert out.loc["ATTN-N", "rho_all_sd"] == pytest.approx(math.sqrt(2.0))


def test_expansion_summary():
    df = pd.DataFrame({"model": ["a", "a", "a", "b"], "layer": [0, 1, 2, 0], "expansion_rate": [1.0, 2.0, 3.0, 0.5]})
    out = st.expansion_summary(df).set_index("model")
    assert out.loc["a", "mean"] == pytest.approx(2.0)
    assert out.loc["a", "sd"] == pytest.approx(1.0)
    assert out.loc["a", "min"] == 1.0 and out.loc["a", "max"] == 3.0 and out.loc["a", "n_layers"] == 3
    assert np.isnan(out.loc["b", "sd"])
    g = st.expansion_group_summary(df, ["a", "b"])
    assert g["mean"] == pytest.approx(1.25) and g["min"] == 0.5 and g["max"] == 3.0 and g["n_models"] == 2
