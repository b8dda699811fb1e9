"""A build whose results are all cached imports neither torch, transformers nor scipy (issue #16 point 5:
an instant no-op rebuild): the second build of a tiny configuration runs with those made unimportable."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # builds a site twice

ROOT = Path(__file__).resolve().parents[1]

BLOCKED = ("torch", "transformers", "scipy")
WRAPPER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {BLOCKED!r}:
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit('the blocker does not work')
from report_builder.cli import main
code = main(sys.argv[1:])
assert not set(sys.modules) & {set(BLOCKED)!r}, 'blocked module imported'
raise SystemExit(code)
"""


def test_cached_rebuild_imports_no_torch(tmp_path):
    from tests.test_pipeline import tiny_bert_dir

    model = tiny_bert_dir(tmp_path / "models" / "tiny-a", 0)
    data = tmp_path / "reviews.txt"
    data.write_text("a fine film .\nthe plot is thin but the cast is great .\ndull and far too long .\n")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({
        "models": [{"name": "tiny", "source": str(model), "role": "primary_encoder"}],
        "datasets": [{"id": "sentiment-sample", "path": str(data), "n": 3, "k24_n": 1, "max_length": 32}],
        "k24": {"top_k": 5, "examples": 1}, "batch_size": 2,
        # three figures: drawing all 23 was 10 s of this test's CPU; a no-op rebuild of every figure the embedded
        # models produce imports none of BLOCKED too (tests/test_smoke_build.py::test_noop_rebuild_imports_no_torch)
        "figures": ["k21-tab2", "k21-fig3", "k24-ctx-ff"],
        "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")}))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = ["build", "--config", str(cfg), "--no-progress", "--threads", "1"]

    first = subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=900)
    log1 = first.stdout + first.stderr
    assert first.returncode == 0, log1[-3000:]
    assert re.search(r"^analyses: [1-9]\d* computed, 0 reused", log1, re.M), log1[-3000:]
    # the CPU engine is set up (and says so) before the first model load
    assert "CPU worker threads: 1 " in log1
    manifest = json.loads((tmp_path / "site" / "figures" / "manifest.json").read_text())["figures"]

    second = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=900)
    log2 = second.stdout + second.stderr
    assert second.returncode == 0, log2[-3000:]
    assert re.search(r"^analyses: 0 computed, [1-9]\d* reused", log2, re.M), log2[-3000:]
    assert "CPU worker threads" not in log2 and "loaded tiny" not in log2
    assert "mkdocs skipped" in log2 and " 0 new or changed" in log2
    again = json.loads((tmp_path / "site" / "figures" / "manifest.json").read_text())["figures"]
    assert {k: v["hash"] for k, v in again.items()} == {k: v["hash"] for k, v in manifest.items()}
