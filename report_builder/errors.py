"""Every error a user can act on, under one root: the CLI prints a `ReportBuilderError` as one line.

Each message says what went wrong and what to do, and names a setting as the caller gave it (`option`: the
keyword through the Python API, the option through the CLI). Expected failures (bad config, missing data, an
unsupported model, a decomposition that misses the error bound) raise one of these, never a bare
``ValueError``/``KeyError``. Pitfall: `ConfigError` and `DataError` also subclass ``ValueError`` (they
did before the tree existed); catch them by their own class, not by ``ValueError``.
"""
from __future__ import annotations

import reprlib
import unicodedata
from contextlib import contextmanager
from typing import Any, Iterator


class ReportBuilderError(Exception):
    """Root: the CLI prints these as one clear message and exits non-zero (a traceback only with --debug);
    IPython and Jupyter show them as one line too (`_render_traceback_`)."""

    @property
    def _render_traceback_(self):
        """What IPython shows for the error (a notebook cell): ``Type: message`` and its cause's first line, as
        the CLI's one line, instead of the package's frames. ``REPORT_BUILDER_DEBUG=1`` (as ``--debug``) hides
        this attribute, so IPython draws its own traceback; ``%debug`` works either way."""
        import os

        if os.environ.get("REPORT_BUILDER_DEBUG"):
            raise AttributeError("_render_traceback_")
        cause = self.__cause__ or (None if self.__suppress_context__ else self.__context__)
        lines = [f"{type(self).__name__}: {for_terminal(self, newlines=True)}"]  # IPython writes ANSI text
        if cause is not None:
            lines.append(f"  caused by {type(cause).__name__}: {for_terminal(first_line(cause, MAX_SHOWN))}")
        return lambda: lines


class UsageError(ReportBuilderError, ValueError):
    """The command line asks for something impossible (e.g. `serve` on a port in use)."""


class ConfigError(ReportBuilderError, ValueError):
    """A configuration problem; the message names the offending key."""


class DataError(ReportBuilderError, ValueError):
    """An evaluation set could not be built, loaded or encoded; the message says how to fix it.

    Loaders wrap ``FileNotFoundError``/``KeyError`` into this; never let them escape.
    """


class DataNotHere(DataError):
    """A dataset read through the ``datasets`` library (no file given for it) is not on this machine: the
    library is missing, or the set is neither in its cache nor reachable on the hub.

    The one data failure `report-builder plan` may estimate past (a paper dataset not downloaded yet,
    `costs.sizing`); a file the user gave that is missing or unreadable is a plain `DataError` everywhere.
    """


class NotBuilt(ReportBuilderError, FileNotFoundError):
    """What a command reads from an earlier build is not there: no build recorded in the cache (``render``,
    ``load_results``), results its record names are gone, or no built site in the folder (``serve``). Still a
    ``FileNotFoundError`` for callers that catch one; one line in the CLI (exit 3) and in a notebook."""


class ModelError(ReportBuilderError):
    """A model cannot be loaded or decomposed as configured."""


class UnknownModel(ModelError):
    """The model name is neither an embedded default, a local directory, nor a hub id that exists."""


class HubUnreachable(ModelError):
    """The model hub cannot be reached (offline mode, or no network)."""


class UnsupportedArchitecture(ModelError):
    """No adapter is registered for the model's class."""


class FusedAttention(ModelError):
    """Attention probabilities or value vectors were not captured (fused/SDPA attention skips them)."""


class SequenceTooLong(ModelError):
    """A sequence is longer than the model's position embeddings."""


class UnsafeOutput(ReportBuilderError):
    """An output or cache directory cannot be used without deleting or overwriting files the tool did
    not create, or cannot be written (see `report_builder.guard`)."""


class MissingDependency(ReportBuilderError):
    """An optional extra the command asks for is not installed; the message names the `pip install` line."""


class DatasetsLibraryMissing(MissingDependency, DataNotHere):
    """A hub dataset needs the ``datasets`` library (the [hub] extra), which is not installed: a missing
    extra for the user, a set not on this machine for `plan`'s estimates."""


class DistributedError(ReportBuilderError):
    """A distributed build failed beyond its retries (a worker kept dying, a node was lost) or its workers
    cannot reach the driver's cache; finished cache entries are kept, a rerun resumes."""


class ReconstructionError(ReportBuilderError):
    """A decomposition's terms do not sum to the model's own tensor within `schema.ERROR_BOUND`."""


__all__ = ["ReportBuilderError", "ConfigError", "DataError", "DataNotHere", "NotBuilt", "ModelError", "UnknownModel", "HubUnreachable",
           "UnsupportedArchitecture", "FusedAttention", "SequenceTooLong", "ReconstructionError", "UnsafeOutput", "UsageError", "MissingDependency",
           "DistributedError", "DatasetsLibraryMissing", "EXIT_CODES",
           "exit_code", "shown", "clip", "for_terminal", "terminal_width", "terminal_table", "MAX_SHOWN",
           "OPTIONS", "option", "speaking_cli", "cli_vocabulary"]


EXIT_CODES = {"usage": 2, "config": 3, "model": 4, "reconstruction": 5, "differs": 6, "altered": 7,
              "interrupted": 130, "terminated": 143}
"""Documented exit codes of the CLI (docs/guide/configuration.md); 1 is an unexpected internal error; ``differs``:
`report-builder reproduce` rebuilt a figure that differs from the cited one beyond the published precision;
``altered``: the folder given to `reproduce` is not the figure its recipe names (its files or its recipe
were changed after publication)."""


def exit_code(e: BaseException) -> int:
    """The CLI exit code of an expected failure: 2 usage, 3 configuration/data/output (including an
    unwritable directory or a full disk), 4 model, 5 reconstruction bound missed."""
    if isinstance(e, ReconstructionError):
        return EXIT_CODES["reconstruction"]
    if isinstance(e, ModelError):
        return EXIT_CODES["model"]
    if isinstance(e, UsageError):
        return EXIT_CODES["usage"]
    return EXIT_CODES["config"]


MAX_SHOWN = 200
"""The most characters of a user's value an error message quotes (`shown`)."""
MAX_LINE = 2000
"""The most characters of one error line the CLI prints (`clip`: head and tail kept)."""


def clip(text: str, limit: int = MAX_LINE) -> str:
    """``text`` cut to at most ``limit`` characters in the middle (head and tail kept, the number of
    characters left out named), so the actionable end of a message survives."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = f" … [{len(text) - limit} characters cut] … "
    keep = max(limit - len(cut), 2)
    return text[: keep // 2 + keep % 2] + cut + text[len(text) - keep // 2:]


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The first line of a library's error (its type's name when it says nothing), at most ``limit``
    characters, for a one-line message."""
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:limit]


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = MAX_SHOWN, 60, MAX_SHOWN


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """A user's value as an error message quotes it: its ``repr``, at most ``limit`` characters, built
    without ever forming the whole text (a YAML alias bomb's value is a few hundred characters, not
    hundreds of MB), and with terminal control characters escaped (`for_terminal`).

    The one helper for every error that quotes a value: ``f"...: got {shown(v)}"``, not ``{v!r}``.
    """
    if isinstance(value, str):
        text = repr(value[: limit + 1])
        if len(value) > limit:
            text = text[:-1] + f"…{text[-1]} ({len(value)} characters)"
    elif isinstance(value, (dict, list, tuple, set, frozenset)):
        text = _REPR.repr(value)
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        text = f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    else:
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001 - a value whose repr fails is still named by its type
            text = f"<{type(value).__name__}>"
    return for_terminal(clip(text, limit + 40))


_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
"""Bidirectional controls (Trojan-source text: a name that reads differently from what it is)."""


def _escape_char(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte of a file name that is not UTF-8 (surrogateescape): the byte
        o -= 0xDC00
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def for_terminal(text: Any, *, newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: control characters (C0, DEL, C1 such as the 8-bit CSI,
    bidirectional overrides) written as visible escapes (``ESC [31m`` becomes ``\\x1b[31m``), so a
    model name, dataset id or path can neither recolour, move the cursor, retitle the window nor
    hide text. Tabs are kept; newlines only with ``newlines=True`` (a multi-line table or report). A lone
    surrogate (a file name's byte that is not UTF-8, ``\\udcff``) is shown as its byte (``\\xff``): a
    terminal with a strict UTF-8 stdout cannot print it (UnicodeEncodeError).

    The one function for what the CLI prints (its log lines, error lines, tables and summaries).
    """
    text = str(text)
    if text.isascii() and text.isprintable():
        return text
    out = []
    for c in text:
        o = ord(c)
        if c == "\t" or (c == "\n" and newlines):
            out.append(c)
        elif o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0 or o in _BIDI or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp"):
            out.append(_escape_char(c))
        else:
            out.append(c)
    return "".join(out)


def terminal_width(text: str) -> int:
    """The columns ``text`` takes on a terminal: East Asian wide and fullwidth characters (CJK, most
    emoji) two, combining marks and zero-width format characters none, others one."""
    if text.isascii():
        return len(text)
    n = 0
    for c in text:
        if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf"):
            continue
        n += 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
    return n


def terminal_table(rows: list[list[Any]], *, right: frozenset[int] | set[int] = frozenset()) -> list[str]:
    """``rows`` (the head first) as aligned lines for the terminal: each cell escaped (`for_terminal`)
    *before* it is measured, then padded to its column's width in terminal columns (`terminal_width`),
    right-aligned for the column indices in ``right``; two spaces between columns, none at the end.

    The one table layout of the CLI (`report-builder plan`, `list`): escaping after padding would widen a
    cell holding a control or bidi character (``\u202e`` is six columns once visible) and a wide name
    would take more columns than its length."""
    cells = [[for_terminal(c) for c in r] for r in rows]
    widths: dict[int, int] = {}
    for r in cells:
        for k, c in enumerate(r):
            widths[k] = max(widths.get(k, 0), terminal_width(c))

    def pad(k: int, c: str) -> str:
        fill = " " * (widths[k] - terminal_width(c))
        return fill + c if k in right else c + fill

    return ["  ".join(pad(k, c) for k, c in enumerate(r)).rstrip() for r in cells]


# ------------------------------------------------------------------ how a message names a setting

OPTIONS: dict[str, str] = {
    # configuration keys: `Config` fields, the keywords of `rb.build`/`rb.render`/`api.configure`
    "config": "--config", "out_dir": "--out", "cache_dir": "--cache", "data_dir": "--data-dir",
    "device": "--device", "dtype": "--dtype", "chunk_rule": "--chunk-rule", "max_memory": "--max-memory",
    "device_memory": "--device-memory",
    # the other front functions' keywords (`api.check`, `reproduce`, `serve`, `cite`, `plan`, `bench`, `clean`)
    "texts": "--text", "models": "--model", "data": "--data", "site_dir": "--dir", "port": "--port",
    "host": "--host", "gpu": "--gpu", "gpu_flops": "--gpu-flops", "gpus": "--gpus", "shape": "--shape",
    "layers": "--layers", "versions_older_than": "--versions-older-than", "executor": "--executor",
}
"""The one vocabulary of settings a message names: each keyword of the Python API (a configuration key or
a front function's argument) and the ``report-builder`` option that sets it (`option`). A test checks that
each option is the CLI's (`tests/test_api_vocabulary.py`); executors declare their own options
(`executors.base.Option`: ``flag``, ``dest``) and name them through `option` too."""
LISTS = frozenset({"texts", "models", "data"})
"""Keywords that take a list, each item one use of a repeatable option (``--model A=X --model B=Y``)."""

_cli = 0  # > 0 while `cli.main` runs a command: messages name its options (process-wide: its worker threads too)


def speaking_cli() -> bool:
    """Whether a message now names command-line options (inside `cli_vocabulary`) or keywords (the Python API)."""
    return _cli > 0


@contextmanager
def cli_vocabulary() -> Iterator[None]:
    """While the CLI runs a command: `option` names the options the user typed (``--out``), not keywords."""
    global _cli
    _cli += 1
    try:
        yield
    finally:
        _cli -= 1


def option(key: str, value: Any = None, *, flag: str | None = None) -> str:
    """How a message names the setting ``key`` (an `OPTIONS` keyword): as the caller gave it. Through the
    CLI its option, ``--out`` (with ``value``: ``--out DIR``); through the Python API the keyword,
    ``out_dir`` (``out_dir=DIR``; a list keyword's item ``models=['A=X']``). ``flag``: the option when it is
    not ``OPTIONS[key]`` (an executor's own, or a command's form such as ``serve --dir``)."""
    if flag is None and key not in OPTIONS:
        raise KeyError(f"{key}: not in errors.OPTIONS (declare its option there)")
    if speaking_cli():
        flag = flag or OPTIONS[key]
        return flag if value is None else f"{flag} {value}"
    if value is None:
        return key
    return f"{key}=[{str(value)!r}]" if key in LISTS else f"{key}={value}"
