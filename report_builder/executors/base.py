"""What every executor shares: the `Executor` protocol, its command-line `Option`s, and `run_task`.

An executor runs a plan's tasks (`analyses.planning`) and yields their results in plan order. Every
executor runs a task through `run_task`: the task's cache entry is reused when present, else its
analysis computes it (a plain task, a shard's map or a reduce) and the entry is published atomically
under its lock, so concurrent workers compute it once. `TaskRun` is the `analyses.base.Run` a task's
compute sees: its model (loaded on first use), its evaluation set and the tables of its ``needs``.

Pitfall: a task reads its ``needs`` from ``done`` (this process's results) or the cache, never from
anything else: an executor must run a task only after its needs are published.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Protocol

from report_builder.analyses.base import Run, shard_id
from report_builder.errors import option
from report_builder.cache import Cache, Entry

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from report_builder.analyses.planning import Plan, Result, Task
    from report_builder.data import EvalSet


@dataclass(frozen=True)
class Option:
    """One command-line option of an executor (``--executor NAME`` adds its executor's own options).

    ``dest`` is the keyword its value reaches ``from_options`` under; ``type``/``metavar``/``help`` as
    for `argparse.ArgumentParser.add_argument` (the default is always None: not given)."""

    flag: str
    dest: str
    help: str
    metavar: str
    type: Callable[[str], Any] = str

    def named(self, value: Any = None) -> str:
        """How a message names this option: ``--address ADDR`` through the CLI, ``address=ADDR`` through
        the API (`errors.option`)."""
        return option(self.dest, value, flag=self.flag)


class Executor(Protocol):
    """Runs a plan's tasks and yields their results in plan order."""

    def execute(self, plan: "Plan") -> Iterator["Result"]:
        ...


class Registered(Protocol):
    """An executor as the registry (`executors`) knows it: its ``--executor`` name and what it does
    (``summary``, for ``--help``), its own options, and how a build makes it from their values (None:
    `api.analyze`'s default in-process executor)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    options: ClassVar[tuple[Option, ...]]

    @classmethod
    def from_options(cls, *, log: Callable[[str], Any], progress: bool, **options: Any) -> Executor | None:
        ...


class Progress:
    """A tqdm bar (unit: sequences) with an estimate of the time left; a context manager. While the build's
    overall line is shown (`executors.progress`), it feeds that line instead of drawing a bar."""

    def __init__(self, desc: str, total: int, enabled: bool = True):
        from report_builder.executors.progress import active

        self.line = active() if enabled else None
        if self.line is not None:
            self.line.begin_part(desc, total)
            return
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="seq", disable=not enabled, leave=True,
                        dynamic_ncols=True, file=sys.stderr)

    def __call__(self, k: int) -> None:
        if self.line is not None:
            self.line.advance(k)
        else:
            self.bar.update(k)

    def postfix(self, text: str) -> None:
        """A short status after the bar (e.g. tasks done); the overall line shows its own counts."""
        if self.line is None:
            self.bar.set_postfix_str(text)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.line is not None:
            self.line.end_part()
        else:
            self.bar.close()


class TaskRun(Run):
    """`Run` for one task: the model comes from ``lm`` (called on first use), the evaluation sets
    from ``sets``, and the tables of the task's ``needs`` from ``done`` or the cache. Any executor
    (local or on a worker) runs a task through `run_task`, which builds one of these."""

    def __init__(self, task: "Task", cache: Cache, sets: dict[str, "EvalSet"], lm: Callable[[], Any], *,
                 done: dict[tuple[str, str], Entry] | None = None, show_progress: bool = True):
        self.task, self.subject, self.cache, self.sets = task, task.subject, cache, sets
        self._lm, self.done, self.show_progress = lm, done if done is not None else {}, show_progress

    def lm(self):
        return self._lm()

    def eval_set(self):
        return self.sets[self.subject.dataset.id]

    def progress(self, what: str, total: int) -> Progress:
        return Progress(f"{self.subject.label} · {what}", total, self.show_progress)

    def _entry(self, analysis: str, key: str) -> Entry:
        entry = self.done.get((analysis, key)) or self.cache.get(analysis, key)
        if entry is None:
            raise RuntimeError(f"{self.task.label} needs {analysis}/{key}, which has not run")
        return entry

    def result(self, analysis: str) -> "dict[str, pd.DataFrame]":
        return self._entry(analysis, dict(self.task.needs)[analysis]).tables

    def results(self, analysis: str) -> "list[dict[str, pd.DataFrame]]":
        """The tables of every need named ``analysis``, in the order the task lists them."""
        return [self._entry(a, k).tables for a, k in self.task.needs if a == analysis]


def run_task(task: "Task", cache: Cache, sets: dict[str, "EvalSet"], lm: Callable[[], Any], *,
             done: dict[tuple[str, str], Entry] | None = None, show_progress: bool = True) -> Entry:
    """Run one task through the cache: its entry is reused when present, else computed and published
    atomically (under the entry's lock, so concurrent workers compute it once)."""
    from report_builder.analyses import inputs, registry

    a = registry.get(task.base)
    run = TaskRun(task, cache, sets, lm, done=done, show_progress=show_progress)
    if task.shard is not None:
        def work():
            return a.shard.map(run, *task.shard), {"shard": list(task.shard)}
    elif task.reduce:
        def work():
            return a.shard.reduce(task.subject, run.results(shard_id(a.id))), {"shards": task.shards}
    else:
        def work():
            return a.compute(run), {}

    def compute():
        with inputs.recording_cuts() as cuts:  # texts cut to max_length: kept so a reuse says it too
            tables, meta = work()
        return tables, {**meta, **({"cut": cuts[0]} if cuts else {})}
    return cache.get_or_compute(task.analysis, task.version, task.params, compute)
