"""The acceptance check of reproducibility: two smoke builds from empty caches with different CPU
worker threads and batch sizes give byte-identical result tables (real embedded models, through the
CLI). One of them is the session's smoke build (tests/conftest.py: default threads, 1 or 2 here by load,
and batch size 8); the other runs 3 worker threads with batch size 3, so neither count is shared.

The second runs ``analyze`` (the computation, everything the counts can reach) and not the site: a
figure's content hash is a function of its tables and the code, and that the same tables render the same
hashes in another process and directory is `tests/test_portable_results.py`'s check (rendering the smoke
site again here took a third of this test's time)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import table_bytes

pytestmark = pytest.mark.slow


def test_smoke_tables_identical_across_threads_and_batch_sizes(smoke, tmp_path):
    a = smoke[0]
    b = tmp_path / "b"
    b.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    r = subprocess.run([sys.executable, "-m", "report_builder", "analyze", "--preset", "smoke", "--no-progress",
                        "--threads", "3", "--set", "batch_size=3", "--cache", str(b / "cache")],
                       capture_output=True, text=True, env=env, timeout=1800, cwd=b)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"^analyses: [1-9]\d* computed, 0 reused", r.stdout, re.M), r.stdout  # from an empty cache
    ta, tb = table_bytes(a / "cache"), table_bytes(b / "cache")
    assert len(ta) >= 20 and ta.keys() == tb.keys()  # same cache keys: neither count is in them
    differ = [k for k in ta if ta[k] != tb[k]]
    assert not differ, f"{len(differ)} of {len(ta)} tables differ: {differ[:5]}"
    print(f"{len(ta)} tables byte-identical")
