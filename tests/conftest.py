"""Test-wide settings: offline hub, one torch thread (tiny models are dominated by thread sync); the
session's smoke build, shared by tests/test_smoke_build.py and tests/test_reproducible_build.py."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the render-only tests need no torch
    pass


def smoke_build(tmp: Path, *extra: str) -> tuple[str, float]:
    """``report-builder build --preset smoke`` into ``tmp/cache`` and ``tmp/site`` through the CLI, as
    the README runs it; (its stdout + stderr, seconds)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "report_builder", "build", "--preset", "smoke", "--no-progress",
                        "--cache", str(tmp / "cache"), "--out", str(tmp / "site"), *extra],
                       capture_output=True, text=True, env=env, timeout=1800, cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"^analyses: \d+ computed", r.stdout, re.M)  # results on stdout, the log on stderr
    return r.stdout + "\n" + r.stderr, time.perf_counter() - t0


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """The smoke build from an empty cache (default threads and batch size), then the same command
    again: (folder, first log, second log, first seconds, second seconds). Built once per session."""
    tmp = tmp_path_factory.mktemp("smoke")
    first, t1 = smoke_build(tmp)
    second, t2 = smoke_build(tmp)
    return tmp, first, second, t1, t2
