"""`tests/tools/gpu_check.sh` (`make gpu-check`): without a GPU one line and exit 2; ``--dry-run`` runs every
step on the CPU with tiny sizes in a bare environment (only PATH, HOME and the python) and writes the
one JSON with every number of issue #29's table and its targets; the scheduler keeps each later step's
minimum; a step that overruns is stopped and the run goes on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.tools import gpu_check
from tests.tools.gpu_steps import STEPS

SCRIPT = Path(__file__).resolve().parent / "gpu_check.sh"


def _bare_env(**extra) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "PY": sys.executable, **extra}


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_gpu_check_without_a_gpu_says_so_in_one_line():
    p = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=_bare_env(), timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "no CUDA device" in p.stderr


@pytest.mark.slow
def test_dry_run_writes_every_number_and_target(tmp_path):
    out = tmp_path / "o" / "check.json"
    p = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--strict", "--out", str(out)], capture_output=True,
                       text=True, env=_bare_env(OUT=str(tmp_path / "ignored")), cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:] + out.with_suffix(".log").read_text()[-5000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == gpu_check.SCHEMA and doc["mode"] == "dry-run" and doc["done"]
    assert list(doc["steps"]) == list(STEPS) and all(r["ok"] for r in doc["steps"].values())
    t = doc["table"]
    assert t["torch"] == torch.__version__ and t["date"] and t["device"] == "cpu"
    assert isinstance(t["ff_kernels_per_layer"], int) and t["ff_kernels_per_layer"] > 0
    assert t["engine_k24_host_syncs_two_layers"] == 0  # no CUDA here: nothing to wait for
    for table in ("ff_roofline", "full_vs_naive", "k21_ratios_vs_naive"):
        assert t[table]["base_n128_b8"] > 0 and t[table]["smollm2_n128_b8"] > 0, table
    assert t["ff_roofline"]["smollm2_n4096"] > 0 and t["n4096"]["full_s"] > 0
    for mode in ("float32", "tf32", "bfloat16"):
        assert t["precision"][mode]["ff_s_per_layer"] > 0 and t["precision"][mode]["max_rel_error"] is not None
    assert t["max_memory"]["32GiB"]["chunk_budget_bytes"] > t["max_memory"]["default"]["chunk_budget_bytes"]
    assert t["k24_pass_s"] > 0 and t["k24_pass_tf32_s"] > 0 and t["k21_pass_s"] > 0
    assert t["k24_pass"]["max_rel_error"] < 1e-4 and t["k21_pass"]["n_seqs"] == 6
    assert max(t["check_max_error"].values()) < 1e-4 and t["device_map"]["ok"]
    for step in ("k21_ratios", "causal_ff"):  # the CUDA-graph probe: its eager half runs on the CPU
        g = t["cuda_graphs"][step]
        assert g["eager_ms"] > 0 and g["graph"] == "not run: CUDA graphs need a CUDA device", (step, g)
    assert doc["steps"]["graphs"]["result"]["k21_ratios"]["eager_vs_naive"] > 0
    for step in ("k21_ratios", "causal_ff", "encoder_ff", "full_layer"):  # torch.compile: TorchDynamo's tracing
        c = t["torch_compile"][step]  # (eager backend) on the CPU: one graph per layer step, never recompiled
        assert c["backend"] == "eager" and c["compiled_max_abs_diff"] == 0.0 and c["compiled"] is None, (step, c)
        assert c["graph_breaks"] == 0 and c["graphs"] == c["graphs_compiled"] == 1 and c["break_reasons"] == [], (step, c)
    assert t["matmul_tflops"]["float32"] > 0 and set(t["efficiency"]) >= {"forward", "ratios", "maps", "full"}
    names = [x["name"] for x in doc["targets"]]
    assert len(names) == len(set(names)) >= 16 and all(x["ok"] in (True, False, None) for x in doc["targets"])
    assert sum(x["ok"] is not None for x in doc["targets"]) >= 15  # every target measured (the values are tiny)
    log = out.with_suffix(".log").read_text()
    assert "--- step k24_pass" in log and "done in" in p.stdout and not (tmp_path / "ignored").exists()


def test_a_gpu_run_takes_compile_only_when_asked():
    assert "compile" in STEPS and gpu_check.step_names(None, dry=True) == list(STEPS)
    assert "compile" not in gpu_check.step_names(None, dry=False)
    assert gpu_check.step_names("graphs, compile", dry=False) == ["graphs", "compile"]


def test_the_schedule_keeps_every_later_steps_minimum():
    steps = {"a": (None, 10, 100), "b": (None, 20, 50), "c": (None, 5, 30)}
    assert gpu_check.schedule("a", ["a", "b", "c"], 300, steps) == 100
    assert gpu_check.schedule("a", ["a", "b", "c"], 60, steps) == 35  # b and c keep 25
    assert gpu_check.schedule("a", ["a", "b", "c"], 20, steps) == 10  # its own minimum first
    assert gpu_check.schedule("c", ["c"], 3, steps) == 3 and gpu_check.schedule("c", ["c"], -1, steps) == 0


def test_a_step_that_overruns_is_stopped_and_the_next_one_runs(tmp_path, monkeypatch):
    """A worker stuck in a step is killed at the step's limit; a fresh worker runs the next step."""
    import tests.tools.gpu_steps as gs

    monkeypatch.setattr(gs, "STEPS", {"env": (gs.env, 1, 2), "sleep": (None, 1, 2), "stand_ins": (None, 1, 1)})
    log = open(tmp_path / "log", "w")
    seen = []
    ctx = {"dry": True, "device": "cpu", "tmp": str(tmp_path)}
    # a stand-in for the worker's python: it records each step as done at once, except "sleep", which hangs
    fake = tmp_path / "py"
    fake.write_text(f"#!{sys.executable}\n" + '''import json, sys, time
res = sys.argv[sys.argv.index("--results") + 1]
for line in sys.stdin:
    name = line.strip()
    with open(res, "a") as fh:
        fh.write(json.dumps({"step": name, "event": "start"}) + "\\n")
    if name == "sleep":
        time.sleep(30)
    with open(res, "a") as fh:
        fh.write(json.dumps({"step": name, "event": "done", "ok": True, "seconds": 0}) + "\\n")
''')
    fake.chmod(0o755)
    recs = gpu_check.run_steps(["env", "sleep", "stand_ins"], ctx, log, 60, str(fake), lambda n, r: seen.append(n))
    assert recs["env"]["ok"] and recs["stand_ins"]["ok"]
    assert not recs["sleep"]["ok"] and recs["sleep"]["error"].startswith("timeout: stopped after 2 s")
    assert seen == ["env", "sleep", "stand_ins"]


def test_a_worker_that_cannot_start_fails_its_step_and_the_run_goes_on(tmp_path, monkeypatch):
    import tests.tools.gpu_steps as gs

    monkeypatch.setattr(gs, "STEPS", {"env": (gs.env, 1, 5), "stand_ins": (None, 1, 5)})
    fake = tmp_path / "py"
    fake.write_text("#!/bin/sh\nexit 7\n")
    fake.chmod(0o755)
    recs = gpu_check.run_steps(["env", "stand_ins"], {"dry": True, "device": "cpu", "tmp": str(tmp_path)},
                               open(tmp_path / "log", "w"), 30, str(fake), lambda n, r: None)
    assert [r["ok"] for r in recs.values()] == [False, False]
    assert all("exited with code 7" in r["error"] for r in recs.values())
