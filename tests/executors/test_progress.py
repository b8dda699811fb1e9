"""The build's one overall progress line (`executors.progress`): tasks done/total, elapsed, an ETA from the
plan's priced times corrected by measured progress; drawn in place on a terminal, occasional log lines
elsewhere; a task's own progress feeds it instead of a bar of its own."""
from __future__ import annotations

import io

from report_builder.executors import progress as P
from report_builder.executors.base import Progress


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _line(priced, tty=True, **kw):
    clock, stream, logs = Clock(), io.StringIO(), []
    line = P.BuildProgress([f"task{k}" for k in range(len(priced))], priced, tty=tty, stream=stream,
                           log=logs.append, clock=clock, **kw)
    return line, clock, stream, logs


def test_eta_starts_from_the_plan_and_follows_measured_progress():
    line, clock, _, _ = _line([0.0, 10.0, 10.0, 20.0])  # the first task cached
    assert line.eta() == 40.0  # nothing done: the plan's own times
    line.task_done(reused=True)
    assert line.eta() == 40.0 and "1/4 tasks (1 cached)" in line.text()
    clock.t = 20.0  # the first computed task took twice its priced 10 s
    line.task_done(reused=False)
    assert line.eta() == 30.0 * 2.0  # a quarter of the work done: the measured factor alone
    line.begin_part("task2 · K21 ratios", 4)
    line.advance(2)
    clock.t = 30.0
    assert line.eta() == (30.0 - 5.0) * (30.0 / 15.0)
    text = line.text()
    assert "2/4 tasks" in text and "30s elapsed" in text and "ETA 50s" in text and "task2 · K21 ratios 2/4 seq" in text


def test_without_prices_each_task_counts_as_its_sequences():
    line, clock, _, _ = _line([1.0, 1.0], sizes=[10, 30])
    line.priced = False
    line.weights, line.total_w = [10.0, 30.0], 40.0
    assert line.eta() is None  # no speed known yet
    clock.t = 5.0
    line.task_done(reused=False)
    assert line.eta() == 15.0  # 30 sequences at the measured 0.5 s each


def test_terminal_line_is_redrawn_in_place_and_cleared_for_log_lines():
    line, clock, stream, logs = _line([5.0, 5.0])
    with line:
        assert P.active() is line
        line.task_done(reused=False)
        redraw = P.clear_for_log()
        assert stream.getvalue().endswith("\r\x1b[2K")  # cleared before the log record
        redraw()
        assert stream.getvalue().rsplit("\r\x1b[2K", 1)[1].startswith("build 1/2 tasks")
    assert P.active() is None and stream.getvalue().endswith("\r\x1b[2K") and not logs


def test_off_a_terminal_only_occasional_log_lines():
    line, clock, stream, logs = _line([5.0, 5.0, 5.0], tty=False)
    line.task_done(reused=False)
    assert stream.getvalue() == "" and logs == []
    clock.t = P.LOG_EVERY_S + 1
    line.task_done(reused=False)
    line.task_done(reused=False)  # within a minute of the last line: none
    assert stream.getvalue() == "" and len(logs) == 1 and logs[0].startswith("progress: 2/3 tasks")


def test_a_tasks_own_bar_feeds_the_overall_line():
    line, clock, stream, _ = _line([5.0])
    with line:
        with Progress("m · wiki · K21 ratios", 3) as bar:
            assert bar.line is line
            bar(2)
            assert line.part == ("m · wiki · K21 ratios", 3) and line.part_done == 2
        assert line.part is None
    with Progress("alone", 3, enabled=False) as bar:  # no line shown: its own (disabled) tqdm bar
        assert bar.line is None


def test_the_line_escapes_names_and_fits_the_terminal(monkeypatch):
    import os

    monkeypatch.setattr(P.shutil, "get_terminal_size", lambda fallback: os.terminal_size((40, 20)))
    line, _, stream, _ = _line([1.0])
    line.labels = ["m\x1b[31m · " + "x" * 80]
    assert "\x1b[31m" not in line.text() and "m\\x1b[31m" in line.text()  # a model name cannot recolour
    line.draw()
    drawn = stream.getvalue().rsplit("\r\x1b[2K", 1)[1]
    assert len(drawn) <= 39 and drawn.endswith("…")  # never wrapped: a wrapped line is not redrawn in place


def test_a_disabled_build_shows_no_line(tmp_path):
    off = P.overall(object(), None, enabled=False, log=print)  # -q / --no-progress: nothing priced either
    with off as line:
        assert list(line.track([1, 2])) == [1, 2] and P.active() is None
