"""The local executor (``--executor local``, the default): a plan's tasks one after another in this process.

Loads a model on the first task that needs to compute (never when all its results are cached) and
keeps one model in memory at a time; logs ``model <name> (<source>)`` before a model's tasks,
``computed``/``reused`` per task, and ``loaded <name> in <s>s``. On the CPU, `prepare` sets up the
deterministic engine (`engine.set_cpu_workers` with the thread policy, `config.choose_threads`) right
before the first model load. Pitfall: that set-up must stay in ``before_load``, so a build whose
results are all cached never imports torch.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator

from report_builder.cache import Cache, Entry
from report_builder.executors.base import Option, run_task

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.analyses.base import Subject
    from report_builder.analyses.planning import Plan, Result
    from report_builder.config import Config


class LocalExecutor:
    """Runs tasks one after another in this process, reusing cached results.

    ``before_load`` runs once, right before the first model is loaded (`prepare` sets up the CPU
    engine there).
    """

    name: ClassVar[str] = "local"
    summary: ClassVar[str] = "this process (default)"
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, cache: Cache, *, log: Callable[[str], Any] = print, progress: bool = True,
                 before_load: Callable[[], Any] | None = None):
        self.cache, self.log, self.show_progress = cache, log, progress
        self.before_load = before_load
        self.done: dict[tuple[str, str], Entry] = {}
        self._model_name: str | None = None
        self._lm = None
        self._cpu_before: tuple[int, int] | None = None

    @classmethod
    def from_options(cls, *, log: Callable[[str], Any], progress: bool) -> None:
        """None: `api.analyze` makes the local executor over the build's own cache."""
        return None

    def prepare(self, cfg: "Config") -> None:
        """On the CPU, pin torch to one intra-op thread and run sequences in `config.choose_threads`
        worker threads (results do not depend on the count), right before the first model load."""
        if cfg.device != "cpu" or self.before_load is not None:
            return

        def cpu_engine() -> None:
            from report_builder.config import choose_threads
            from report_builder.engine import cpu_settings, set_cpu_workers

            self._cpu_before = cpu_settings()  # put back when the plan is done (`execute`)
            self.log(f"CPU worker threads: {set_cpu_workers(choose_threads(cfg.threads))} "
                     "(torch intra-op threads 1: results identical for any count)")

        self.before_load = cpu_engine

    def model(self, subject: "Subject"):
        """The subject's loaded model (loaded once per model, on first use)."""
        if self._lm is None:
            from report_builder.models import loading
            from report_builder.models.quiet import library_bars

            mc, cfg = subject.model, subject.cfg
            if self.before_load is not None:
                setup, self.before_load = self.before_load, None
                setup()
            t0 = time.perf_counter()
            with library_bars(self.show_progress):  # "Loading weights" follows the build's progress
                self._lm = loading.load_for(mc, cfg)
            placed = "" if self._lm.placement is None else f" ({self._lm.placement.describe()})"
            self.log(f"  loaded {mc.name} in {time.perf_counter() - t0:.1f}s{placed}")
        return self._lm

    def execute(self, plan: "Plan") -> Iterator["Result"]:
        from report_builder.analyses.planning import Result

        try:
            for task in plan.tasks:
                mc = task.subject.model
                if mc.name != self._model_name:
                    self._model_name, self._lm = mc.name, None
                    self.log(f"model {mc.name} ({mc.source})")
                entry = run_task(task, self.cache, plan.sets, lambda s=task.subject: self.model(s), done=self.done,
                                 show_progress=self.show_progress)
                self.done[(task.analysis, task.key)] = entry
                self.log(f"  {'reused  ' if entry.reused else 'computed'} {task.label}"
                         + ("" if entry.reused else f" in {entry.meta.get('seconds', 0):.1f}s"))
                yield Result(task, entry)
        finally:  # done or interrupted: the process (a notebook's kernel) gets its torch threads back
            self._lm = None
            if self._cpu_before is not None:
                from report_builder.engine import restore_cpu_settings

                restore_cpu_settings(self._cpu_before)
                self._cpu_before = None


EXECUTOR = LocalExecutor
