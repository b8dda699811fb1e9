"""The Ray executor (``--executor ray``, options ``--address``, ``--ray-num-cpus``): a build's planned
tasks run as Ray tasks on a cluster.

`RayExecutor.execute(plan)` submits every task of a `planning.Plan` that is not already in the cache
as one Ray task (`_run_task_remote`) whose arguments include the ObjectRefs of the task's ``needs``,
so Ray runs a task only after the tasks it reads have finished: the executor is generic over the
plan's dependency DAG (plain tasks, sequence shards and their reduce tasks alike). Each Ray task
requests its resources (`task_resources`): one GPU for a decomposing task of a CUDA build, else one
CPU; a weights-only task half of one, a reduce task half a CPU. Ray retries a task whose worker died (``max_retries``); an
error the task raises itself (a bad model, a missed error bound) is not retried and reaches the
caller as that error.

A worker runs its task through `executors.base.run_task`, i.e. through the content-addressed cache opened by
path: reuse, or compute and publish atomically under the entry's file lock. So a worker killed
mid-task leaves no partial entry (its temporary folder is swept once its process is gone), the
retry computes the entry once, and a resumed build reuses every entry that finished. The worker
returns only ``(analysis, key)`` and a few numbers; the driver reads the tables from the cache.
On a cluster the cache must therefore live on a filesystem every node and the driver share, with
working file locks (NFSv4, Lustre, CephFS, ...): ``--cache /shared/...``. The evaluation sets travel
once, through the object store (`ray.put`); model sources (and anything else a worker loads) must be
reachable from every worker; relative paths resolve against the driver's working directory.

A worker loads through `loading.load_for` (the one configured loader: device, dtype, revision, device
map) and keeps the model in a per-process memo keyed by (name, source, revision, device, dtype,
placement), so consecutive tasks of one model load it once per worker (one model at a time, to bound
memory). With a device map on CUDA every model-loading task takes all the GPUs of a node
(`gpus_per_task`), which Ray makes the task's visible GPUs. CPU workers run the deterministic CPU engine with torch's intra-op threads pinned to 1
(`engine.set_cpu_workers`), so their tables are byte-identical to a local build's.

Ray is optional (the ``[distributed]`` extra); `require_ray` turns its absence
into one `MissingDependency` line. Pitfall: the ``ray`` module is imported inside functions only.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from report_builder.errors import DistributedError, MissingDependency, UsageError, first_line, option
from report_builder.extras import install_line
from report_builder.executors.base import Option
from report_builder.executors.ray_local import (LOOPBACK, LocalRayEnvironment, is_loopback, loopback_only,
                                                start_local)

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.analyses.planning import Plan, Result, Task
    from report_builder.cache import Cache

INSTALL = "the [distributed] extra: " + install_line("distributed")
ADDRESS = Option("--address", "address", metavar="ADDR",
                 help="with --executor ray: the cluster to join (auto: the one `ray start --head` runs here; "
                      "HOST:PORT of a cluster with token authentication also needs RAY_AUTH_MODE=token and "
                      "its token: docs/guide/cluster.md); default: start a local Ray on 127.0.0.1 (never the "
                      "cluster RAY_ADDRESS names)")
NUM_CPUS = Option("--ray-num-cpus", "num_cpus", type=int, metavar="N",
                  help="with --executor ray and no --address: CPUs of the local Ray (default: all cores)")
"""The Ray executor's own options (`RayExecutor.options`; messages name them with `Option.named`)."""
MAX_RETRIES = 3
"""How often Ray reruns a task whose worker died (a killed process, a lost node) before giving up."""
WEIGHTS_ONLY_SHARE = 0.5
"""The CPU (or, in a CUDA build, GPU) share a weights-only task requests: two fit beside each other."""
TEST_HOLD_ENV = "REPORT_BUILDER_TEST_HOLD_DIR"
"""Test-only: with this set to a folder holding ``hold-<analysis>-<key>``, a worker computing that entry
writes ``started-<analysis>-<key>-<pid>`` there once it holds the entry's lock, then waits until the
hold file is removed (how `tests/executors/test_ray.py` kills a worker mid-task). Unset: no effect."""


def require_ray():
    """The ``ray`` module, or `MissingDependency` with the install line."""
    try:
        import ray
    except ImportError:
        from report_builder.executors import DEFAULT

        raise MissingDependency(f"{option('executor', 'ray')} needs Ray, which is not installed: {INSTALL} "
                                f"(or build with the default {option('executor', DEFAULT)})") from None
    return ray


def task_resources(task: "Task", device: str, gpus: int = 1) -> dict[str, float]:
    """The Ray resources a task requests: a decomposing task (a shard included) one GPU on a CUDA build,
    else one CPU; a weights-only task (``size == 0``) `WEIGHTS_ONLY_SHARE` of the same; a reduce task,
    which loads no model, `WEIGHTS_ONLY_SHARE` of a CPU. ``gpus > 1`` (a model spread by a device map
    over a node's GPUs): every task that loads the model takes that many whole GPUs."""
    share = 1.0 if task.size > 0 else WEIGHTS_ONLY_SHARE
    if task.reduce:
        return {"num_cpus": share}
    if str(device).startswith("cuda"):
        return {"num_gpus": float(gpus) if gpus > 1 else share, "num_cpus": share}
    return {"num_cpus": share}


def gpus_per_task(cfg, gpus_per_node: list[int]) -> int:
    """GPUs a model-loading task asks for: 1, or with a device map on CUDA (``device_map`` not
    ``none``) every GPU of the smallest GPU node of the cluster (the map spreads the layers over them)."""
    if not str(cfg.device).startswith("cuda") or getattr(cfg, "device_map", "none") == "none":
        return 1
    counts = [n for n in gpus_per_node if n > 0]
    return min(counts) if counts else 1


# ------------------------------------------------------------------ the worker side

_MODELS: "OrderedDict[tuple, Any]" = OrderedDict()  # this worker's loaded model (one at a time)
_SETS: dict[str, Any] = {}  # object-ref hex -> the evaluation sets, deserialised once per worker
_MODELS_KEPT = 1


def _worker_model(task: "Task") -> tuple[Any, float | None]:
    """The task's model from this worker's memo, loading it on a miss; (model, load seconds or None)."""
    from report_builder.models import device_plan, loading

    mc, cfg = task.subject.model, _worker_cfg(task.subject.cfg)
    key = (mc.name, mc.source, mc.revision, str(cfg.device), cfg.dtype,
           tuple(sorted(device_plan.placement_options(cfg).items())))
    if key in _MODELS:
        _MODELS.move_to_end(key)
        return _MODELS[key], None
    while len(_MODELS) >= _MODELS_KEPT:
        _MODELS.popitem(last=False)
    t0 = time.perf_counter()
    lm = loading.load_for(mc, cfg)
    _MODELS[key] = lm
    return lm, time.perf_counter() - t0


def _worker_cfg(cfg):
    """``cfg`` as a worker loads with: ``cuda:N`` becomes ``cuda``, the first of the GPUs Ray assigned
    to this task (Ray sets ``CUDA_VISIBLE_DEVICES``); the GPU index changes no result or key."""
    import dataclasses

    if str(cfg.device).startswith("cuda:"):
        return dataclasses.replace(cfg, device="cuda")
    return cfg


def _test_hold(task: "Task") -> None:
    d = os.environ.get(TEST_HOLD_ENV)
    hold = Path(d) / f"hold-{task.analysis}-{task.key}" if d else None
    if hold is None or not hold.exists():
        return
    (Path(d) / f"started-{task.analysis}-{task.key}-{os.getpid()}").write_text(str(os.getpid()))
    deadline = time.monotonic() + 300
    while hold.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _run_task_remote(task: "Task", cache_root: str, sets_box: list, cwd: str, *needs: Any) -> dict[str, Any]:
    """One task on a Ray worker (``needs``: the finished needs' returns, here only for ordering)."""
    from report_builder.cache import Cache
    from report_builder.executors.base import run_task

    if cwd and os.path.isdir(cwd) and os.getcwd() != cwd:
        os.chdir(cwd)  # relative model paths resolve as on the driver
    if str(task.subject.cfg.device) == "cpu":
        from report_builder.engine import set_cpu_workers

        set_cpu_workers(1)  # the deterministic engine: byte-identical to a local build
    if "tf32" in task.params:  # the driver's TF32 flag is in the key: compute under the same one
        import torch

        torch.backends.cuda.matmul.allow_tf32 = bool(task.params["tf32"])
    ref = sets_box[0]
    if ref.hex() not in _SETS:
        import ray

        _SETS.clear()
        _SETS[ref.hex()] = ray.get(ref)
    loaded: list[float] = []

    def lm():
        model, seconds = _worker_model(task)
        if seconds is not None:
            loaded.append(seconds)
        _test_hold(task)
        return model

    entry = run_task(task, Cache(cache_root), _SETS[ref.hex()], lm, show_progress=False)
    return {"analysis": task.analysis, "key": task.key, "reused": entry.reused,
            "seconds": entry.meta.get("seconds", 0.0), "loaded": loaded[0] if loaded else None,
            "pid": os.getpid(), "host": socket.gethostname()}


# ------------------------------------------------------------------ the driver side


REACH_TIMEOUT_S = 10.0
"""How long `_check_reachable` waits for the cluster's GCS port to accept a connection."""


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``HOST:PORT`` (or ``[IPv6]:PORT``) address; None for ``auto``, ``ray://``
    client addresses and anything else Ray resolves itself."""
    if "://" in address or address == "auto":
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def _check_reachable(address: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """Fail at once, in one line, when nothing accepts connections at an explicit ``HOST:PORT``: Ray
    itself retries such an address for minutes, or forever for a closed local port. A loopback host is
    also tried as this machine's address, as Ray rewrites it so. Addresses Ray resolves (``auto``,
    ``ray://``) are left to Ray."""
    hp = _host_port(address)
    if hp is None:
        return
    host, port = hp
    hosts = [host]
    if host in ("localhost", "127.0.0.1", "::1"):
        try:
            hosts.append(socket.gethostbyname(socket.gethostname()))
        except OSError:
            pass
    why = ""
    for h in hosts:
        try:
            socket.create_connection((h, port), timeout=timeout).close()
            return
        except TimeoutError:
            why = f"no answer within {timeout:g} s"
        except OSError as e:
            why = e.strerror or type(e).__name__
    raise DistributedError(f"could not join the Ray cluster at {ADDRESS.named(address)}: nothing accepts "
                           f"connections there ({why}); check the head's address and port (`ray status` on "
                           f"the head prints them), or leave out {ADDRESS.named()} to start a local Ray")


def _gcs_address(ray) -> str | None:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # noqa: BLE001 - only for the log line
        return None


def _auth_hint() -> str:
    """Part of the could-not-join line: a cluster with token authentication (what a new ``ray.init``
    cluster has by default, and ``ray start`` where a token exists) refuses a driver that joins by an
    explicit address without ``RAY_AUTH_MODE=token``; Ray never turns it on by itself there."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return "; token authentication is on here: the token must be the cluster's"
    return ("; a cluster with token authentication also needs RAY_AUTH_MODE=token and its token "
            "(RAY_AUTH_TOKEN, or ~/.ray/auth_token) in this environment")


class RayExecutor:
    """Runs a plan's tasks as Ray tasks; yields their results in plan order (`executors.base.Executor`).

    Args:
        address: the cluster to join, exactly (``HOST:PORT``; ``auto``: the one `ray start` runs on
            this machine; ``ray://`` a remote one); None: a Ray instance already initialised in this
            process, else a new local one with ``num_cpus`` CPUs (default: all), bound to 127.0.0.1
            with token authentication (`ray_local.start_local`), never a cluster that ``RAY_ADDRESS``
            or ``/tmp/ray/ray_current_cluster`` names.
        log: the build log; progress: one bar over the build's sequences, with tasks done/total.
        max_retries: reruns of a task whose worker died.
    Raises:
        MissingDependency: Ray is not installed (at construction, before any work).
    """

    name: ClassVar[str] = "ray"
    summary: ClassVar[str] = ("every task as a Ray task on a cluster (needs the [distributed] extra; "
                              "docs/guide/cluster.md)")
    options: ClassVar[tuple[Option, ...]] = (ADDRESS, NUM_CPUS)

    @classmethod
    def from_options(cls, *, log: Callable[[str], Any], progress: bool, address: str | None = None,
                     num_cpus: int | None = None) -> "RayExecutor":
        """The executor ``--executor ray [--address ADDR | --ray-num-cpus N]`` asks for."""
        if address is not None and num_cpus is not None:
            raise UsageError(f"{NUM_CPUS.named()} sizes a Ray started here; a cluster joined with {ADDRESS.named()} "
                             "has its own")
        return cls(address=address, num_cpus=num_cpus, log=log, progress=progress)

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None,
                 log: Callable[[str], Any] = print, progress: bool = True, max_retries: int = MAX_RETRIES):
        require_ray()
        self.address, self.num_cpus, self.log, self.show_progress = address, num_cpus, log, progress
        self.max_retries = max_retries
        self.workers: set[tuple[str, int]] = set()  # (host, pid) of the workers that ran a task
        self._env: LocalRayEnvironment | None = None  # held while a Ray started here runs

    def _connect(self, ray) -> bool:
        """Join the ``--address`` cluster, or start a local Ray (`start_local`: loopback only, token
        authentication, never a cluster found through ``RAY_ADDRESS``); True when this executor
        connected (and so shuts it down)."""
        if ray.is_initialized():
            return False
        import logging

        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        if self.address:
            _check_reachable(self.address)
            hp = _host_port(self.address)
            if hp is not None and is_loopback(hp[0]) and loopback_only(hp[1]):  # one started as ours is
                self._env = LocalRayEnvironment(join=True).__enter__()
            try:
                ray.init(address=self.address, **kw)
            except (ConnectionError, TimeoutError) as e:
                self._release()
                raise DistributedError(f"could not join the Ray cluster at {ADDRESS.named(self.address)} "
                                       f"({first_line(e)}); "
                                       f"start one with `ray start --head`, or leave out {ADDRESS.named()} to "
                                       f"start a local Ray{_auth_hint()}") from e
            where = f"joined the Ray cluster at {_gcs_address(ray) or self.address}"
        else:
            self._env = start_local(ray, self.num_cpus, **kw)
            where = f"started a local Ray at {_gcs_address(ray) or LOOPBACK} (loopback only, token authentication)"
        res = ray.cluster_resources()
        self.log(f"ray: {where}: {int(res.get('CPU', 0))} CPUs, {int(res.get('GPU', 0))} GPUs on "
                 f"{len([n for n in ray.nodes() if n.get('Alive')])} node(s)")
        return True

    def _disconnect(self, ray) -> None:
        ray.shutdown()
        self._release()

    def _release(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.__exit__(None, None, None)

    def execute(self, plan: "Plan") -> Iterator["Result"]:
        from report_builder.analyses.planning import Result
        from report_builder.cache import Cache

        ray = require_ray()
        cache = Cache(Path(plan.cfg.cache_dir).resolve())
        entries: dict[int, Any] = {}
        todo = []
        for i, task in enumerate(plan.tasks):  # a resumed build reuses every finished entry
            hit = cache.get(task.analysis, task.key)
            if hit is None:
                todo.append(i)
            else:
                entries[i] = hit
        total_seqs = sum(plan.tasks[i].size for i in todo)
        self.log(f"ray: {len(todo)} of {len(plan.tasks)} tasks to run ({total_seqs} sequences), "
                 f"{len(entries)} reused from the cache {cache.base}")
        started = self._connect(ray) if todo else False
        refs: dict[Any, int] = {}
        try:
            if todo:
                refs = self._submit(ray, plan, todo, cache)
            yield from self._collect(ray, plan, refs, entries, cache, total_seqs, Result)
        except BaseException:
            for ref in refs:
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - finished or already gone
                    pass
            raise
        finally:
            if started:
                self._disconnect(ray)
        cache.sweep()  # temporary folders of workers that were killed while publishing

    def _submit(self, ray, plan: "Plan", todo: list[int], cache: "Cache") -> dict[Any, int]:
        remote = ray.remote(_run_task_remote)
        gpus = gpus_per_task(plan.cfg, [int(n.get("Resources", {}).get("GPU", 0)) for n in ray.nodes()
                                        if n.get("Alive")])
        sets_box = [ray.put(plan.sets)]  # the evaluation sets travel once; a list keeps the ref unresolved
        by_id: dict[tuple[str, str], Any] = {}
        refs: dict[Any, int] = {}
        for i in todo:
            task = plan.tasks[i]
            needs = [by_id[n] for n in task.needs if n in by_id]  # needs not submitted are cached
            ref = remote.options(max_retries=self.max_retries, retry_exceptions=False,
                                 name=f"report_builder:{task.analysis}",
                                 **task_resources(task, plan.cfg.device, gpus)).remote(
                task, str(cache.base), sets_box, os.getcwd(), *needs)
            by_id[(task.analysis, task.key)] = ref
            refs[ref] = i
        return refs

    def _finished(self, ray, ref, task: "Task") -> dict[str, Any]:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from e
            raise
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError, ray.exceptions.OutOfMemoryError) as e:
            raise DistributedError(
                f"{task.label}: the Ray worker running it died {self.max_retries + 1} times "
                f"({type(e).__name__}); finished cache entries are kept, rerun to resume") from e

    def _collect(self, ray, plan: "Plan", refs: dict[Any, int], entries: dict[int, Any], cache: "Cache",
                 total_seqs: int, Result) -> Iterator["Result"]:
        from tqdm import tqdm

        from report_builder.executors.base import Progress

        n = len(plan.tasks)
        remaining, nxt = list(refs), 0
        with Progress("build", total_seqs, self.show_progress) as bar:
            bar.postfix(f"tasks {len(entries)}/{n}")
            while True:
                while nxt < n and nxt in entries:  # plan order
                    yield Result(plan.tasks[nxt], entries[nxt])
                    nxt += 1
                if nxt >= n:
                    break
                ready, remaining = ray.wait(remaining, num_returns=1)
                more, remaining = (ray.wait(remaining, num_returns=len(remaining), timeout=0)
                                   if remaining else ([], []))
                for ref in ready + more:
                    i = refs[ref]
                    task = plan.tasks[i]
                    info = self._finished(ray, ref, task)
                    entry = cache.get(task.analysis, task.key)
                    if entry is None:
                        raise DistributedError(
                            f"{task.label} finished on {info['host']} but its entry is not in the cache "
                            f"{cache.base}: the cache must be a path on a filesystem every Ray node and this "
                            f"machine share ({option('cache_dir', '/shared/...')})")
                    entry.reused = info["reused"]
                    entries[i] = entry
                    self.workers.add((info["host"], info["pid"]))
                    with tqdm.external_write_mode(file=sys.stderr):  # log lines above the bar, not through it
                        if info["loaded"] is not None:
                            self.log(f"  loaded {task.subject.model.name} on {info['host']}:{info['pid']} "
                                     f"in {info['loaded']:.1f}s")
                        self.log(f"  {'reused  ' if info['reused'] else 'computed'} {task.label}"
                                 + ("" if info["reused"] else f" in {info['seconds']:.1f}s"))
                    bar(task.size)
                    bar.postfix(f"tasks {len(entries)}/{n}")


EXECUTOR = RayExecutor
