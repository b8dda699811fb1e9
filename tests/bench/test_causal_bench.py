"""`report-builder bench` on a causal model: the every-pair step beside the causal one, the roofline on
the minimal and the done FLOP count, the targets; `--layers`/`--skip-naive`; the long-sequence mode
(no timed assertion: only what is measured and printed)."""
from __future__ import annotations

import json

import pytest

from report_builder.bench import format_bench, run, run_bench
from report_builder.costs import ff_flops
from report_builder.decompose.chunks import pair_count


@pytest.fixture(scope="module")
def causal():
    return run_bench(shape="tiny-llama", seq_len=40, repeats=1, memory=False)


def test_causal_side_by_side(causal):
    r = causal["roofline"]
    assert causal["config"]["causal"] is True and r["causal"] is True
    assert causal["seconds_per_layer"]["fast_ff_square"] > 0 and causal["seconds_per_layer"]["fast_ff"] > 0
    rows = causal["config"]["chunk_rows"]
    assert r["pairs"] == {"minimal": 40 * 41 // 2, "done": pair_count(40, True, rows), "square": 1600}
    assert r["ff_flops_per_layer"] == ff_flops(40, 64, 128, 4, True, 820)
    assert r["ff_flops_done_per_layer"] == ff_flops(40, 64, 128, 4, True, pair_count(40, True, rows))
    sq = r["square"]
    assert sq["flops_per_layer"] == ff_flops(40, 64, 128, 4, True) >= r["ff_flops_done_per_layer"]
    assert sq["speedup"] == pytest.approx(sq["seconds_per_layer"] / r["ff_seconds_per_layer"])
    names = [t["name"] for t in causal["targets"]]
    assert "FF step vs its minimal FLOPs (pairs j <= i) >= 60% of matmul GFLOP/s" in names
    assert "max reconstruction error <= 1e-05" in names
    err = next(t for t in causal["targets"] if t["unit"] == "error")
    assert err["value"] is not None and err["value"] < 1e-5 and err["ok"] is True
    text = format_bench(causal)
    for line in ("the same over every pair (before causal)", "causal pairs: 820 minimal (j <= i)",
                 "every pair (before causal pairs)", "x faster, same run", "defined for --model "):
        assert line in text, line
    json.loads(json.dumps(causal))


def test_long_sequences_time_the_full_layer_in_the_memory_child(monkeypatch):
    monkeypatch.setattr(run, "LONG_N", 16)
    r = run_bench(shape="tiny-llama", seq_len=24, repeats=1, layers=1)
    assert "fast_full" not in r["seconds_raw"] and "fast_ff_square" not in r["seconds_per_layer"]
    child = r["memory"]["fast_full"]
    assert r["seconds_per_layer"]["fast_full"] == child["seconds"] > 0 and child["peak_rss_bytes"] > 0
    assert r["errors"]["max_rel_error"] == child["max_error"] < 1e-5
    assert r["budget_check"]["pass"] is None and not any(k.startswith("naive") for k in r["seconds_per_layer"])
    assert any("n > 16 on CPU" in note for note in r["notes"])


def test_cli_layers_and_skip_naive(capsys):
    from report_builder import cli

    code = cli.main(["bench", "--shape", "tiny-llama", "--seq-len", "16", "--layers", "1", "--skip-naive",
                     "--repeats", "1", "--json"])
    assert code == 0
    r = json.loads(capsys.readouterr().out)
    assert r["config"]["layers_timed"] == 1 and r["config"]["layers_total"] == 2
    assert not any(k.startswith("naive") for k in r["seconds_per_layer"])
    assert any("(not requested)" in note for note in r["notes"])
    assert cli.main(["bench", "--shape", "tiny-llama", "--layers", "0"]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith(
        "--layers: expected a positive number of layers, got 0")
