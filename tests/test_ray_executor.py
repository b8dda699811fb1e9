"""`--executor ray`: the build's tasks as Ray tasks on a local cluster (``ray.init(num_cpus=2)``, one per
module) give byte-identical tables and equal figure hashes to the local executor; a worker killed
mid-task is retried and leaves no partial entry; a resumed build reuses every finished entry;
without Ray, one clear line. Tiny random models (tests/tiny_models.py), a few sequences."""
from __future__ import annotations

import builtins
import importlib.util
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from report_builder import api
from report_builder.analyses import runner
from report_builder.cache import Cache
from report_builder.config import from_dict
from tests.tiny_models import save_tiny

from report_builder import distributed

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (pip install 'report_builder[distributed]')")

FIGURES = ["k21-tab2", "k21-fig3", "k21-tab8", "k24-ctx-ff", "k24-ffamp-top", "k24-res-norms", "k24-ln-dims"]
"""Figures drawn from every analysis' tables (K21 tokens, freq, expansion; K24 ctx, pairs, norms, LN dims)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local Ray for the module; workers inherit the test-only hold folder through the environment."""
    import ray

    hold = tmp_path_factory.mktemp("hold")
    old = os.environ.get(distributed.TEST_HOLD_ENV)
    os.environ[distributed.TEST_HOLD_ENV] = str(hold)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield hold
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop(distributed.TEST_HOLD_ENV, None)
        else:
            os.environ[distributed.TEST_HOLD_ENV] = old


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    return save_tiny("bert", base / "tiny-bert", 0), save_tiny("llama", base / "tiny-llama", 1)


def _cfg(tmp: Path, models, name: str, **extra) -> dict:
    enc, dec = models
    return {"models": [{"name": "enc", "source": str(enc), "role": "primary_encoder"},
                       {"name": "dec", "source": str(dec), "role": "primary_causal"}],
            "datasets": [{"id": "wiki", "n": 4, "k24_n": 3, "max_length": 32},
                         {"id": "sentiment-sample", "n": 3, "k24_n": 2, "max_length": 32}],
            "k24": {"top_k": 5, "examples": 1}, "figures": FIGURES,
            "cache_dir": str(tmp / name / "cache"), "out_dir": str(tmp / name / "site"), **extra}


def _analyze(d: dict, executor=None, log=None):
    return api.analyze(from_dict(d), log=log or (lambda *_: None), progress=False, executor=executor)


def _tables(d: dict) -> dict[str, bytes]:
    base = Path(d["cache_dir"]) / "results"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.parquet"))}


def _figure_hashes(d: dict, rep) -> dict[str, str]:
    cfg = from_dict(d)
    api.render(cfg, rep.tables, rep.provenance, log=lambda *_: None)
    man = json.loads((Path(d["out_dir"]) / "figures" / "manifest.json").read_text())
    return {fid: rec.get("hash") for fid, rec in man["figures"].items()}


@pytest.fixture(scope="module")
def local_build(tmp_path_factory, models):
    d = _cfg(tmp_path_factory.mktemp("local"), models, "local")
    rep = _analyze(d)
    return d, rep, _tables(d), _figure_hashes(d, rep)


@needs_ray
def test_sharded_ray_build_equals_local_build_and_resumes(cluster, models, local_build, tmp_path):
    """`--executor ray --shard-size 2`: several shards per dataset and analysis, reduced on the cluster,
    give the local (unsharded) build's tables byte for byte and its figure hashes; removing a final
    entry and one of its shards, the next build reruns just those two tasks."""
    ld, lrep, ltables, lhashes = local_build
    d = _cfg(tmp_path, models, "ray", shard_size=2)
    lines: list[str] = []
    ex = distributed.RayExecutor(log=lines.append, progress=False)
    rep = _analyze(d, ex, lines.append)
    assert rep.computed and not rep.reused
    shards = [c for c in rep.computed if " 0:2]" in c or " 2:" in c]
    assert len(shards) >= 10, rep.computed  # k21_mixing, k21_frequency, k24_scopes x 2 datasets x 2 models
    assert rep.entries == lrep.entries  # the same final entries, in plan order
    rtables = _tables(d)
    finals = {k: v for k, v in rtables.items() if ".shard/" not in k}
    assert len(finals) >= 10 and finals.keys() == ltables.keys()
    differ = [k for k in ltables if ltables[k] != finals[k]]
    assert not differ, f"{len(differ)} of {len(ltables)} tables differ: {differ[:5]}"
    hashes = _figure_hashes(d, rep)
    assert sum(h is not None for h in hashes.values()) == len(FIGURES) and hashes == lhashes
    assert any(line.startswith("  computed enc · wiki [k21_mixing 0:2]") for line in lines), lines
    assert len(ex.workers) >= 2, ex.workers  # the work was shared by several worker processes
    # resume: a final entry and one of its shards are gone; only those two tasks run again
    import shutil

    cache = Cache(d["cache_dir"])
    final = next((a, k) for a, k in rep.entries if a == "k21_mixing")
    shard = next(p for p in (Path(d["cache_dir"]) / "results" / "k21_mixing.shard").iterdir()
                 if p.is_dir() and json.loads((p / "meta.json").read_text())["params"]["dataset"] == "wiki"
                 and json.loads((p / "meta.json").read_text())["params"]["model"] == "enc")
    shutil.rmtree(cache.path(*final))
    shutil.rmtree(shard)
    again = _analyze(d, distributed.RayExecutor(progress=False))
    assert len(again.computed) == 2 and again.computed[1] == "enc · wiki [k21_mixing]", again.computed
    assert _tables(d) == rtables


def _pid(started: Path) -> int:
    """The worker pid a ``started-<analysis>-<key>-<pid>`` file names (its name, not its text: the
    file may still be empty when read)."""
    return int(started.name.rsplit("-", 1)[1])


@needs_ray
def test_killed_worker_is_retried_without_partial_entries(cluster, models, local_build, tmp_path):
    hold = cluster
    d = _cfg(tmp_path, models, "killed")
    key = next(t.key for t in runner.plan(from_dict(d)).tasks
               if t.analysis == "k21_mixing" and t.subject.model.name == "enc")
    flag = hold / f"hold-k21_mixing-{key}"
    flag.write_text("")
    box: dict = {}

    def run():
        try:
            box["rep"] = _analyze(d, distributed.RayExecutor(progress=False))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.monotonic() + 240
        while not list(hold.glob(f"started-k21_mixing-{key}-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        started = list(hold.glob(f"started-k21_mixing-{key}-*"))
        assert started, "the task did not reach the hold point"
        pid = _pid(started[0])
        # the worker holds the entry's lock, in the middle of computing it: kill it
        os.kill(pid, signal.SIGKILL)
        # Ray runs the task again in another worker, which reaches the same point (the lock was freed)
        while time.monotonic() < deadline and not [
                p for p in hold.glob(f"started-k21_mixing-{key}-*") if _pid(p) != pid]:
            time.sleep(0.05)
        assert not (Cache(d["cache_dir"]).path("k21_mixing", key) / "meta.json").exists()
    finally:
        flag.unlink()
        t.join(timeout=600)
    assert "error" not in box, box.get("error")
    rep = box["rep"]
    # the killed task ran again, in another process, and the build finished with the local tables
    reruns = [p for p in hold.glob(f"started-k21_mixing-{key}-*") if _pid(p) != pid]
    assert reruns, sorted(p.name for p in hold.iterdir())
    tables, ltables = _tables(d), local_build[2]
    assert tables.keys() == ltables.keys()
    assert all(tables[k] == ltables[k] for k in ltables)
    assert len(rep.computed) == len(local_build[1].computed)
    cache = Cache(d["cache_dir"])
    assert cache.stale_temp() == []
    leftovers = [p for p in (Path(d["cache_dir"]) / "results").rglob("*") if ".tmp-" in p.name]
    assert leftovers == []


@needs_ray
def test_ray_worker_error_is_the_error_itself(cluster, models, tmp_path):
    """An expected failure inside a task (here: a model directory whose weights are missing, found only
    when a worker loads it) is not retried and reaches the caller as its own one-line error."""
    import shutil

    from report_builder.errors import ModelError

    bad = tmp_path / "bad-model"
    shutil.copytree(models[0], bad, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    d = {"models": [{"name": "bad", "source": str(bad), "role": "primary_encoder"}],
         "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 16}],
         "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")}
    with pytest.raises(ModelError) as e:
        _analyze(d, distributed.RayExecutor(progress=False))
    assert "has a config.json but no weights" in str(e.value) and "\n" not in str(e.value)
    import ray

    assert isinstance(e.value.__cause__, ray.exceptions.RayTaskError)  # it did run on a worker


def test_without_ray_one_clear_line(monkeypatch, capsys):
    """`build --executor ray` without Ray installed: one `error:` line with the pip command, no traceback."""
    from report_builder.cli import main

    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    code = main(["build", "--preset", "smoke", "--executor", "ray", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert err == ["error: --executor ray needs Ray, which is not installed: "
                   "pip install 'report_builder[distributed]' (or build with the default --executor local)"], err


def test_resources_per_task():
    from report_builder.analyses.runner import Task

    decomposing = Task("k21_mixing", 1, None, {}, "k", size=4)  # type: ignore[arg-type]
    weights = Task("architecture", 1, None, {}, "k", size=0)  # type: ignore[arg-type]
    assert distributed.task_resources(decomposing, "cuda") == {"num_gpus": 1.0, "num_cpus": 1.0}
    assert distributed.task_resources(decomposing, "cuda:1") == {"num_gpus": 1.0, "num_cpus": 1.0}
    assert distributed.task_resources(decomposing, "cpu") == {"num_cpus": 1.0}
    assert distributed.task_resources(weights, "cpu") == {"num_cpus": distributed.WEIGHTS_ONLY_SHARE}
    assert distributed.task_resources(weights, "cuda") == {"num_gpus": distributed.WEIGHTS_ONLY_SHARE,
                                                          "num_cpus": distributed.WEIGHTS_ONLY_SHARE}
    assert distributed.task_resources(decomposing, "cuda", gpus=4) == {"num_gpus": 4.0, "num_cpus": 1.0}
    assert distributed.task_resources(weights, "cuda", gpus=4)["num_gpus"] == 4.0
    reduce = Task("k21_mixing", 1, None, {}, "k", size=0, reduce=True)  # type: ignore[arg-type]
    assert distributed.task_resources(reduce, "cuda", gpus=4) == {"num_cpus": distributed.WEIGHTS_ONLY_SHARE}

    class Cfg:
        device, device_map = "cuda", "auto"

    assert distributed.gpus_per_task(Cfg, [0, 8, 4]) == 4  # the smallest GPU node holds the map
    Cfg.device_map = "none"
    assert distributed.gpus_per_task(Cfg, [8]) == 1
    Cfg.device, Cfg.device_map = "cpu", "auto"
    assert distributed.gpus_per_task(Cfg, [8]) == 1


@needs_ray
def test_cli_joins_a_running_cluster(cluster, models, tmp_path):
    """`report-builder analyze --executor ray --address ADDR`: the command line joins the running Ray,
    shows one progress bar for the build, and a second run reuses everything."""
    import subprocess
    import sys

    import ray
    import yaml

    d = {"models": [{"name": "enc", "source": str(models[0]), "role": "primary_encoder"}],
         "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 16}], "k24": {"top_k": 3, "examples": 1},
         "cache_dir": str(tmp_path / "cache")}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(d))
    address = ray.get_runtime_context().gcs_address
    cmd = [sys.executable, "-m", "report_builder", "analyze", "--config", str(tmp_path / "c.yaml"),
           "--executor", "ray", "--address", address]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "analyses: 7 computed, 0 reused" in r.stdout, r.stdout
    assert "ray: 2 CPUs, 0 GPUs on 1 node(s)" in r.stderr
    bars = [ln for ln in r.stderr.replace("\r", "\n").splitlines() if ln.startswith("build:")]
    assert bars and "7/7" in bars[-1] and "tasks 7/7" in bars[-1], bars[-3:]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0 and "analyses: 0 computed, 7 reused" in r.stdout, r.stderr[-3000:]
