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
    # the device class's chunks, the ops per layer, the precision mode, the short-input case
    assert result["chunks"]["rule"] == "cpu" and result["chunks"]["rows"] == result["config"]["chunk_rows"]
    for key in ("fast_ratios", "fast_ff", "fast_full"):
        assert result["ops"][key]["ops_per_layer"] > 0 and result["ops"][key]["by_name"]
        assert sum(result["ops"][key]["by_name"].values()) == pytest.approx(result["ops"][key]["ops_per_layer"])
    assert result["precision"] == {"mode": "float32", "label": "float32", "bound": 1e-4, "unit_roundoff": 2 ** -24,
                                   "refused": None}
    s = result["short"]
    assert s["n_seqs"] == 16 and all(8 <= n <= 20 for n in s["lengths"]) and s["tokens"] == sum(s["lengths"])
    for k in ("k21_ratios", "k21_maps", "full_layer"):
        for how in ("b1", "batched"):
            assert s["speedup_vs_naive"][f"{k}_{how}"] > 0
    assert result["roofline"]["matmul"]["dtype"] == "float32"


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


def test_report_has_the_new_lines(result):
    text = format_bench(result)
    for line in ("chunk rule cpu: budget", "FF decomposition: ", "torch ops per layer (profiler", "K21 ratios: ",
                 "short inputs: 16 sequences of", "K21 ratios  naive", "(the float32 bound 1.0e-04)",
                 "short inputs: engine (b1) no slower than naive"):
        assert line in text, line


def test_gpu_rule_and_a_reduced_mode_on_a_cpu():
    """The GPU rule forced on the CPU, bfloat16 pair GEMMs: its blocks and buffers, its bound, the float32
    step beside it, and one line saying a CPU does not make it faster."""
    r = run_bench(shape="tiny-llama", seq_len=24, batch=2, repeats=1, chunk_rule="gpu", dtype="bfloat16",
                  memory=False, naive=False)
    ch = r["chunks"]
    assert ch["rule"] == "gpu" and ch["blocks"] and ch["groups"] and ch["pairs"] >= 2 * 24 * 25 // 2
    assert r["roofline"]["matmul"]["shape"][0] == max(ch["gemm_rows"]) and r["roofline"]["matmul"]["dtype"] == "bfloat16"
    p = r["precision"]
    assert p["mode"] == "bfloat16" and p["bound"] == 16 * 2 ** -8 and p["speedup_vs_float32"] > 0
    assert p["refused"].startswith("bfloat16 is not faster than float32 on a CPU")
    assert r["seconds_per_layer"]["fast_ff_float32"] > 0 and r["short"] is None
    assert r["errors"]["bound"] == p["bound"] and r["errors"]["max_rel_error"] <= p["bound"]
    faster = next(t for t in r["targets"] if t["name"] == "bfloat16 FF step faster than float32")
    assert faster["ok"] is None  # not a verdict on a CPU
    text = format_bench(r)
    assert "chunk rule gpu: budget" in text and "bfloat16 pair GEMMs (model and checks in float32)" in text
    assert "note: bfloat16 is not faster than float32 on a CPU" in text and "the same in float32" in text
    json.loads(json.dumps(r))


def test_bad_mode_or_rule_is_one_line():
    from report_builder.errors import UsageError

    with pytest.raises(UsageError, match="^dtype: unknown precision 'float8'; use float32, tf32"):
        run_bench(shape="tiny", dtype="float8")
    with pytest.raises(UsageError, match="^chunk_rule: .*GPU rule"):
        run_bench(shape="tiny", dtype="tf32", chunk_rule="cpu")
