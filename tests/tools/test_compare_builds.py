"""compare_builds: identical builds compare equal; a changed table, key or figure hash is reported."""
from __future__ import annotations

import json
import shutil

import pandas as pd

from tests.tools.compare_builds import compare


def _build(root, value=1.0, key="abc", fig_hash="h1"):
    entry = root / "cache" / "results" / "k21_mixing" / key
    entry.mkdir(parents=True)
    pd.DataFrame({"model": ["m"], "value": [value]}).to_parquet(entry / "k21_tokens.parquet", index=False)
    fig = root / "site" / "figures" / "k21-fig1"
    fig.mkdir(parents=True)
    (fig / "provenance.json").write_text(json.dumps({"content_hash": fig_hash}))
    (root / "log.txt").write_text(f"site: k21-fig1 built ({fig_hash})\n")
    return root


def test_identical_builds(tmp_path):
    a = _build(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    assert compare(a, b) == []


def test_differences_are_named(tmp_path):
    a = _build(tmp_path / "a")
    assert any("content differs" in p for p in compare(a, _build(tmp_path / "b", value=2.0)))
    assert any("cache keys differ" in p for p in compare(a, _build(tmp_path / "c", key="xyz")))
    assert any("figure k21-fig1" in p for p in compare(a, _build(tmp_path / "d", fig_hash="h2")))
