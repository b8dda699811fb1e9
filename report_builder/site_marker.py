"""The site marker: the file saying report_builder built an output folder, with the list of what it wrote there.

`guard.check_replaceable` accepts a non-empty ``--out`` only when it carries the marker; a build then replaces
the whole folder and `clean` removes from it. So that nothing a user added to a built site (a ``CNAME`` for a
static host, notes, a file dropped into a figure's folder) is deleted with it, the marker lists every entry
the build wrote (folders and files, relative POSIX paths), and `check_replaceable` (every build, `render` and
`clean` of an output, before any work and again under the site lock) refuses an output holding an entry the
list lacks, in one line naming what to move out.

Trust: the list is read back from disk: bounded (`CAP`), parsed strictly, and used only to test membership —
no path is ever made from it. A marker written before the list existed (no ``files:`` line) lists nothing:
such an output is replaced as before, once; the build then writes the list. The state folder of a build
without a results cache (`STATE_DIR`, `site.site_state`) is the tool's own and written after the list.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from report_builder import atomic, guard
from report_builder.errors import UnsafeOutput, shown

NAME = guard.SITE_MARKER
STATE_DIR = ".report_builder"
"""The hidden state folder a build without a results cache keeps inside its output (`site_state.IN_OUT`)."""
HEADER = "built by report_builder; `report-builder build` and `clean` may replace or remove this directory"
FILES = "files: "
CAP = 64 << 20
"""The most bytes of a marker read back (a site of 10^5 entries lists ~5 MB)."""
SHOWN = 3


def entries(root: Path, unreadable: list[str] | None = None) -> list[str]:
    """Every folder and file below ``root`` (relative POSIX paths, sorted), links listed but never entered,
    without the marker and the state folder; folders that cannot be listed go to ``unreadable``."""
    out: list[str] = []

    def failed(e: OSError) -> None:
        if unreadable is not None and e.filename:
            unreadable.append(Path(os.path.relpath(e.filename, root)).as_posix())

    for dirpath, dirnames, filenames in os.walk(root, onerror=failed):  # followlinks=False
        rel = Path(os.path.relpath(dirpath, root))
        if rel == Path("."):
            dirnames[:] = [d for d in dirnames if d != STATE_DIR]
            filenames = [f for f in filenames if f != NAME]
        out += [(rel / n).as_posix() for n in (*dirnames, *filenames)]
    return sorted(out)


def write(site: Path) -> None:
    """The marker of a finished site folder (this build's own, before it is swapped in), listing its entries."""
    (site / NAME).write_text(f"{HEADER}\n{FILES}{json.dumps(entries(site), ensure_ascii=False)}\n", encoding="utf-8")


def foreign(target: Path, verb: str = "replace") -> str | None:
    """Why the marked output ``target`` may not be replaced — it holds entries its marker does not list, the
    marker cannot be read, or its list is damaged — or None. A marker without a list (older builds): None."""
    try:
        text = atomic.read_inside(target, target / NAME, CAP).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return f"its {NAME} marker cannot be read ({e}); if the folder is report_builder's, remove it yourself"
    line = next((ln for ln in text.splitlines() if ln.startswith(FILES)), None)
    if line is None:
        return None
    try:
        listed = json.loads(line[len(FILES):])
    except ValueError:
        listed = None
    if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
        return f"the list of files in its {NAME} marker is damaged; if the folder is report_builder's, remove it yourself"
    unreadable: list[str] = []
    known = set(listed)
    extra = [e for e in entries(target, unreadable) if e not in known] + unreadable
    if not extra:
        return None
    names = ", ".join(shown(e) for e in extra[:SHOWN]) + (f" and {len(extra) - SHOWN} more" if len(extra) > SHOWN else "")
    return (f"it holds {len(extra)} {'entry' if len(extra) == 1 else 'entries'} report_builder did not write "
            f"({names}), which {'cleaning' if verb == 'clean' else 'replacing'} it would delete; move {'it' if len(extra) == 1 else 'them'} out first")


def check_replaceable(target: str | os.PathLike, what: str, option: str, verb: str = "replace") -> None:
    """`guard.check_replaceable` with the site marker, then (a marked output) `foreign`: `UnsafeOutput` either way.
    ``verb`` (``replace``: a build, ``render``; ``clean``) is what the refusal says the command would not do."""
    target = Path(target)
    guard.check_replaceable(target, NAME, what, option, verb)
    if os.path.lexists(target / NAME) and (why := foreign(target, verb)):
        advice = guard.ADVICE[verb].format(option=option)
        raise UnsafeOutput(f"refusing to {verb} {what} {target}: {why}" + (f"; {advice}" if verb == "clean" else f", or {advice}"))
