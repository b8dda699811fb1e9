"""Where results caches are: the default one, the per-directory one of earlier versions, and those builds used.

The default results cache is ``<user cache>/results`` (`guard.user_cache_dir`: ``REPORT_BUILDER_CACHE``,
else ``$XDG_CACHE_HOME/report_builder`` or ``~/.cache/report_builder``), the same from any working
directory: entries are content-addressed (analysis, version, parameters, weights fingerprint, dataset
hash), so a build from another directory reuses every result that exists and builds of different
projects share what they have in common. ``--cache DIR`` (``cache_dir``) still picks another one.
Earlier versions (also numbered 0.1.0) defaulted to ``.cache/report_builder`` under the working directory (`LEGACY`): it
stays usable with ``--cache .cache/report_builder``, and a build that finds one says so in one line.

Each build notes its cache in ``<user cache>/caches.json`` (`remember`), so that a ``render`` without a
recorded build can name the caches it knows (`known`). Pitfall: that index is read back, so it is
untrusted input: damaged or foreign content is ignored, and only folders that hold a build record
(``last_build.json``) are named.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from report_builder.errors import option
from report_builder.guard import CACHE_MARKER, RESULTS_DIR, user_cache_dir

LEGACY = os.path.join(".cache", "report_builder")
"""The default results cache of earlier versions, relative to the working directory."""
INDEX = "caches.json"
"""The user cache's index of results caches that builds used (`remember`)."""
KEEP = 20
"""The most caches the index remembers (the most recently used)."""
RECORD = "last_build.json"  # last_build.RECORD (that module sits above this one)


def default_dir() -> str:
    """The default results cache, the same from any working directory: ``<user cache>/results``."""
    return str(user_cache_dir() / RESULTS_DIR)


def legacy_here() -> Path | None:
    """``./.cache/report_builder`` when the working directory holds one made by report_builder, else None."""
    p = Path(LEGACY)
    try:
        if p.is_dir() and not p.is_symlink() and (p / CACHE_MARKER).is_file():
            return p
    except OSError:
        return None
    return None


def legacy_note(cache_dir: str) -> str | None:
    """One line when ``cache_dir`` is the default one and the working directory holds an earlier version's
    ``.cache/report_builder`` (which the build will not read unless asked), else None."""
    legacy = legacy_here()
    if legacy is None or os.path.abspath(cache_dir) != os.path.abspath(default_dir()):
        return None
    return (f"this directory holds a results cache of an earlier version, {LEGACY}, which this build does not "
            f"read: the default is now {default_dir()} (the same from any directory); pass {option('cache_dir', LEGACY)} to "
            f"use it, or `report-builder clean --cache {LEGACY}` to remove it")


def warn_legacy(cache_dir: str) -> None:
    """`legacy_note` as a warning on report_builder's log (the CLI prints it even with ``-q``)."""
    import logging

    note = legacy_note(cache_dir)
    if note:
        logging.getLogger("report_builder").warning(note)


def _index() -> Path:
    return user_cache_dir() / INDEX


def _read() -> dict[str, float]:
    from report_builder.atomic import read_json_inside

    # bounded, no FIFO waited on, JSON nested too deeply or a time of 400 digits (OverflowError) ignored
    index = _index()  # one answer: the user cache's place read once (the environment could change between two)
    data = read_json_inside(index.parent, index, 16 << 20)
    caches = data.get("caches") if isinstance(data, dict) else None
    if not isinstance(caches, dict):
        return {}
    return {k: float(v) for k, v in caches.items()
            if isinstance(k, str) and 0 < len(k) < 4096 and os.path.isabs(k) and isinstance(v, (int, float))
            and not isinstance(v, bool) and abs(v) < 1e15}


def remember(cache_dir: str | os.PathLike) -> None:
    """Note ``cache_dir`` (absolute) as used by a build now; never fails a build (an unwritable user cache
    is left alone)."""
    from report_builder.atomic import write_text

    path = os.path.abspath(os.path.expanduser(str(cache_dir)))
    try:
        caches = _read()
        caches[path] = time.time()
        kept = dict(sorted(caches.items(), key=lambda kv: -kv[1])[:KEEP])
        _index().parent.mkdir(parents=True, exist_ok=True)
        write_text(_index(), json.dumps({"caches": kept}, indent=1))
    except OSError:
        pass


def known() -> list[str]:
    """Results caches that hold a recorded build: the default one first, then those builds used (most
    recent first), each once."""
    out: list[str] = []
    for p in [default_dir(), *(k for k, _ in sorted(_read().items(), key=lambda kv: -kv[1]))]:
        p = os.path.abspath(p)
        try:
            ok = (Path(p) / RECORD).is_file() and not Path(p).is_symlink()
        except OSError:
            ok = False
        if ok and p not in out:
            out.append(p)
    return out


def where_builds_are(cache_dir: str | os.PathLike) -> str:
    """What to say when ``cache_dir`` records no build: the caches that do, and ``--cache DIR``."""
    here = os.path.abspath(os.path.expanduser(str(cache_dir)))
    others = [p for p in known() if p != here]
    if not others:
        return ("no results cache with a recorded build is known here (the default is "
                f"{default_dir()}); run `report-builder build` first, or pass {option('cache_dir', 'DIR')}")
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    return f"builds are recorded in {shown}; pass {option('cache_dir', 'DIR')} to render one of them"
