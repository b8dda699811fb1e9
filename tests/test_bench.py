"""`report-builder bench` on the tiny shape: every key present, sane values, report lines, JSON (no timing asserts)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from report_builder.bench import (
    GIB, MIB, chunk_budget, ff_flops, format_bench, parse_bytes, run_bench,
)

METHODS = ("forward", "naive_k21_ratios", "naive_k21_maps", "naive_full", "fast_ratios", "fast_k21_maps",
           "fast_full", "fast_ff")


@pytest.fixture(scope="module")
def result():
    return run_bench(shape="tiny", seq_len=16, repeats=1)


def test_all_keys_and_sane_values(result):
    for key in ("config", "seconds_per_layer", "tokens_per_s", "cost_vs_forward", "speedup", "roofline", "memory",
                "budget_check", "errors", "targets", "gpu", "notes"):
        assert key in result, key
    for m in METHODS:
        assert result["seconds_per_layer"][m] > 0, m
        assert result["tokens_per_s"][m] > 0, m
    for k in ("k21_ratios", "k21_maps", "full_layer"):
        v = result["speedup"][k]
        assert v is not None and v > 0 and math.isfinite(v), k
    r = result["roofline"]
    assert r["ff_gflops"] > 0 and r["matmul_gflops"] > 0 and r["fraction"] > 0
    assert r["ff_flops_per_layer"] == ff_flops(16, 64, 256, 4, False)
    e = result["errors"]
    assert e["max_rel_error"] is not None and e["max_rel_error"] <= 1e-4
    assert set(e["per_check"]) == {"ATTN", "ATTNRES", "ATB", "ATBFF", "ATBFFRES", "ATBFFRESLN"}
    assert e["fast_vs_naive_max_map_diff"] <= 1e-4
    mem = result["memory"]["fast_full"]
    assert mem["peak_rss_bytes"] > 0 and mem["delta_bytes"] >= 0, mem
    assert result["config"]["layers_timed"] == 2 and result["config"]["layers_total"] == 2
    assert result["gpu"]["run"] is False
    assert result["budget_check"]["pass"] is None  # skipped for the tiny shape


def test_report_has_target_lines(result):
    text = format_bench(result)
    for line in ("K21 ratios >= 10x faster than naive", "K21 maps >= 5x faster than naive",
                 "FF decomposition >= 50% of matmul GFLOP/s", "BERT-base n = 512 full layer <= 2.00 GiB RSS",
                 "GPU: not run (no GPU in this session)", "HF forward", "fast (c) full layer"):
        assert line in text, line
    assert "✓" in text or "✗" in text


def test_json_serialisable(result):
    back = json.loads(json.dumps(result))
    assert back["config"]["shape"] == "tiny"


def test_memory_helpers():
    assert parse_bytes("2GiB") == 2 * GIB
    assert parse_bytes("512MiB") == 512 * MIB
    assert parse_bytes(123) == 123 and parse_bytes(None) is None
    with pytest.raises(ValueError):
        parse_bytes("lots")
    # BERT-base n = 512 with ~1 GiB in use leaves a real chunk budget under a 2 GiB limit
    b = chunk_budget(2 * GIB, 512, 768, 3072, 12, False, 4, in_use=GIB)
    assert 64 * MIB < b < GIB


def test_k24_pass_runs_the_full_analysis_on_any_device():
    """The timed K24 pass (paper size on a GPU) on a tiny shape here: every sequence through
    scope_analyses, with exact reconstruction and its numbers reported."""
    from report_builder.bench import format_k24_pass, run_k24_pass

    r = run_k24_pass(shape="tiny", n_seqs=3, seq_len=12, batch=2, device="cpu", threads=2)
    assert r["n_seqs"] == 3 and r["workers"] == 2 and r["seconds"] > 0 and r["max_rel_error"] < 1e-4
    assert r["ff_flops"] == 3 * r["layers_total"] * (2 * 12 * 12 * r["d_ff"] * r["d_model"]
                                                     + 2 * 12 * (r["heads"] + 1) * r["d_model"] * r["d_ff"]
                                                     + 2 * 12 * 12 * r["heads"] * r["d_ff"])
    assert "3 sequences x 12 tokens" in format_k24_pass(r)
    # the host statistics timed against the previous implementation in the same run: equal tables
    assert r["host_seqs"] == 3 and r["host_layers"] == r["layers_total"] and r["host_identical"] is True
    assert r["host_s"] > 0 and r["host_old_s"] > 0 and r["host_speedup"] == r["host_old_s"] / r["host_s"]
    assert "previous implementation" in format_k24_pass(r) and "bit-identical" in format_k24_pass(r)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_gpu_check_without_a_gpu_says_so_in_one_line():
    script = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"
    p = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                       env={**os.environ, "PY": sys.executable}, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "no CUDA device" in p.stderr
