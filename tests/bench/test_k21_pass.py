"""`report-builder bench --k21-pass`: the timed K21 pass and its host statistics (current implementation)."""
from __future__ import annotations

import json

from report_builder.bench import format_k21_pass


def test_cli_bench_k21_pass_runs_the_analyses_and_times_the_host_statistics(capsys):
    from tests.cli_here import cli_here

    # in this process (tests/cli_here.py): the output is the point, not a fresh process's start
    p = cli_here(capsys, "bench", "--k21-pass", "3", "--shape", "tiny", "--seq-len", "10", "--threads", "1", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout)
    assert r["n_seqs"] == 3 and r["seq_len"] == 10 and r["workers"] == 1 and r["max_rel_error"] < 1e-4
    assert r["seconds"] >= r["ratios_seconds"] > 0 and r["freq_seconds"] > 0
    assert r["k21_host_seqs"] == 3 and r["k21_host_layers"] == r["layers_total"] == 2 and r["k21_host_tokens"] == 30
    assert r["k21_host_s"] == r["k21_tokens_s"] + r["k21_freq_s"] > 0
    assert r["k21_host_pass_s"] == r["k21_host_s"] * 3 * 2
    text = format_k21_pass(r)
    assert text.startswith("K21 pass: 3 sequences x 10 tokens, tiny BERT (random weights), 2 layers, cpu float32")
    assert "K21 host statistics (random ratios, 3 sequences x 2 layers, 10 tokens each)" in text
    assert "previous implementation" not in text
