"""The acceptance check of reproducibility: two smoke builds from empty caches, one with one CPU worker
and batch size 8, one with two workers and batch size 3, give byte-identical result tables and equal
figure content hashes (real embedded models, through the CLI)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _build(root: Path, threads: int, batch: int) -> Path:
    root.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    r = subprocess.run([sys.executable, "-m", "report_builder", "build", "--preset", "smoke", "--no-progress",
                        "--threads", str(threads), "--set", f"batch_size={batch}",
                        "--cache", str(root / "cache"), "--out", str(root / "site")],
                       capture_output=True, text=True, env=env, timeout=1800, cwd=root)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root


def _tables(root: Path) -> dict[str, bytes]:
    base = root / "cache" / "results"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.parquet"))}


def _figure_hashes(root: Path) -> dict[str, str]:
    man = json.loads((root / "site" / "figures" / "manifest.json").read_text())
    return {fid: rec.get("hash") for fid, rec in man["figures"].items()}


def test_smoke_tables_and_figure_hashes_identical_across_threads_and_batch_sizes(tmp_path):
    a = _build(tmp_path / "a", threads=1, batch=8)
    b = _build(tmp_path / "b", threads=2, batch=3)
    ta, tb = _tables(a), _tables(b)
    assert len(ta) >= 20 and ta.keys() == tb.keys()  # same cache keys: neither count is in them
    differ = [k for k in ta if ta[k] != tb[k]]
    assert not differ, f"{len(differ)} of {len(ta)} tables differ: {differ[:5]}"
    ha, hb = _figure_hashes(a), _figure_hashes(b)
    assert ha and ha == hb
    print(f"{len(ta)} tables byte-identical, {sum(v is not None for v in ha.values())} figure hashes equal")
