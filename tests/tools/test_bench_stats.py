"""The developer tool timing the K24 host statistics against the frozen previous implementation."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.tools import bench_stats

ROOT = Path(__file__).resolve().parents[2]


def test_both_implementations_timed_in_one_run_with_equal_tables(capsys):
    assert bench_stats.main(["--k24-pass", "3", "--shape", "tiny", "--seq-len", "12", "--repeats", "1",
                             "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["host_seqs"] == 3 and r["host_layers"] == 2 and r["host_identical"] is True
    assert r["host_s"] > 0 and r["host_old_s"] > 0 and r["host_speedup"] == r["host_old_s"] / r["host_s"]
    line = bench_stats.format_compare(r)
    assert "previous implementation" in line and "bit-identical" in line


def test_runs_as_a_module_from_the_repository_root():
    p = subprocess.run([sys.executable, "-m", "tests.tools.bench_stats", "--k24-pass", "2", "--shape", "tiny",
                        "--seq-len", "8", "--repeats", "1"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "x" in p.stdout and "bit-identical" in p.stdout


def test_k21_both_implementations_timed_in_one_run_with_equal_tables(capsys):
    assert bench_stats.main(["--k21-pass", "3", "--shape", "tiny", "--seq-len", "9", "--repeats", "1",
                             "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["k21_host_seqs"] == 3 and r["k21_host_layers"] == 2 and r["k21_identical"] is True
    assert "host_s" not in r  # K24 not asked for
    assert r["k21_host_s"] == r["k21_tokens_s"] + r["k21_freq_s"] > 0
    assert r["k21_host_old_s"] == r["k21_tokens_old_s"] + r["k21_freq_old_s"] > 0
    assert r["k21_speedup"] == r["k21_host_old_s"] / r["k21_host_s"]
    line = bench_stats.format_k21_compare(r)
    assert "previous implementation" in line and "bit-identical" in line


def test_k21_tables_that_differ_fail_the_tool(monkeypatch, capsys):
    from report_builder.stats import k21_tables

    real = k21_tables.frequency_table
    monkeypatch.setattr(k21_tables, "frequency_table",
                        lambda t, e, r: real(t, e, r).assign(freq_rank=lambda f: f["freq_rank"] + 1))
    assert bench_stats.main(["--k21-pass", "2", "--shape", "tiny", "--seq-len", "6", "--repeats", "1"]) == 1
    assert "DIFFER" in capsys.readouterr().out
