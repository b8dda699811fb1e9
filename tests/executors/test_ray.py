"""`--executor ray`: the build's tasks as Ray tasks on a local cluster give byte-identical tables and
equal figure hashes to the local executor; a worker killed mid-task is retried and leaves no partial
entry; a resumed build reuses every finished entry; without Ray, one clear line. Tiny random models
(tests/tiny_models.py), a few sequences.

The pytest process is never a Ray driver: the module's cluster (two CPUs) is held by a child process,
and every Ray build runs as ``report-builder analyze --executor ray --address ADDR`` in another child,
as users run it. Ray's core worker ends its process with ``_exit(1)`` when it loses its raylet, so a
Ray failure here fails one test with the cluster's logs instead of ending the whole suite without a
summary (what an in-process ``ray.init`` once did in CI)."""
from __future__ import annotations

import builtins
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from report_builder import api
from report_builder.executors import ray as ray_executor
from report_builder.extras import install_line
from report_builder.analyses import planning
from report_builder.cache import Cache
from report_builder.config import from_dict
from tests.conftest import figure_hashes, table_bytes
from tests.tiny_models import save_tiny
from report_builder.executors import ray_local

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (pip install 'report_builder[distributed]')")
ROOT = Path(__file__).resolve().parents[2]

FIGURES = ["k21-tab2", "k21-fig3", "k21-tab8", "k24-ctx-ff", "k24-ffamp-top", "k24-res-norms", "k24-ln-dims"]
"""Figures drawn from every analysis' tables (K21 tokens, freq, expansion; K24 ctx, pairs, norms, LN dims)."""

HOLDER = r"""
import os
import sys
import ray
from report_builder.executors.ray_local import start_local
start_local(ray, num_cpus=2, token=os.environ["RAY_AUTH_TOKEN"], log_to_driver=False)  # loopback only
try:
    from ray._private.worker import _global_node
    session = _global_node.get_session_dir_path()
except Exception:  # a private API: the logs are only a diagnostic
    session = ""
print(ray.get_runtime_context().gcs_address, session, sep="\t", flush=True)
sys.stdin.read()  # until the test module closes it
ray.shutdown()
"""
"""The cluster: a local Ray (GCS, raylet, workers) started by this child as the command line starts one
(`ray_local.start_local`: bound to 127.0.0.1, token authentication), stopped when its stdin closes."""


AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
"""The module cluster's token authentication (Ray's default for a new cluster), given to the holder and
every build that joins it; through the environment, so no ``~/.ray/auth_token`` is written."""


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **AUTH, **extra}


@dataclass
class Cluster:
    address: str
    session: str
    hold: Path
    proc: subprocess.Popen

    def diagnose(self) -> str:
        """What to show when a Ray build failed: whether the cluster still runs, and its logs' tails."""
        alive = self.proc.poll() is None
        out = [f"cluster holder {'alive' if alive else f'exited with {self.proc.returncode}'}"]
        logs = Path(self.session) / "logs" if self.session else None
        for name in ("raylet.out", "raylet.err", "gcs_server.err"):
            p = logs / name if logs else None
            if p and p.is_file():
                out.append(f"--- {name} (tail)\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local Ray for the module, in a child process; workers inherit the test-only hold folder."""
    if not HAVE_RAY:
        pytest.skip("Ray is not installed")
    hold = tmp_path_factory.mktemp("hold")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=hold,
                            env=_env(**{ray_executor.TEST_HOLD_ENV: str(hold)}))
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        pytest.fail(f"the local Ray did not start: {proc.stderr.read()[-3000:]}")
    address, _, session = line.partition("\t")
    try:
        yield Cluster(address, session, hold, proc)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cli_cmd(cluster: Cluster, d: dict, where: Path, *extra: str) -> list[str]:
    where.mkdir(parents=True, exist_ok=True)
    (where / "c.yaml").write_text(yaml.safe_dump(d))
    return [sys.executable, "-m", "report_builder", "analyze", "--config", str(where / "c.yaml"),
            "--executor", "ray", "--address", cluster.address, "--no-progress", *extra]


def _cli(cluster: Cluster, d: dict, where: Path, *extra: str, ok: bool = True) -> subprocess.CompletedProcess:
    """``report-builder analyze --executor ray`` on the module's cluster, as a user runs it."""
    r = subprocess.run(_cli_cmd(cluster, d, where, *extra), capture_output=True, text=True, timeout=900,
                       env=_env(), cwd=where)
    if ok:
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-4000:]}\n{cluster.diagnose()}"
    return r


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


def _figure_hashes(d: dict, rep) -> dict[str, str]:
    cfg = from_dict(d)
    api.render(cfg, rep.tables, rep.provenance, log=lambda *_: None)
    return figure_hashes(d["out_dir"])


@pytest.fixture(scope="module")
def local_build(tmp_path_factory, models):
    d = _cfg(tmp_path_factory.mktemp("local"), models, "local")
    rep = _analyze(d)
    return d, rep, table_bytes(d["cache_dir"]), _figure_hashes(d, rep)


def _log_lines(stderr: str) -> list[str]:
    return stderr.replace("\r", "\n").splitlines()


@needs_ray
def test_sharded_ray_build_equals_local_build_and_resumes(cluster, models, local_build, tmp_path):
    """`--executor ray --shard-size 2`: several shards per dataset and analysis, reduced on the cluster,
    give the local (unsharded) build's tables byte for byte and its figure hashes; removing a final
    entry and one of its shards, the next build reruns just those two tasks."""
    import re
    import shutil

    ld, lrep, ltables, lhashes = local_build
    d = _cfg(tmp_path, models, "ray", shard_size=2)
    # as a user runs it: without --no-progress (off a terminal no bar is drawn: the build's one overall line
    # is logged once a minute, `executors.progress`, and each task says when it is computed)
    cmd = [c for c in _cli_cmd(cluster, d, tmp_path / "run") if c != "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_env(), cwd=tmp_path / "run")
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-4000:]}\n{cluster.diagnose()}"
    assert f"ray: joined the Ray cluster at {cluster.address}: 2 CPUs, 0 GPUs on 1 node(s)" in r.stderr
    assert "build:" not in r.stderr
    lines = _log_lines(r.stderr)
    computed = [ln.strip() for ln in lines if ln.startswith("  computed ")]
    assert re.search(rf"analyses: {len(computed)} computed, 0 reused", r.stdout), (r.stdout, computed)
    shards = [c for c in computed if " 0:2]" in c or " 2:" in c]
    assert len(shards) >= 10, computed  # k21_mixing, k21_frequency, k24_scopes x 2 datasets x 2 models
    assert any(c.startswith("computed enc · wiki [k21_mixing 0:2]") for c in computed), computed
    pids = {ln.split(" on ", 1)[1].split(" in ", 1)[0] for ln in lines if ln.startswith("  loaded ")}
    assert len(pids) >= 2, lines  # the work was shared by several worker processes
    # the local executor finds every final entry in the cache the cluster wrote: nothing left to compute
    rep = _analyze(d)
    assert not rep.computed and rep.entries == lrep.entries  # the same final entries, in plan order
    rtables = table_bytes(d["cache_dir"])
    finals = {k: v for k, v in rtables.items() if ".shard/" not in k}
    assert len(finals) >= 10 and finals.keys() == ltables.keys()
    differ = [k for k in ltables if ltables[k] != finals[k]]
    assert not differ, f"{len(differ)} of {len(ltables)} tables differ: {differ[:5]}"
    hashes = _figure_hashes(d, rep)
    assert sum(h is not None for h in hashes.values()) == len(FIGURES) and hashes == lhashes
    # resume: a final entry and one of its shards are gone; only those two tasks run again
    cache = Cache(d["cache_dir"])
    final = next((a, k) for a, k in rep.entries if a == "k21_mixing")
    shard = next(p for p in (Path(d["cache_dir"]) / "results" / "k21_mixing.shard").iterdir()
                 if p.is_dir() and json.loads((p / "meta.json").read_text())["params"]["dataset"] == "wiki"
                 and json.loads((p / "meta.json").read_text())["params"]["model"] == "enc")
    shutil.rmtree(cache.path(*final))
    shutil.rmtree(shard)
    again = _cli(cluster, d, tmp_path / "run")
    computed = [ln.strip() for ln in _log_lines(again.stderr) if ln.startswith("  computed ")]
    assert "analyses: 2 computed" in again.stdout and len(computed) == 2, (again.stdout, computed)
    assert computed[1].startswith("computed enc · wiki [k21_mixing] "), computed
    assert table_bytes(d["cache_dir"]) == rtables
    again = _cli(cluster, d, tmp_path / "run")  # and a third run on the cluster reuses everything
    assert re.search(r"^analyses: 0 computed, [1-9]\d* reused", again.stdout, re.M), again.stderr[-3000:]



@needs_ray
def test_smoke_build_on_ray_equals_the_local_smoke_build(cluster, smoke, tmp_path):
    """The acceptance check as users run it: ``analyze --preset smoke --executor ray --shard-size 1`` (the
    real embedded models; every K21 and K24 aggregate split into one-sequence shards, reduced on the
    cluster) gives the session's local smoke build (tests/conftest.py) byte for byte: every table. (The
    site is drawn from the tables alone: that a Ray-built cache renders the local figure hashes is
    `test_sharded_ray_build_equals_local_build_and_resumes`; rendering the smoke site again here would
    double this test's time.)"""
    where = tmp_path / "run"
    where.mkdir()
    cmd = [sys.executable, "-m", "report_builder", "analyze", "--preset", "smoke", "--no-progress",
           "--executor", "ray", "--address", cluster.address, "--shard-size", "1",
           "--cache", str(where / "cache")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=_env(), cwd=where)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-4000:]}\n{cluster.diagnose()}"
    computed = [ln.strip() for ln in _log_lines(r.stderr) if ln.startswith("  computed ")]
    for analysis in ("k21_mixing", "k21_frequency", "k24_scopes"):  # each split, on both models
        assert sum(f"[{analysis} 1:2]" in c for c in computed) >= 2, (analysis, computed)
    ltables, rtables = table_bytes(smoke[0] / "cache"), table_bytes(where / "cache")
    finals = {k: v for k, v in rtables.items() if ".shard/" not in k}
    assert len(ltables) >= 40 and finals.keys() == ltables.keys()
    differ = [k for k in ltables if ltables[k] != finals[k]]
    assert not differ, f"{len(differ)} of {len(ltables)} tables differ: {differ[:5]}"


def _pid(started: Path) -> int:
    """The worker pid a ``started-<analysis>-<key>-<pid>`` file names (its name, not its text: the
    file may still be empty when read)."""
    return int(started.name.rsplit("-", 1)[1])


def _wait(until, proc: subprocess.Popen, seconds: float):
    """Poll ``until()`` while the build runs, for at most ``seconds``; its last value."""
    deadline = time.monotonic() + seconds
    while not (got := until()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


@needs_ray
def test_killed_worker_is_retried_without_partial_entries(cluster, models, local_build, tmp_path):
    """SIGKILL of the worker computing an entry (it holds the entry's lock, in the middle of the work):
    Ray runs the task again in another worker, no entry exists in the meantime, the build finishes with
    the local build's tables and leaves no temporary folder. One model and one dataset (7 tasks), so the
    rerun is not queued behind many others on two CPUs."""
    hold = cluster.hold
    d = _cfg(tmp_path, models, "killed")
    d["models"], d["datasets"] = d["models"][:1], d["datasets"][:1]
    tasks = planning.plan(from_dict(d)).tasks
    key = next(t.key for t in tasks if t.analysis == "k21_mixing")
    flag = hold / f"hold-k21_mixing-{key}"
    flag.write_text("")
    where = tmp_path / "run"
    cmd = _cli_cmd(cluster, d, where)
    with open(where / "out.txt", "w") as out, open(where / "err.txt", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=_env(), cwd=where)
    mine = f"started-k21_mixing-{key}-*"
    try:
        started = _wait(lambda: list(hold.glob(mine)), proc, 300)
        assert started, f"the task did not reach the hold point\n{(where / 'err.txt').read_text()[-3000:]}"
        pid = _pid(started[0])
        os.kill(pid, signal.SIGKILL)  # the worker holds the entry's lock, in the middle of computing it
        # Ray runs the task again in another worker, which reaches the same point (the lock was freed)
        rerun = _wait(lambda: [p for p in hold.glob(mine) if _pid(p) != pid], proc, 300)
        assert rerun, f"the task was not run again\n{(where / 'err.txt').read_text()[-3000:]}\n{cluster.diagnose()}"
        assert not (Cache(d["cache_dir"]).path("k21_mixing", key) / "meta.json").exists()
    finally:
        flag.unlink(missing_ok=True)
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    stderr = (where / "err.txt").read_text()
    assert proc.returncode == 0, f"exit {proc.returncode}\n{stderr[-4000:]}\n{cluster.diagnose()}"
    assert f"analyses: {len(tasks)} computed, 0 reused" in (where / "out.txt").read_text()
    tables, ltables = table_bytes(d["cache_dir"]), local_build[2]
    assert len(tables) >= 5 and all(k in ltables and tables[k] == ltables[k] for k in tables), sorted(tables)
    cache = Cache(d["cache_dir"])
    assert cache.stale_temp() == []
    leftovers = [p for p in (Path(d["cache_dir"]) / "results").rglob("*") if ".tmp-" in p.name]
    assert leftovers == []


@needs_ray
def test_ray_worker_error_is_the_error_itself(cluster, models, tmp_path):
    """An expected failure inside a task (here: a model directory whose weights are missing, found only
    when a worker loads it) is not retried and reaches the user as its own one-line error and exit code;
    ``--debug`` shows that it came from a Ray worker."""
    import shutil

    bad = tmp_path / "bad-model"
    shutil.copytree(models[0], bad, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    d = {"models": [{"name": "bad", "source": str(bad), "role": "primary_encoder"}],
         "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 16}],
         "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")}
    r = _cli(cluster, d, tmp_path / "run", "--debug", ok=False)
    last = [ln for ln in _log_lines(r.stderr) if ln.strip()][-1]
    # the exception the worker raised is the build's own (UnknownModel, a ModelError: one `error:` line
    # and exit code 4 without --debug, see tests/test_failures.py), caused by Ray's RayTaskError: it did
    # run on a worker
    assert last.startswith("report_builder.errors.UnknownModel: ") and "has a config.json but no weights" in last, \
        r.stderr[-3000:]
    assert "RayTaskError" in r.stderr and r.returncode != 0


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
    assert err == ["error: --executor ray needs Ray, which is not installed: the [distributed] extra: "
                   f"{install_line('distributed')} (or build with the default --executor local)"], err



@needs_ray
def test_could_not_join_names_the_address_and_token_authentication(monkeypatch):
    """`--address` that cannot be joined (nothing there, or a cluster with token authentication that
    this environment has no token for: Ray reports both alike): one line naming the address, how to
    start a cluster, and what token authentication needs. A stand-in for ``ray``: no Ray starts here."""
    from report_builder.errors import DistributedError

    class NoCluster:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kw):
            raise ConnectionError(f"Failed to connect to Ray cluster at {kw['address']}.\nmore")

    ex = ray_executor.RayExecutor(address="10.0.0.9:6379", log=lambda *_: None, progress=False)
    monkeypatch.setattr(ray_executor, "_check_reachable", lambda address: None)  # something answers there
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(DistributedError) as e:
        ex._connect(NoCluster)
    msg = str(e.value)
    assert "\n" not in msg and "address=10.0.0.9:6379 (Failed to connect to Ray cluster at 10.0.0.9:6379.)" in msg
    assert "`ray start --head`" in msg and "RAY_AUTH_MODE=token" in msg and "RAY_AUTH_TOKEN" in msg
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(DistributedError) as e:
        ex._connect(NoCluster)
    assert "token authentication is on here: the token must be the cluster's" in str(e.value)


@needs_ray
def test_nothing_listening_at_the_address_fails_at_once():
    """An explicit ``HOST:PORT`` where nothing accepts connections (a typo, a stopped head): one line at
    once, before Ray, which would retry it for minutes (forever for a closed local port)."""
    import socket

    from report_builder.errors import DistributedError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    class Untouched:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kw):
            raise AssertionError("ray.init must not be reached")

    ex = ray_executor.RayExecutor(address=f"127.0.0.1:{port}", log=lambda *_: None, progress=False)
    with pytest.raises(DistributedError) as e:
        ex._connect(Untouched)
    assert str(e.value) == (f"could not join the Ray cluster at address=127.0.0.1:{port}: nothing accepts "
                            "connections there (Connection refused); check the head's address and port "
                            "(`ray status` on the head prints them), or leave out address to start a local Ray")
    from report_builder.errors import cli_vocabulary

    with cli_vocabulary(), pytest.raises(DistributedError) as e:  # `report-builder build --address ...`
        ex._connect(Untouched)
    assert str(e.value) == (f"could not join the Ray cluster at --address 127.0.0.1:{port}: nothing accepts "
                            "connections there (Connection refused); check the head's address and port "
                            "(`ray status` on the head prints them), or leave out --address to start a local Ray")
    assert ray_executor._host_port("auto") is None and ray_executor._host_port("ray://head:10001") is None
    assert ray_executor._host_port("[::1]:6379") == ("::1", 6379)
    assert ray_executor._host_port("head:6379") == ("head", 6379)

def test_resources_per_task():
    from report_builder.analyses.planning import Task

    decomposing = Task("k21_mixing", 1, None, {}, "k", size=4)  # type: ignore[arg-type]
    weights = Task("architecture", 1, None, {}, "k", size=0)  # type: ignore[arg-type]
    assert ray_executor.task_resources(decomposing, "cuda") == {"num_gpus": 1.0, "num_cpus": 1.0}
    assert ray_executor.task_resources(decomposing, "cuda:1") == {"num_gpus": 1.0, "num_cpus": 1.0}
    assert ray_executor.task_resources(decomposing, "cpu") == {"num_cpus": 1.0}
    assert ray_executor.task_resources(weights, "cpu") == {"num_cpus": ray_executor.WEIGHTS_ONLY_SHARE}
    assert ray_executor.task_resources(weights, "cuda") == {"num_gpus": ray_executor.WEIGHTS_ONLY_SHARE,
                                                          "num_cpus": ray_executor.WEIGHTS_ONLY_SHARE}
    assert ray_executor.task_resources(decomposing, "cuda", gpus=4) == {"num_gpus": 4.0, "num_cpus": 1.0}
    assert ray_executor.task_resources(weights, "cuda", gpus=4)["num_gpus"] == 4.0
    reduce = Task("k21_mixing", 1, None, {}, "k", size=0, reduce=True)  # type: ignore[arg-type]
    assert ray_executor.task_resources(reduce, "cuda", gpus=4) == {"num_cpus": ray_executor.WEIGHTS_ONLY_SHARE}

    class Cfg:
        device, device_map = "cuda", "auto"

    assert ray_executor.gpus_per_task(Cfg, [0, 8, 4]) == 4  # the smallest GPU node holds the map
    Cfg.device_map = "none"
    assert ray_executor.gpus_per_task(Cfg, [8]) == 1
    Cfg.device, Cfg.device_map = "cpu", "auto"
    assert ray_executor.gpus_per_task(Cfg, [8]) == 1


def test_this_process_is_no_ray_driver():
    """The rule of this module (see its docstring): Ray runs in child processes only, so a Ray failure
    fails a test instead of ending the suite."""
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()


def _listening(pid: int) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every TCP socket listening in process ``pid`` and its
    descendants (the Ray processes a command started: GCS, raylet, agents, workers, the driver)."""
    import psutil

    root = psutil.Process(pid)
    out = []
    for p in [root, *root.children(recursive=True)]:
        try:
            conns = (p.net_connections if hasattr(p, "net_connections") else p.connections)(kind="inet")
            name = p.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        out += [(name, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def _loopback(ip: str) -> bool:
    import ipaddress

    a = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(a, "ipv4_mapped", None)
    return (mapped or a).is_loopback


@needs_ray
def test_local_ray_listens_on_loopback_only_and_never_joins_RAY_ADDRESS(cluster, models, tmp_path):
    """`--executor ray` without `--address`, with RAY_ADDRESS naming another running cluster (the
    module's): the command line starts its own Ray (1 CPU, not the module cluster's 2) and every port
    its Ray processes listen on (GCS, raylet, object manager, agents, workers, the driver) is on the
    loopback interface, read while a worker holds a task; its token lives in the environment only
    (no ~/.ray/auth_token in HOME)."""
    hold, home, where = tmp_path / "hold", tmp_path / "home", tmp_path / "run"
    for p in (hold, home, where):
        p.mkdir()
    d = {"models": [{"name": "enc", "source": str(models[0]), "role": "primary_encoder"}],
         "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 16}], "k24": {"top_k": 3, "examples": 1},
         "cache_dir": str(tmp_path / "cache")}
    (where / "c.yaml").write_text(yaml.safe_dump(d))
    key = next(t.key for t in planning.plan(from_dict(d)).tasks if t.analysis == "k21_mixing")
    flag = hold / f"hold-k21_mixing-{key}"
    flag.write_text("")
    env = {k: v for k, v in _env(**{ray_executor.TEST_HOLD_ENV: str(hold)}).items()
           if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    env.update(RAY_ADDRESS=cluster.address, HOME=str(home))
    cmd = [sys.executable, "-m", "report_builder", "analyze", "--config", str(where / "c.yaml"),
           "--executor", "ray", "--ray-num-cpus", "1", "--no-progress"]
    with open(where / "err.txt", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=where)
    try:
        started = _wait(lambda: list(hold.glob("started-k21_mixing-*")), proc, 300)
        assert started, f"no task reached the hold point\n{(where / 'err.txt').read_text()[-3000:]}"
        listening = _listening(proc.pid)
    finally:
        flag.unlink(missing_ok=True)
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    stderr = (where / "err.txt").read_text()
    assert proc.returncode == 0, stderr[-3000:]
    names = {n for n, _, _ in listening}
    assert "gcs_server" in names and "raylet" in names, listening  # the sockets were read
    assert [x for x in listening if not _loopback(x[1])] == [], listening
    assert "ray: started a local Ray at 127.0.0.1:" in stderr and ": 1 CPUs, 0 GPUs on 1 node(s)" in stderr, stderr
    assert cluster.address not in stderr
    assert not (home / ".ray").exists()  # no token file: the token was in the environment only


def test_local_ray_options_and_environment(monkeypatch):
    """What `start_local` gives ray.init and the environment (no Ray starts): a new local instance
    (address "local", so RAY_ADDRESS is never read), the loopback node address, no dashboard, token
    authentication with a fresh token, RAY_ADDRESS removed while it runs, everything restored after."""
    got = {}

    class FakeRay:
        @staticmethod
        def init(**kw):
            got.update(kw, env={k: os.environ.get(k) for k in ray_local.local_ray_env()})

    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    env = ray_local.start_local(FakeRay, num_cpus=3, log_to_driver=False)
    assert got["address"] == "local" and got["_node_ip_address"] == "127.0.0.1" and got["num_cpus"] == 3
    assert got["include_dashboard"] is False and got["log_to_driver"] is False
    e = got["env"]
    assert e["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0" and e["RAY_AUTH_MODE"] == "token"
    assert len(e["RAY_AUTH_TOKEN"]) == 64 and e["RAY_ADDRESS"] is None
    assert ray_local.local_ray_env()["RAY_AUTH_TOKEN"] != e["RAY_AUTH_TOKEN"]  # a new token each time
    env.__exit__(None, None, None)
    assert os.environ["RAY_ADDRESS"] == "10.1.2.3:6379" and "RAY_AUTH_TOKEN" not in os.environ
