"""The command line's log: report_builder's messages on stderr at the level ``-v``/``-q`` ask for, and the
libraries underneath (transformers, huggingface_hub) made to follow: their warnings and progress bars,
and no colour codes when stderr is not a terminal.

Pitfall: transformers and huggingface_hub read their settings from the environment when they are
imported, so `library_noise` sets the environment first and their APIs only when they are imported
already (a notebook, the tests); an earlier ``-q`` in the same process is undone by a later default call.
"""
from __future__ import annotations

import logging
import os
import re
import sys

from report_builder.errors import clip, for_terminal

log = logging.getLogger("report_builder")


class _Format(logging.Formatter):
    """Plain messages for info and debug, ``warning: ...`` / ``error: ...`` otherwise (one line each,
    at most `errors.MAX_LINE` characters); control characters escaped (`errors.for_terminal`)."""

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.levelno < logging.WARNING:
            return for_terminal(msg, newlines=True)
        return f"{record.levelname.lower()}: {for_terminal(clip(msg))}"


ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
"""Terminal colour and cursor sequences (what a library's coloured log writes)."""
_LIBRARIES = ("transformers", "huggingface_hub", "accelerate", "datasets")
_factory = logging.getLogRecordFactory()
_NOISE: dict[str, str | None] = {}  # HF_HUB_DISABLE_PROGRESS_BARS as it was before -q/--no-progress changed it


def _plain_records(*args, **kwargs) -> logging.LogRecord:
    """The libraries' records without colour codes when stderr is not a terminal."""
    rec = _factory(*args, **kwargs)
    if rec.name.split(".")[0] in _LIBRARIES and isinstance(rec.msg, str) and not _stderr_is_tty():
        rec.msg = ANSI.sub("", rec.msg)
    return rec


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def library_noise(verbose: int = 0, quiet: bool = False, progress: bool = True) -> None:
    """What transformers and huggingface_hub may print: their warnings (e.g. the LOAD REPORT that lists a
    checkpoint's unused heads) only with ``-v`` (``-vv``: their info too), their progress bars ("Loading
    weights", downloads) unless ``-q``/``--no-progress``; colour codes only on a terminal. Set through
    their environment variables (read when they are imported) and, when already imported, their APIs."""
    level = "info" if verbose > 1 else "warning" if verbose else "error"
    os.environ["TRANSFORMERS_VERBOSITY"] = os.environ["HF_HUB_VERBOSITY"] = level
    bars = progress and not quiet
    if not bars and "saved_bars" not in _NOISE:
        _NOISE["saved_bars"] = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    elif bars and "saved_bars" in _NOISE:  # an earlier call in this process turned them off: restore
        saved = _NOISE.pop("saved_bars")
        if saved is None:
            os.environ.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
        else:
            os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = saved
    logging.setLogRecordFactory(_plain_records)
    if "transformers" in sys.modules:
        from transformers.utils import logging as tl

        tl.set_verbosity(getattr(logging, level.upper()))
        (tl.enable_progress_bar if bars else tl.disable_progress_bar)()
    if "huggingface_hub" in sys.modules and not bars:
        from huggingface_hub import utils as hu

        hu.disable_progress_bars()


class _Handler(logging.StreamHandler):
    """stderr, with the build's overall progress line (`executors.progress`) cleared while a record is
    written and drawn again after it."""

    def emit(self, record: logging.LogRecord) -> None:
        from report_builder.executors.progress import around_log

        with around_log():
            super().emit(record)


def setup_logging(verbose: int = 0, quiet: bool = False, progress: bool = True) -> None:
    """Send report_builder's log to stderr at the level ``-v``/``-q`` ask for, and quiet the libraries it
    uses to match (`library_noise`; idempotent)."""
    library_noise(verbose, quiet, progress)
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    for h in list(log.handlers):
        if getattr(h, "_report_builder", False):
            log.removeHandler(h)
    handler = _Handler(sys.stderr)
    handler.setFormatter(_Format())
    handler._report_builder = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False
