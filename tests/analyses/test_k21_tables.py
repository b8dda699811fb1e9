"""The K21 host statistics (`stats.k21_tables`, `k21_compute.TensorRows`) against the code they replaced
(`tests/reference/k21_host_stats.py`), bit for bit: same values, dtypes, columns, rows and parquet bytes."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch

from report_builder.analyses.k21_compute import TensorRows
from report_builder.data.encode import EncodedSeq
from report_builder.schema import K21_METHODS
from report_builder.stats import k21_tables
from report_builder.stats.k21_tables import TokenRows, frequency_table
from tests.reference.k21_host_stats import NaiveTokenRows, naive_frequency_table
from tests.reference.k24_host_stats import tables_identical

CATS = ["[CLS]", "Normal", "[MASK]", "[SEP]"]


def _enc(seq: int, n: int, rng) -> EncodedSeq:
    ids = rng.integers(0, 60, n).tolist()
    tokens = [f"t{i}" if i % 5 else f"<b>&'\"{i}" for i in ids]  # hostile strings are just strings here
    cats = [CATS[0]] + [CATS[1 + int(rng.integers(0, 2))] for _ in range(n - 2)] + [CATS[3]]
    return EncodedSeq(input_ids=ids, token_type_ids=None, tokens=tokens, special=[False] * n, masked=[False] * n,
                      category=cats[:n], word_ids=list(range(n)), offsets=[None] * n, text="", item_id=f"i{seq}",
                      seq=seq)


def _ratios(n: int, rng, *, nan_ln: bool = False, spread: bool = False, dtype=torch.float32) -> dict:
    out = {}
    for m in K21_METHODS:
        v = rng.random(n).astype(np.float32)
        if spread:  # large and small values: the layer sum's rounding (Kahan's compensation) matters
            v = v * np.float32(10.0) ** rng.integers(-6, 7, n).astype(np.float32)
        out[m] = torch.from_numpy(v).to(dtype)
    if nan_ln:
        out["ATTNRESLN-N"] = torch.full((n,), float("nan"), dtype=dtype)
    return out


def _pass(n_seqs=5, n_layers=4, seed=0, shuffle=True, **kw):
    """Encoded sequences of different lengths and their per-layer ratios, in a shuffled (batched) order."""
    rng = np.random.default_rng(seed)
    enc = [_enc(k, int(rng.integers(3, 14)), rng) for k in range(n_seqs)]
    items = [(k, layer, _ratios(len(enc[k]), rng, **kw)) for k in range(n_seqs) for layer in range(n_layers)]
    if shuffle:
        items = [items[i] for i in rng.permutation(len(items))]
    return enc, items


def _parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.reset_index(drop=True).to_parquet(buf, index=False)  # as `cache.Cache` writes tables
    return buf.getvalue()


def _same(new: pd.DataFrame, old: pd.DataFrame) -> None:
    assert tables_identical({"t": new}, {"t": old})
    assert isinstance(new.index, pd.RangeIndex) and isinstance(old.index, pd.RangeIndex)
    try:
        before = _parquet(old)
    except Exception as e:  # noqa: BLE001 - a table the cache cannot write (a token that is an int): neither can
        with pytest.raises(type(e)):
            _parquet(new)
        return
    assert _parquet(new) == before


def _tokens(enc, items, cls=TensorRows, model="m<x>", dataset="wiki"):
    rows = cls()
    for k, layer, r in items:
        rows.add(enc[k], layer, r)
    return rows.frame(model, dataset)


@pytest.mark.parametrize("kw", [{}, {"nan_ln": True}, {"spread": True}, {"dtype": torch.bfloat16},
                                {"shuffle": False}])
def test_token_rows_equal_previous_code(kw):
    enc, items = _pass(**kw)
    new, old = _tokens(enc, items), _tokens(enc, items, NaiveTokenRows)
    _same(new, old)
    assert len(new) == 4 * sum(len(e) for e in enc)


def test_token_rows_from_numpy_blocks_equal_previous_code():
    enc, items = _pass(nan_ln=True)
    rows = TokenRows()
    for k, layer, r in items:
        rows.add(enc[k], layer, np.stack([r[m].numpy() for m in K21_METHODS]))
    _same(rows.frame("m", "d"), _tokens(enc, items, NaiveTokenRows, "m", "d"))


@pytest.mark.parametrize("odd", [None, 7, "ünï\u200b"])
def test_token_rows_with_tokens_that_are_not_plain_strings(odd):
    enc, items = _pass(n_seqs=3, n_layers=2)
    enc[1].tokens[2] = odd
    _same(_tokens(enc, items), _tokens(enc, items, NaiveTokenRows))


def test_token_rows_repeated_sequence_and_no_rows():
    """A (seq, layer) added twice interleaves by pos, as the rows' stable sort did; no rows at all
    gives the previous empty frame."""
    enc, items = _pass(n_seqs=3, n_layers=2)
    enc.append(_enc(1, 6, np.random.default_rng(9)))  # a second sequence numbered 1
    rng = np.random.default_rng(3)
    items += [(3, layer, _ratios(6, rng)) for layer in (1, 0)]
    _same(_tokens(enc, items), _tokens(enc, items, NaiveTokenRows))
    _same(TensorRows().frame("m", "d"), NaiveTokenRows().frame("m", "d"))


@pytest.mark.parametrize("change", [lambda v: v[:-1], lambda v: torch.cat([v, v[:1]]), lambda v: v.unsqueeze(0),
                                    lambda v: v[:-1].to(torch.bfloat16)])
def test_token_rows_refuse_ratios_of_another_length(change):
    enc, items = _pass(n_seqs=2, n_layers=2)
    rows = TensorRows()
    for i, (k, layer, r) in enumerate(items):
        rows.add(enc[k], layer, {m: change(v) for m, v in r.items()} if i == 1 else r)
    with pytest.raises(ValueError, match="ratios"):
        rows.frame("m", "d")


def _ranks(enc) -> dict[int, int]:
    ids = sorted({i for e in enc for i in e.input_ids})
    return {i: 1 + (i * 7) % 11 for i in ids[: len(ids) - 3]}  # the last ids lack a rank: the worst


@pytest.mark.parametrize("kw", [{}, {"nan_ln": True}, {"spread": True}])
def test_frequency_table_equals_previous_code(kw, monkeypatch):
    enc, items = _pass(n_seqs=6, n_layers=12, **kw)
    toks = _tokens(enc, items)
    old = naive_frequency_table(toks, enc, _ranks(enc))
    monkeypatch.setattr(k21_tables, "_frequency_pandas", None)  # the fast path, or this test fails
    _same(frequency_table(toks, enc, _ranks(enc)), old)


def test_the_layer_mean_is_pandas_compensated_float32_sum():
    """The spread values make a plain float32 mean differ from pandas' (the variant this test would
    catch); infinities and NaN follow pandas too."""
    enc, items = _pass(n_seqs=4, n_layers=24, spread=True, shuffle=False)
    toks = _tokens(enc, items)
    toks.loc[5, "ATTN-W"] = np.inf
    toks.loc[7, "ATTN-N"] = -np.inf
    toks.loc[9, "ATTN-N"] = np.inf
    toks.loc[11, "ATTNRES-W"] = np.nan
    toks.loc[toks["seq"] == 2, "ATTNRES-N"] = np.nan  # a group with no value: NaN
    old = naive_frequency_table(toks, enc, _ranks(enc))
    _same(frequency_table(toks, enc, _ranks(enc)), old)
    plain = toks.groupby(["seq", "pos"], sort=False)["ATTNRESLN-N"].agg(
        lambda v: np.float32(np.sum(v.to_numpy(), dtype=np.float32) / np.float32(len(v))))
    assert not np.array_equal(plain.to_numpy(dtype=np.float32), old["ATTNRESLN-N"].to_numpy())


@pytest.mark.parametrize("variant", ["shuffled rows", "token differs by layer", "missing token",
                                     "missing token, one layer", "two models", "float64 column", "repeated seq",
                                     "one layer fewer"])
def test_frequency_table_of_other_layouts_equals_previous_code(variant, monkeypatch):
    """Tables not laid out as `TokenRows` writes them take pandas' groupby: still the previous result."""
    enc, items = _pass(n_seqs=4, n_layers=1 if variant.endswith("one layer") else 3)
    toks = _tokens(enc, items)
    if variant == "shuffled rows":
        toks = toks.sample(frac=1.0, random_state=0).reset_index(drop=True)
    elif variant == "token differs by layer":
        toks.loc[len(enc[0]) + 1, "token"] = "other"
    elif variant.startswith("missing token"):
        toks.loc[2, "token"] = None
    elif variant == "two models":
        toks.loc[toks["seq"] == 3, "model"] = "m2"
    elif variant == "float64 column":
        toks["ATTN-W"] = toks["ATTN-W"].astype("float64")
    elif variant == "repeated seq":
        enc = enc + [enc[1]]
    elif variant == "one layer fewer":
        toks = toks[~((toks["seq"] == 2) & (toks["layer"] == 1))].reset_index(drop=True)
    monkeypatch.setattr(k21_tables, "_layer_means", None)  # the fast path would fail
    _same(frequency_table(toks, enc, _ranks(enc)), naive_frequency_table(toks, enc, _ranks(enc)))


def test_frequency_table_missing_sequence_raises_as_before():
    enc, items = _pass(n_seqs=3, n_layers=2)
    toks = _tokens(enc, items)
    with pytest.raises(KeyError):
        naive_frequency_table(toks, enc[:2], _ranks(enc))
    with pytest.raises(KeyError):
        frequency_table(toks, enc[:2], _ranks(enc))
