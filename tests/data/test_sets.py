"""Offline evaluation sets, the registry and the content hash."""

from __future__ import annotations

import pytest

from report_builder.errors import DataError
from report_builder.data import DATASETS, EvalSet, TextItem, list_datasets, load_eval_set
from report_builder.data import wiki
from report_builder.data.evalset import DATASHEET_KEYS, items_hash
from report_builder.data.text import split_sentences


def test_wiki_is_deterministic_and_large_enough():
    first = load_eval_set("wiki")
    wiki._build.cache_clear()  # force a real rebuild
    second = load_eval_set("wiki")
    assert first is not second
    assert first.hash == second.hash
    assert first.items == second.items
    assert len(first) >= 400
    assert all(it.text_b for it in first.items)
    assert len({it.id for it in first.items}) == len(first)
    assert first.datasheet["domain"] == "Wikipedia"
    assert "CC BY-SA" in first.datasheet["licence"]
    assert set(DATASHEET_KEYS) <= set(first.datasheet)
    assert first.datasheet["size"] == len(first)


def test_wiki_text_is_clean():
    s = load_eval_set("wiki")
    for it in s.items:
        for text in (it.text_a, it.text_b):
            assert not any(mark in text for mark in ("[[", "]]", "{{", "}}", "<ref", "'''", "=="))
            assert len(text.split()) <= wiki.SPAN_WORDS


def test_offline_samples():
    sent = load_eval_set("sentiment-sample")
    news = load_eval_set("news-sample")
    assert len(sent) == 200 and len(news) == 300
    assert not any(it.text_a.startswith("__label__") for it in sent.items)
    assert all(it.text_b is None for it in sent.items + news.items)
    assert max(len(it.text_a.split()) for it in news.items) <= 60
    assert news.datasheet["domain"] == "News"


def test_hash_depends_on_content_only():
    a = (TextItem("x-0", "Hello world."), TextItem("x-1", "A", "B"))
    s1 = EvalSet("x", "X", a, {"source": "one"})
    s2 = EvalSet("x", "Other name", a, {"source": "two"})
    assert s1.hash == s2.hash == items_hash(list(a))
    assert len(s1.hash) == 16
    changed = EvalSet("x", "X", (TextItem("x-0", "Hello world!"), a[1]), {})
    assert changed.hash != s1.hash
    # pinned: canonical JSON of the items, independent of machine and run
    assert items_hash([TextItem("a", "b", None)]) == items_hash([TextItem("a", "b")])


def test_n_takes_a_prefix():
    full = load_eval_set("news-sample")
    five = load_eval_set("news-sample", n=5)
    assert five.items == full.items[:5]
    assert five.datasheet["size"] == 5
    assert five.hash != full.hash
    with pytest.raises(DataError, match="positive"):
        load_eval_set("news-sample", n=0)


def test_unknown_id_lists_known_ids():
    with pytest.raises(DataError) as err:
        load_eval_set("wikipedia-xl")
    msg = str(err.value)
    assert "wikipedia-xl" in msg
    for known in DATASETS:
        assert known in msg


def test_list_datasets_rows():
    rows = list_datasets()
    assert [r["id"] for r in rows] == ["wiki", "sentiment-sample", "news-sample"]
    for r in rows:
        assert set(r) == {"id", "name", "domain", "size", "hash"}
        assert r["size"] > 0 and len(r["hash"]) == 16


def test_sentence_splitter_keeps_abbreviations():
    text = "J. R. R. Tolkien wrote it. Mr. Smith paid 3.5 dollars, e.g. in cash. \"Why?\" he asked."
    assert split_sentences(text) == [
        "J. R. R. Tolkien wrote it.",
        "Mr. Smith paid 3.5 dollars, e.g. in cash.",
        '"Why?" he asked.',
    ]


def test_a_prefix_says_so_in_its_datasheet():
    """The default build's wiki set (n: 256) was described on the Models & data page and in k21-tab1's data.csv
    as '... 992 of 4446 candidate pairs drawn with random.Random(0), kept in file order' beside 'Samples 256':
    the datasheet of a prefix (`EvalSet.head`) kept the whole set's sentence. It now says which items are kept."""
    full = load_eval_set("wiki")
    few = load_eval_set("wiki", n=7)
    assert few.datasheet["built"].startswith(full.datasheet["built"])
    assert f"first 7 of these {len(full.items)}" in few.datasheet["built"], few.datasheet["built"]
    assert load_eval_set("wiki", n=len(full.items)).datasheet["built"] == full.datasheet["built"]
