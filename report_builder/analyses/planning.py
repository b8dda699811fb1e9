"""The plan: the analyses a configuration needs, as a list of tasks any executor can run.

`plan` turns a configuration into `Task` objects (analysis x model x dataset, each with its cache key
and size in sequences) without loading any model weights: it hashes the weights, loads the
evaluation sets and asks each model's adapter whether it is causal. An executor (`executors`) then
runs the tasks — `executors.local` in this process, `executors.ray` on a cluster (a task is plain
data: configuration and ids, no closures) — and `analyses.assemble` turns the results into tables.

Shards: with ``cfg.shard_size`` set, an analysis that declares a `Shard` and decomposes more
sequences than that is planned as shard tasks over consecutive ranges ``[lo, hi)`` of its items
(cached under ``<analysis>.shard`` with the range in their parameters) followed by its reduce task,
which has the analysis' own parameters and key and needs the shards. The tables are the same bytes
as unsharded (`analyses.base.Shard`), so sharded and unsharded builds share the final entry; a final
entry already in the cache is planned as a plain task (its shards are not scheduled), and shards
already in the cache are reused, so an interrupted build recomputes only the missing ones.

Contract for executors: a task's identity is ``(task.analysis, task.key)``; ``task.needs`` names
tasks earlier in the plan (or entries already cached); `executors.base.run_task` runs any task
(plain, shard or reduce) given only those; an executor yields a `Result` for every task, in plan
order; only the results of tasks that are not ``partial`` are tables of the build (`final_results`).

Pitfall: tasks run in plan order, and that order is the row order of the concatenated tables; an
executor that runs tasks in parallel must return results in plan order.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from report_builder.analyses import registry
from report_builder.analyses.base import Analysis, Subject, base_id, shard_id
from report_builder.cache import Cache, Entry, result_key

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.config import Config
    from report_builder.data import EvalSet


@dataclass(frozen=True)
class Task:
    """One analysis of one subject, with everything needed to run it elsewhere.

    Attributes:
        analysis: the analysis id (`analyses.registry`). version: its version.
        subject: the model (and dataset) it is about.
        params: the cache-key parameters. key: the cache key (`cache.result_key`).
        size: sequences it decomposes (0: weights only, or a reduce); an executor may balance work by it.
        needs: ``(analysis, key)`` of the same subject's results its compute may read.
        shard: ``(lo, hi)`` for a shard task: it maps items ``[lo, hi)`` of its analysis to partial
            tables (``analysis`` is then ``<id>.shard``); None otherwise.
        reduce: True for the task that reduces its ``needs``' shards into the analysis' tables.
    """

    analysis: str
    version: int
    subject: Subject
    params: dict
    key: str
    size: int
    needs: tuple[tuple[str, str], ...] = ()
    shard: tuple[int, int] | None = None
    reduce: bool = False

    @property
    def partial(self) -> bool:
        """Whether the result is a shard's partial tables (never assembled into the build's tables)."""
        return self.shard is not None

    @property
    def base(self) -> str:
        """The registered analysis id (a shard's parent analysis)."""
        return base_id(self.analysis)

    @property
    def shards(self) -> int:
        """How many shards a reduce task reduces (0 for any other task)."""
        sid = shard_id(self.base)
        return sum(1 for a, _ in self.needs if a == sid) if self.reduce else 0

    @property
    def label(self) -> str:
        """The build-log name: ``model [analysis]``, ``model · dataset [analysis]``, a shard's with its range."""
        if self.shard is not None:
            return f"{self.subject.label} [{self.base} {self.shard[0]}:{self.shard[1]}]"
        return f"{self.subject.label} [{self.analysis}]"


@dataclass
class Plan:
    """The tasks of a build, in run order, and the evaluation sets they read (by dataset id)."""

    cfg: "Config"
    tasks: list[Task]
    sets: dict[str, "EvalSet"]


@dataclass
class Result:
    """A finished task: its cache entry (tables and meta) and whether it was reused."""

    task: Task
    entry: Entry

    @property
    def reused(self) -> bool:
        return self.entry.reused


def _task(a: Analysis, subject: Subject, planned: dict[tuple[str, str], Task]) -> Task:
    params = a.params(subject)
    needs = []
    for need in a.needs:
        if (need, subject.label) not in planned:
            raise RuntimeError(f"analysis {a.id} needs {need}, which is not planned before it for {subject.label}")
        needs.append((need, planned[(need, subject.label)].key))
    if a.needs_if is not None and not a.needs_if(subject):
        needs = []  # this subject's task reads none of them: it need not wait for them
    return Task(a.id, a.version, subject, params, result_key(a.id, a.version, params), a.size(subject), tuple(needs))


def shard_ranges(n: int, shard_size: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``[lo, hi)`` of at most ``shard_size`` items covering ``[0, n)``."""
    return [(lo, min(lo + shard_size, n)) for lo in range(0, n, shard_size)]


def _sharded(a: Analysis, t: Task, shard_size: int) -> list[Task]:
    """The shard tasks of ``t`` (consecutive item ranges, each its own cache entry) and its reduce task."""
    sid = shard_id(a.id)
    shards = []
    for lo, hi in shard_ranges(a.shard.items(t.subject), shard_size):
        params = {**t.params, "shard": [lo, hi]}
        shards.append(dataclasses.replace(t, analysis=sid, params=params, key=result_key(sid, t.version, params),
                                          size=hi - lo, shard=(lo, hi)))
    reduce = dataclasses.replace(t, size=0, needs=t.needs + tuple((x.analysis, x.key) for x in shards), reduce=True)
    return [*shards, reduce]


def plan(cfg: "Config", cache: Cache | None = None, *, sizing=None) -> Plan:
    """Every task the configuration needs, in run order (per model: weights-only, then per dataset).

    With ``cfg.shard_size``, a shardable analysis of more sequences becomes shard tasks and a reduce
    task (module docstring); a result already in ``cache`` stays one task (its shards are not planned).
    Loads the evaluation sets and hashes each model's weights (memoised); loads no weights.
    ``sizing`` (`costs.sizing.Sizing`, for `report-builder plan` only) answers ``eval_set``,
    ``fingerprint`` and ``causal`` instead, estimating what is not downloaded yet.
    """
    from report_builder.data import load_entry
    from report_builder.models import causality, loading

    eval_set = sizing.eval_set if sizing is not None else (lambda d: load_entry(d, cfg.data_dir))
    fingerprint = sizing.fingerprint if sizing is not None else (lambda m: loading.fingerprint(m.source, m.revision))
    is_causal = sizing.causal if sizing is not None else (lambda m: causality.is_causal(m.source, m.revision))
    sets = {d.id: eval_set(d) for d in cfg.datasets}
    _warn_short(cfg, sets)
    tasks: list[Task] = []
    planned: dict[tuple[str, str], Task] = {}  # (analysis, subject label) -> task

    def add(a: Analysis, subject: Subject) -> None:
        t = _task(a, subject, planned)
        planned[(a.id, subject.label)] = t
        if (a.shard is not None and cfg.shard_size is not None and t.size > cfg.shard_size
                and not (cache is not None and cache.path(a.id, t.key).is_dir())):
            tasks.extend(_sharded(a, t, cfg.shard_size))
        else:
            tasks.append(t)

    for mc in cfg.models:
        fp = fingerprint(mc)
        causal = is_causal(mc)
        model_subject = Subject(cfg, mc, fp, causal)
        for a in registry.ANALYSES:
            if a.scope == "model":
                add(a, model_subject)
        for di, dc in enumerate(cfg.datasets):
            es = sets[dc.id]
            ds = dataclasses.replace(model_subject, dataset=dc, dataset_hash=es.hash, n_items=len(es.items),
                                     first=di == 0)
            for a in registry.ANALYSES:
                if a.scope == "dataset" or (a.scope == "first_dataset" and ds.first):
                    add(a, ds)
    return Plan(cfg, tasks, sets)


def _warn_short(cfg: "Config", sets: "dict[str, EvalSet]") -> None:
    """One warning per dataset entry whose ``n`` asks for more items than its set holds (the set is used
    whole). Said here, where a build, ``plan`` and ``reproduce`` load their sets once, not in
    `data.load_entry`, which other readers call too (listing, sizing, a recipe's hash check)."""
    import logging

    from report_builder.errors import shown

    for d in cfg.datasets:
        have = len(sets[d.id].items)
        if d.n is not None and have < d.n:
            logging.getLogger("report_builder").warning(
                f"dataset {shown(d.id)}: n is {d.n} but the set holds {have} items; all {have} are used "
                f"(set n: {have} or less to silence this)")


def final_results(results: "Iterable[Result]") -> "list[Result]":
    """The results that are tables of the build (every one but the shards' partial tables), in order."""
    return [r for r in results if not r.task.partial]
