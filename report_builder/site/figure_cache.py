"""Figures reused by their inputs: a figure whose inputs are unchanged is neither built nor drawn.

Every built figure is stored in ``<state>/figure-renders/fig-<id>-<key>/`` (`site_state`: the
output's own folder in the results cache): the files of its folder (``data.csv``, ``spec.json``,
``chart.svg``/``.png``, ``data-<hash>.json``, ``paper_vs_ours.csv``; not ``provenance.json`` and
``cite.bib``, which name this build's date and commit and are written again every time) and, in
``meta.json``, the data its page section is made from (`section_record`: the shown tables' rows,
the page's spec, the reading, the title — never HTML: on reuse the tables are formatted again by
`htmltable`, the spec escaped by `pages.spec_attr`) with the SHA-256 of every file, all under an
HMAC with the state's secret (`site_state.secret`): an entry that does not verify is built again. The key
(`FigureCache.key`) is a SHA-256 over everything those are computed from:

- the result tables the figure read while it was built (`ReadTracker` records them, with the ones it
  looked for and did not find; a builder that walked over all tables depends on all of them), each by
  its `cache.frame_hash`, dtypes and length;
- when it read a table whose tokens are shown in display form, how those forms are judged (each
  model's tokenizer style and causality, from all the tables: `figures.display.DisplayTables.judged`);
- the roles, the papers' reported numbers, the inline limit;
- the declaration (every `FigureSpec` field, the builder's qualified name, `FigureSpec.version`);
- the code a figure depends on (`render_code.render_files`: every module of ``figures/`` and
  ``site/`` and every ``report_builder`` module they import, transitively, read with `ast`; not the
  compute stages nor the benchmark, so editing those keeps every stored figure), the package's
  data files (the papers' reported numbers) and the versions of Altair, vl-convert, pandas and
  NumPy. Not the templates: they shape pages, and pages are generated again on every build.

A hit copies the stored files (hard links where possible; each verified against its SHA-256 first,
and a drawing against `svgsafe`'s allow-list, whatever the HMAC says) into the new docs folder; a miss builds the figure and stores it. Only the entries a build used are
kept (`prune`); each output has its own folder, so two outputs never prune each other's.

Pitfall: the key of a lookup is computed from the tables the figure read *last time*. It can only
read other tables now if one of those tables, the code, the roles or another keyed input changed,
and that changes the key first. A figure whose parameters would not survive JSON is not stored.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from report_builder import atomic, guard
from report_builder.figures.spec import FigureSpec
from report_builder.site import site_state, svgsafe
from report_builder.site.render_code import files_digest
from report_builder.filehash import sha256_of_file

FORMAT = 2
"""Version of the entry layout and of what goes into the key."""
META_MAX = 64 << 20
"""The largest ``meta.json`` of an entry that is read (a larger one is not used)."""
ALL = "*"
"""The recorded reads of a figure that walked over every table."""
NOT_STORED = ("provenance.json", "cite.bib")
"""Files of a figure's folder written again on every build (they name its date and commit)."""
_ENTRY = site_state.FIGURE_ENTRY
RENDER_ENTRY = site_state.RENDER_ENTRY


class ReadTracker(Mapping):
    """A read-only view of a figure's tables that records which names were read (or looked for)."""

    display_ready = True  # `FigureContext` takes it as it is (the tables behind it are display tables)

    def __init__(self, tables: Mapping[str, pd.DataFrame]):
        self._tables = tables
        self.read: set[str] = set()
        self.all = False

    def __getitem__(self, name: str) -> pd.DataFrame:
        self.read.add(name)
        return self._tables[name]

    def __contains__(self, name: object) -> bool:
        self.read.add(str(name))
        return name in self._tables

    def __iter__(self) -> Iterator[str]:
        self.all = True
        return iter(self._tables)

    def __len__(self) -> int:
        self.all = True
        return len(self._tables)

    def reads(self) -> list[str] | str:
        """What the figure depends on: the sorted names read, or `ALL`."""
        return ALL if self.all else sorted(self.read)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 over the code a figure depends on and the package's data files
    (`render_code.files_digest`), with the versions of the libraries that shape figure files."""
    import altair
    import numpy
    import vl_convert

    h = hashlib.sha256(files_digest(Path(__file__).resolve().parents[1]).encode("ascii"))
    for lib in (altair, vl_convert, pd, numpy):
        h.update(f"{lib.__name__} {lib.__version__}\0".encode("utf-8"))
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _module_digest(module: str) -> str:
    """SHA-256 of the source file of the builder's module (a builder declared outside the package
    is keyed on its own code too); empty when it has none."""
    import sys

    path = getattr(sys.modules.get(module), "__file__", None)
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    except OSError:
        return ""



def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


@dataclasses.dataclass
class Hit:
    """A stored figure: its entry folder and ``meta.json`` (the section and result fields)."""

    path: Path
    meta: dict[str, Any]


class FigureCache:
    """The figures of earlier builds, keyed by their inputs (see the module docstring).

    Args:
        root: the folder shared with `figure_files.RenderCache` (``<state>/figure-renders``).
        tables: the raw result tables of this build.
        context: what every key holds besides the figure's own inputs (roles, reported numbers,
            inline limit): any JSON-able value.
        judged: returns how display tokens are judged (called once, for the first key that needs it).
        secret: the HMAC key of the entries (`site_state.secret`); None: nothing is reused or stored.

    Attributes:
        known: ``<id>/<file name>`` -> SHA-256 of every file this build restored or stored.
    """

    def __init__(self, root: Path, tables: Mapping[str, pd.DataFrame], context: Any, judged,
                 secret: bytes | None = None) -> None:
        self.root = Path(root)
        self.secret = secret
        self.tables = tables
        self._context = context
        self._judged_fn = judged
        self._judged: str | None = None
        self._base: str | None = None
        self.known: dict[str, str] = {}
        self._hashes: dict[str, str | None] = {}
        self.used: set[str] = set()
        self.hits = 0
        self._entries: dict[str, list[Path]] | None = None

    # ------------------------------------------------------------------ keys

    def _table_hash(self, name: str) -> str | None:
        if name not in self._hashes:
            from report_builder.cache import frame_hash

            df = self.tables.get(name)
            self._hashes[name] = None if df is None else _json(
                [frame_hash(df), [repr(t) for t in df.dtypes], len(df), type(df.index).__name__])
        return self._hashes[name]

    def _base_digest(self) -> str:
        if self._base is None:
            self._base = hashlib.sha256(_json([FORMAT, code_digest(), self._context]).encode()).hexdigest()
        return self._base

    def key(self, spec: FigureSpec, reads: list[str] | str) -> str:
        """The key of ``spec`` over the tables ``reads`` names (`ALL`: every table)."""
        from report_builder.figures.display import needs_display

        names = sorted(self.tables) if reads == ALL else list(reads)
        judged = None
        if any(needs_display(self.tables.get(n)) for n in names):  # display forms: judged from all tables
            if self._judged is None:
                self._judged = _json(self._judged_fn())
            judged = self._judged
        decl = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name != "build"}
        module = getattr(spec.build, "__module__", "") or ""
        builder = [f"{module}.{getattr(spec.build, '__qualname__', repr(spec.build))}", _module_digest(module)]
        payload = [self._base_digest(), decl, builder, reads == ALL, judged, {n: self._table_hash(n) for n in names}]
        return hashlib.sha256(_json(payload).encode("utf-8")).hexdigest()[:24]

    # ------------------------------------------------------------------ lookup and store

    def _candidates(self, fig_id: str) -> list[Path]:
        if self._entries is None:
            self._entries = {}
            if self.root.is_dir():
                for d in sorted(self.root.iterdir()):
                    m = _ENTRY.fullmatch(d.name)
                    if m and d.is_dir() and not d.is_symlink():
                        self._entries.setdefault(m.group("id"), []).append(d)
        return self._entries.get(fig_id, [])

    def get(self, spec: FigureSpec) -> Hit | None:
        """The stored entry of ``spec`` whose key equals the key of its inputs now, or None."""
        for d in self._candidates(spec.id):
            meta = atomic.read_json_inside(d, d / "meta.json", META_MAX)  # None: a link, FIFO, too large, not JSON
            if not isinstance(meta, dict) or not isinstance(meta.get("files", {}), dict):
                continue  # not an entry as `put` writes it
            if meta.get("format") != FORMAT or meta.get("id") != spec.id or not site_state.verify(
                    self.secret, meta.get("mac"), d.name, _json({k: v for k, v in meta.items() if k != "mac"})):
                continue  # another format, or not proved ours (edited, planted, another key): built again
            key = self.key(spec, meta.get("reads", ALL))
            if d.name != f"fig-{spec.id}-{key}" or meta.get("key") != key:
                continue
            return Hit(d, meta)
        return None

    def restore(self, hit: Hit, fig_dir: Path) -> bool:
        """Put the entry's files into ``fig_dir`` (hard links, else copies), each checked against its
        SHA-256 first. False (nothing trusted) when a file is missing or differs."""
        files: dict[str, str] = hit.meta.get("files", {})
        for name, digest in files.items():
            p = hit.path / "files" / name
            if ("/" in name or name in NOT_STORED or name.startswith(".") or p.is_symlink() or not p.is_file()
                    or sha256_of_file(p) != digest):
                return False
            if name.endswith(".svg") and not svgsafe.is_safe(p.read_bytes()):
                return False  # a drawing holding more than charts draw (script, links): built again
            if name.endswith(_ACTIVE) or (name.endswith(".js") and not _data_twin(hit, name)):
                return False  # script or markup a browser would run: only a data file's own twin is
        fig_dir.mkdir(parents=True, exist_ok=True)
        try:
            for name in files:
                src, dst = hit.path / "files" / name, fig_dir / name
                if dst.exists():
                    dst.unlink()
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)
        except OSError:  # the entry went away meanwhile (a concurrent build of this output pruned it)
            shutil.rmtree(fig_dir, ignore_errors=True)
            return False
        self.used.add(hit.path.name)
        self.hits += 1
        self.known.update({f"{hit.meta['id']}/{name}": digest for name, digest in files.items()})
        return True

    def put(self, spec: FigureSpec, reads: list[str] | str, fig_dir: Path | None, meta: dict[str, Any]) -> None:
        """Store ``fig_dir``'s files (None: a figure without files, e.g. not configured) and ``meta``
        under the key of ``reads``, with its HMAC. A cache that cannot be written only costs time."""
        if self.secret is None:
            return
        key = self.key(spec, reads)
        d = self.root / f"fig-{spec.id}-{key}"
        tmp = self.root / f".{d.name}.tmp-{guard.tmp_tag()}"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            (tmp / "files").mkdir(parents=True)
            files = {}
            if fig_dir is not None:
                for p in sorted(fig_dir.iterdir()):
                    if p.is_file() and p.name not in NOT_STORED:
                        shutil.copyfile(p, tmp / "files" / p.name)
                        files[p.name] = sha256_of_file(tmp / "files" / p.name)
            record = json.loads(json.dumps({"format": FORMAT, "id": spec.id, "key": key, "reads": reads,
                                            "files": files, **meta}))
            record["mac"] = site_state.mac(self.secret, d.name, _json(record))
            (tmp / "meta.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
            if d.exists():
                shutil.rmtree(d)
            os.rename(tmp, d)
            self.used.add(d.name)
            self.known.update({f"{spec.id}/{name}": digest for name, digest in files.items()})
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)

    def prune(self) -> None:
        """Remove the figure entries this build did not use (only folders named like ours) and the
        temporary folders of processes that are gone."""
        if not self.root.is_dir():
            return
        for d in self.root.iterdir():
            if d.is_dir() and d.name not in self.used and _ENTRY.fullmatch(d.name):
                shutil.rmtree(d, ignore_errors=True)
        guard.sweep([self.root], (".fig-",), legacy_age_s=None)


_ACTIVE = (".html", ".htm", ".xhtml", ".xml", ".mjs", ".svgz")
"""Files a figure's folder never holds and a browser would run or render as a page."""
_TWIN = re.compile(r"data-[0-9a-f]{12}\.[a-z]+\.js")


def _data_twin(hit: Hit, name: str) -> bool:
    """Whether the stored ``name`` is the script twin of a data file of the same entry, byte for byte
    what `spec_data.data_script` makes of that file (so a signed entry cannot carry other script). The
    twin's bytes are known by their SHA-256 (`FigureCache.restore` checked the file against it first):
    the script made here is compared with that digest, not read again."""
    from report_builder.site.spec_data import data_script

    base, files = name[:-3], hit.meta.get("files", {})
    if not _TWIN.fullmatch(name) or base not in files:
        return False
    try:
        text = atomic.read_inside(hit.path, hit.path / "files" / base, 1 << 30).decode("utf-8")
    except (OSError, UnicodeDecodeError, guard.UnsafeOutput):
        return False
    script = data_script(f"figures/{hit.meta.get('id')}/{base}", text)
    return hashlib.sha256(script.encode("utf-8")).hexdigest() == files[name]


_NUMERIC = re.compile(r"u?int(8|16|32|64)|float(32|64)|bool")


def _frame_data(df: pd.DataFrame) -> dict[str, Any] | None:
    """A shown table as JSON data (columns, dtypes, rows); None when its values are not JSON."""
    try:
        rows = df.astype(object).where(df.notna(), None).values.tolist()
        data = {"columns": list(df.columns), "dtypes": [str(t) for t in df.dtypes], "rows": rows}
        return json.loads(json.dumps(data))
    except (TypeError, ValueError):
        return None


def _frame(data: dict[str, Any]) -> pd.DataFrame:
    """The table `_frame_data` stored (numeric and boolean dtypes restored; an object column stays object:
    counts beside floats keep their ints, which pandas would make floats)."""
    df = pd.DataFrame(data["rows"], columns=data["columns"], dtype=object)
    if df.columns.is_unique:
        for c, t in zip(data["columns"], data["dtypes"]):
            if _NUMERIC.fullmatch(str(t)):
                try:
                    df[c] = df[c].astype(t)
                except (TypeError, ValueError):
                    pass
    return df


_TABLES = {"table": "table_html", "paper": "paper_html", "compare": "compare_html"}
"""A stored table's name -> the section field it is shown in."""


def section_record(section: Any, frames: Mapping[str, pd.DataFrame | None], fig_dir: Path) -> dict[str, Any] | None:
    """What an entry keeps of a built figure's page section (`build.Section`): data, never HTML — the
    shown tables (``frames``: ``table``, ``paper``, ``compare``) as rows, the page's spec, whether a
    drawing is inlined (it is ``chart.svg``). None (not stored) when the HTML made again from these
    (`section_fields`) would differ from this build's."""
    from report_builder.site import htmltable, pages

    rec: dict[str, Any] = {"files": section.files, "content_hash": section.content_hash,
                           "page_spec": section.page_spec, "compare_note": section.compare_note,
                           "compare_same": section.compare_same, "show_paper": section.show_paper,
                           "drawn": bool(section.svg_html), "tables": {}}
    for name, field in _TABLES.items():
        shown = getattr(section, field)
        if not shown:
            continue
        data = _frame_data(frames[name]) if frames.get(name) is not None else None
        if data is None or htmltable.to_html(_frame(data)) != shown:
            return None
        rec["tables"][name] = data
    if section.page_spec is not None and pages.spec_attr(section.page_spec) != section.spec_attr:
        return None
    if rec["drawn"] and _inline_svg(fig_dir) != section.svg_html:
        return None
    return rec if json_safe(rec) else None


def _inline_svg(fig_dir: Path) -> str | None:
    from report_builder.site import pages

    try:
        return pages.inline_svg((fig_dir / "chart.svg").read_text(encoding="utf-8"))
    except OSError:
        return None


def section_fields(record: dict[str, Any], fig_dir: Path) -> dict[str, Any]:
    """The page-section fields of a reused figure from its `section_record` and its restored (verified)
    files in ``fig_dir``: tables formatted and escaped by `htmltable`, the spec by `pages.spec_attr`."""
    from report_builder.site import htmltable, pages

    tables = record.get("tables") or {}
    out = {k: record[k] for k in ("files", "content_hash", "page_spec", "compare_note", "compare_same", "show_paper")}
    for name, field in _TABLES.items():
        out[field] = htmltable.to_html(_frame(tables[name])) if name in tables else ""
    out["spec_attr"] = pages.spec_attr(record["page_spec"]) if record["page_spec"] is not None else ""
    out["svg_html"] = (_inline_svg(fig_dir) or "") if record.get("drawn") else ""
    return out


def json_safe(value: Any) -> bool:
    """Whether ``value`` comes back from JSON as it went in (same ``repr``): only then is it stored."""
    try:
        return repr(json.loads(json.dumps(value))) == repr(value)
    except (TypeError, ValueError):
        return False
