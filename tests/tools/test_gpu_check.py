"""`make gpu-check` (tests/tools/gpu_check.sh) without a GPU: one line, exit 2, nothing run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent / "gpu_check.sh"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_gpu_check_without_a_gpu_says_so_in_one_line():
    p = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True,
                       env={**os.environ, "PY": sys.executable}, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "no CUDA device" in p.stderr
