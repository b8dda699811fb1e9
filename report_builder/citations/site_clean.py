"""``clean`` of a built site: everything the build made goes, its published figure versions, their index and
the report history stay (``figures/<id>/<hash>/``, ``figures/versions.json``, ``history.json``,
``history/``) unless an explicit flag drops versions (``--versions-older-than DATE|Nd|all``), each named.

The versions are the earlier site's as `earlier_site.load_versions` reads them: the index validated, plus
every version folder on disk the index does not list (a damaged, emptied or missing ``versions.json``
loses no version: one warning line says so and the index is rebuilt from the folders that verify).
Every removal and the index's rewrite stay inside ``--out`` with no link followed (`atomic.remove_inside`,
`atomic.replace_inside`): a link in the site is removed as a link, never followed. A version folder (and the
whole site) is removed rename-first (`atomic.remove_aside`, `atomic.remove_dir`): renamed to the output's own
temporary name beside it (``.<out>.tmp-<pid>@<host>-…``), then deleted, so a ``clean`` killed midway leaves no
half version (its permalink would serve half a figure), only a folder the next build or ``clean`` sweeps.

Pitfall: a version whose creation date cannot be read is kept by ``--versions-older-than DATE`` (only
``all`` removes it): a date that cannot be proved old never drops a citation.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from report_builder import atomic, guard
from report_builder.errors import option
from report_builder.citations import earlier_site, readback
from report_builder.citations.permalinks import INDEX, INDEX_FORMAT, permalink


_EPOCH_MIN = _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)


def parse_age(text: str, now: _dt.datetime | None = None) -> _dt.datetime:
    """``Nd`` (days before now), an ISO date/time (``2025-06-01``) or ``all`` (any time before now, a
    minute ahead) as an aware UTC datetime.

    Raises:
        ValueError: with the accepted forms.
    """
    now = now or _dt.datetime.now(_dt.timezone.utc)
    s = str(text).strip()
    if s == "all":
        return now + _dt.timedelta(minutes=1)
    m = re.fullmatch(r"(\d+)\s*d", s)
    if m:  # more days than the calendar holds: before every date (removes none), never an OverflowError
        days = m.group(1).lstrip("0") or "0"
        try:
            return now - _dt.timedelta(days=int(days)) if len(days) < 10 else _EPOCH_MIN
        except OverflowError:
            return _EPOCH_MIN
    try:
        t = _dt.datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"{option('versions_older_than')}: cannot read {text!r}; give a number of days (30d), a date "
                         f"(2025-06-01) or all") from None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _created(value: Any) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(str(value))
    except (ValueError, OverflowError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


KEPT = ("figures", "history", "history.json", guard.SITE_MARKER)


def clean_site(out: Path, older_than: _dt.datetime | None = None, current_too: bool = False,
               log: Callable[[str], Any] = print) -> tuple[int, list[str]]:
    """Remove a built site but keep its published figure versions, their index and the report history;
    with ``older_than``, also the versions created before it, except each figure's current one (what the
    last build showed: its permalink stays) unless ``current_too`` (``all``: every version, whatever its
    date). When no version remains, the whole folder goes. Returns (versions kept, the permalinks of the
    versions removed). The caller holds the site's lock and has checked ``out`` (the marker, no link)."""
    out = Path(out)
    if not out.exists():
        return 0, []
    index = earlier_site.load_versions(out, log, keeping="kept as they are")
    on_disk = set(earlier_site.version_folders(out, any_id=True))  # real folders: a listed link is no version
    if older_than is not None and not current_too and on_disk and (
            index.damaged is not None or not os.path.lexists(out / INDEX)):
        # no usable index: which version is each figure's current one is not known, so none is removed by date
        log(f"warning: {out / INDEX} cannot be used, so each figure's current version is not known: "
            f"{option('versions_older_than')} removes no version (build the site again to rebuild its index, then clean)")
        older_than = None
    keep = {(v.figure, v.hash): v for v in index.all() if (v.figure, v.hash) in on_disk}
    unverified = on_disk - set(keep)  # kept as they are (a figure this install does not declare, or damaged)
    removed: list[str] = []
    if older_than is not None:
        for f, h in sorted(set(keep) | unverified):
            if index.current.get(f) == h and not current_too:
                continue
            v = keep.get((f, h))
            created = _created(v.created) if v is not None else None
            if current_too or (created is not None and created < older_than):
                atomic.remove_aside(out, out / permalink(f, h))  # renamed out first: never half a version
                keep.pop((f, h), None)
                unverified.discard((f, h))
                removed.append(permalink(f, h))
    if not keep and not unverified:
        atomic.remove_dir(out)  # the whole site (a real folder, checked): renamed to .<out>.tmp-… first, swept
        return 0, removed
    folders = {(f, h) for f, h in keep} | unverified
    for name, _ in atomic.entries(out):
        if name not in KEPT:
            atomic.remove_inside(out, out / name)
    try:
        figures = atomic.entries(out, out / "figures")
    except guard.UnsafeOutput:  # a link or a file as figures/: removed as such
        atomic.remove_inside(out, out / "figures")
        figures = []
    for name, is_dir in figures:
        if name == Path(INDEX).name:
            if is_dir:  # a folder where the index goes: not the tool's; the index is written in its place
                atomic.remove_inside(out, out / INDEX)
            continue
        if readback.ID_FORM.fullmatch(name) is None or not is_dir:
            atomic.remove_inside(out, out / "figures" / name)
            continue
        inner = atomic.entries(out, out / "figures" / name)
        for q, real in inner:
            if (name, q) not in folders or not real:
                atomic.remove_inside(out, out / "figures" / name / q)
        if not any((name, q) in folders and real for q, real in inner):
            atomic.remove_inside(out, out / "figures" / name)
    entries_out = {"format": INDEX_FORMAT, **({"site_url": index.site_url} if index.site_url_known else {}),
                   "current": {f: h for f, h in sorted(index.current.items()) if (f, h) in keep},
                   "figures": {}}
    for (f, h), v in sorted(keep.items()):
        entries_out["figures"].setdefault(f, {})[h] = v.entry()
    atomic.replace_inside(out, out / INDEX, json.dumps(entries_out, indent=1, ensure_ascii=False) + "\n")
    return len(folders), removed
