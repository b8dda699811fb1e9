"""The build's one overall progress line: tasks done of the plan's total, time elapsed, and an ETA from
the plan's priced times (`costs.estimate`), corrected by the progress measured so far.

On a terminal, one line on stderr redrawn in place (about once a second), cleared while a log line is
written (`logsetup` asks `clear_for_log`); elsewhere (a log file, CI, a notebook) no line is drawn and
the same numbers are logged as an occasional ``progress: ...`` line (every `LOG_EVERY_S`). ``-q`` and
``--no-progress`` turn both off. While the line is shown, a task's own progress (`base.Progress`:
sequences of the running task) feeds it instead of drawing a bar of its own.

ETA: every task still to compute carries its priced seconds (0 for a cached one); the work done is the
priced seconds of the finished tasks plus the finished share of the running one; the measured factor
(elapsed / priced work done) replaces the plan's own speed as the build advances (fully after a quarter
of the priced work). Without prices (a device the plan cannot price), each task counts as its sequences.

Pitfall: pricing reads each model's config and tokenizer and runs a short calibration matmul, so it is
done only when some task must compute (a build from the cache imports no torch).
"""
from __future__ import annotations

import shutil
import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from report_builder.errors import for_terminal, terminal_width

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.analyses.planning import Plan, Result
    from report_builder.cache import Cache

LOG_EVERY_S = 60.0
"""Off a terminal, the seconds between two ``progress:`` log lines."""
REDRAW_S = 1.0
"""On a terminal, the seconds between two redraws while nothing else happens."""
TRUST_AFTER = 0.25
"""The share of the priced work after which the measured speed alone makes the ETA."""

_active: "BuildProgress | None" = None
_lock = threading.RLock()


def active() -> "BuildProgress | None":
    """The overall line being shown now (None: none; a task then draws its own bar if asked)."""
    return _active


def clear_for_log() -> Callable[[], None]:
    """Clear the line before a log record is written; returns what redraws it afterwards (call both under
    `around_log`, so the refresh thread cannot draw in between)."""
    line = _active
    if line is None or not line.tty:
        return lambda: None
    line.erase()
    return line.draw


@contextmanager
def around_log() -> Iterator[None]:
    """The line cleared while the block writes a log record, drawn again after it."""
    with _lock:
        redraw = clear_for_log()
        try:
            yield
        finally:
            redraw()


def duration(seconds: float) -> str:
    """``1h02m``, ``4m05s``, ``12s``."""
    s = max(0, int(round(seconds)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def priced_seconds(plan: "Plan", cache: "Cache") -> list[float] | None:
    """Each task's priced seconds (0 for a cached task), or None when nothing is to compute or the plan
    cannot be priced here (the line then counts sequences)."""
    todo = [not cache.path(t.analysis, t.key).is_dir() for t in plan.tasks]
    if not any(todo):
        return None
    try:
        from report_builder.costs import estimate

        rows = estimate(plan, cache)["tasks"]
    except Exception:  # noqa: BLE001 - an estimate is a nicety: the build runs without it
        return None
    if len(rows) != len(plan.tasks) or any(r.get("seconds") is None for r, t in zip(rows, todo) if t):
        return None
    return [float(r["seconds"] or 0.0) if t else 0.0 for r, t in zip(rows, todo)]


class BuildProgress:
    """The overall line of one build (see the module docstring); a context manager that makes it `active`."""

    def __init__(self, labels: list[str], priced: list[float] | None, *, sizes: list[int] | None = None,
                 log: Callable[[str], Any] = print, tty: bool | None = None, stream: Any = None,
                 clock: Callable[[], float] = time.monotonic):
        self.labels = labels
        weights = priced if priced is not None else [float(max(1, s)) for s in (sizes or [1] * len(labels))]
        self.weights, self.priced = weights, priced is not None
        self.total_w = sum(weights) or 1.0
        self.stream = stream or sys.stderr
        self.tty = _isatty(self.stream) if tty is None else tty
        self.log, self.clock = log, clock
        self.start = clock()
        self.done = self.cached = 0
        self.done_w = 0.0
        self.part: tuple[str, int] | None = None
        self.part_done = 0
        self.shown = 0
        self.last_log = self.start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- the numbers

    def eta(self) -> float | None:
        """Seconds left: the priced work left times the measured factor (blended in; see the module)."""
        current = self.weights[self.done] if self.done < len(self.weights) else 0.0
        share = (self.part_done / self.part[1]) if self.part and self.part[1] else 0.0
        work = self.done_w + current * min(1.0, share)
        left = max(0.0, self.total_w - work)
        if left <= 0:
            return 0.0
        elapsed = self.clock() - self.start
        frac = work / self.total_w
        if frac <= 0:
            return left if self.priced else None
        measured = elapsed / work
        trust = min(1.0, frac / TRUST_AFTER)
        factor = measured if not self.priced else (1 - trust) * 1.0 + trust * measured
        return left * factor

    def text(self) -> str:
        elapsed = self.clock() - self.start
        n = len(self.labels)
        parts = [f"build {self.done}/{n} tasks" + (f" ({self.cached} cached)" if self.cached else ""),
                 f"{duration(elapsed)} elapsed"]
        eta = self.eta()
        if eta is not None and self.done < n:
            parts.append(f"ETA {duration(eta)}")
        if self.done < n:
            now = self.part[0] if self.part else self.labels[self.done]
            parts.append(now + (f" {self.part_done}/{self.part[1]} seq" if self.part else ""))
        return for_terminal(" · ".join(parts))

    # ---------------------------------------------------------------- events

    def task_done(self, reused: bool) -> None:
        with _lock:
            if self.done < len(self.weights):
                self.done_w += self.weights[self.done]
            self.done += 1
            self.cached += bool(reused)
            self.part, self.part_done = None, 0
        self.tick()

    def begin_part(self, desc: str, total: int) -> None:
        with _lock:
            self.part, self.part_done = (str(desc), max(0, int(total))), 0
        self.tick()

    def advance(self, k: int) -> None:
        with _lock:
            self.part_done += int(k)
        self.tick(throttle=True)

    def end_part(self) -> None:
        with _lock:
            self.part = None

    # ---------------------------------------------------------------- output

    def tick(self, throttle: bool = False) -> None:
        now = self.clock()
        if self.tty:
            if not throttle or now - self.shown >= 0.2:
                self.draw()
        elif now - self.last_log >= LOG_EVERY_S:
            self.last_log = now
            self.log("progress: " + self.text().removeprefix("build "))

    def draw(self) -> None:
        with _lock:
            width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
            line = self.text()
            while terminal_width(line) > width:  # a wrapped line could not be redrawn in place
                line = line[: -(terminal_width(line) - width) - 1] + "…"
            self._write("\r\x1b[2K" + line)
            self.shown = self.clock()

    def erase(self) -> None:
        self._write("\r\x1b[2K")

    def _write(self, s: str) -> None:
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _refresh(self) -> None:
        while not self._stop.wait(REDRAW_S if self.tty else LOG_EVERY_S / 4):
            self.tick()

    def __enter__(self) -> "BuildProgress":
        global _active
        with _lock:
            _active = self
        self._thread = threading.Thread(target=self._refresh, name="report_builder-progress", daemon=True)
        self._thread.start()
        self.tick()
        return self

    def __exit__(self, *exc) -> None:
        global _active
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with _lock:
            if _active is self:
                _active = None
        if self.tty:
            self.erase()

    def track(self, results: Iterable["Result"]) -> Iterator["Result"]:
        """Pass ``results`` through, counting each finished task."""
        for r in results:
            self.task_done(bool(getattr(r.entry, "reused", False)))
            yield r


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Off:
    """No line (``-q``, ``--no-progress``): `track` passes results through."""

    def __enter__(self) -> "_Off":
        return self

    def __exit__(self, *exc) -> None:
        return None

    @staticmethod
    def track(results: Iterable["Result"]) -> Iterable["Result"]:
        return results


def overall(plan: "Plan", cache: "Cache", *, enabled: bool, log: Callable[[str], Any]) -> "BuildProgress | _Off":
    """The overall line of a build of ``plan`` (priced from the plan), or nothing when not ``enabled``."""
    if not enabled or not plan.tasks:
        return _Off()
    return BuildProgress([t.label for t in plan.tasks], priced_seconds(plan, cache),
                         sizes=[t.size for t in plan.tasks], log=log)
