"""`report-builder bench` on the tiny shape: every key present, sane values, report lines, JSON (no timing asserts)."""
from __future__ import annotations

import json
import math

import pytest

from report_builder.bench import format_bench, run_bench
from report_builder.costs import ff_flops

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
