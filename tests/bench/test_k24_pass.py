"""`report-builder bench --k24-pass`: the timed K24 pass and its host statistics (current implementation)."""
from __future__ import annotations

from report_builder.bench import format_k24_pass, run_k24_pass


def test_k24_pass_runs_the_full_analysis_on_any_device():
    """The timed K24 pass (paper size on a GPU) on a tiny shape here: every sequence through
    scope_analyses, with exact reconstruction and its numbers reported."""
    r = run_k24_pass(shape="tiny", n_seqs=3, seq_len=12, batch=2, device="cpu", threads=2)
    assert r["n_seqs"] == 3 and r["workers"] == 2 and r["seconds"] > 0 and r["max_rel_error"] < 1e-4
    assert r["ff_flops"] == 3 * r["layers_total"] * (2 * 12 * 12 * r["d_ff"] * r["d_model"]
                                                     + 2 * 12 * (r["heads"] + 1) * r["d_model"] * r["d_ff"]
                                                     + 2 * 12 * 12 * r["heads"] * r["d_ff"])
    text = format_k24_pass(r)
    assert "3 sequences x 12 tokens" in text
    # the host statistics of the current implementation, timed apart on random maps
    assert r["host_seqs"] == 3 and r["host_layers"] == r["layers_total"] and r["host_s"] > 0
    assert r["host_pass_s"] == r["host_s"] * 3 * r["layers_total"]
    assert "host statistics (random maps, 3 sequences" in text and "previous implementation" not in text


def test_cli_bench_k24_pass_prints_the_pass_and_its_json(capsys):
    """`report-builder bench --k24-pass N` through the command line: the pass's text, then its JSON (in this
    process, `tests/cli_here.py`: the output is the point, not a fresh process's start, 4-5 s of CPU each)."""
    import json

    from tests.cli_here import cli_here

    cmd = ["bench", "--k24-pass", "2", "--shape", "tiny", "--seq-len", "10", "--threads", "1"]
    p = cli_here(capsys, *cmd)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith("K24 pass: 2 sequences x 10 tokens, tiny BERT (random weights)")
    p = cli_here(capsys, *cmd, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["n_seqs"] == 2, p.stderr[-2000:]
