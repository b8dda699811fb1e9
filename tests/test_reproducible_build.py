"""The acceptance check of reproducibility: two smoke builds from empty caches with different CPU
worker threads and batch sizes give byte-identical result tables and equal figure content hashes
(real embedded models, through the CLI). One of them is the session's smoke build (tests/conftest.py:
default threads, 1 or 2 here by load, and batch size 8); the other runs 3 worker threads with batch
size 3, so neither count is shared."""
from __future__ import annotations

import pytest

from tests.conftest import figure_hashes, smoke_build, table_bytes

pytestmark = pytest.mark.slow


def test_smoke_tables_and_figure_hashes_identical_across_threads_and_batch_sizes(smoke, tmp_path):
    a = smoke[0]
    b = tmp_path / "b"
    b.mkdir()
    log, _ = smoke_build(b, "--threads", "3", "--set", "batch_size=3")
    assert "analyses: 0 computed" not in log  # from an empty cache
    ta, tb = table_bytes(a / "cache"), table_bytes(b / "cache")
    assert len(ta) >= 20 and ta.keys() == tb.keys()  # same cache keys: neither count is in them
    differ = [k for k in ta if ta[k] != tb[k]]
    assert not differ, f"{len(differ)} of {len(ta)} tables differ: {differ[:5]}"
    ha, hb = figure_hashes(a / "site"), figure_hashes(b / "site")
    assert ha and ha == hb
    print(f"{len(ta)} tables byte-identical, {sum(v is not None for v in ha.values())} figure hashes equal")
