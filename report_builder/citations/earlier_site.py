"""An earlier site read back (`readback`'s reading, bounded): its versions index
(``figures/versions.json``), its version folders, its history (``history.json``) and its manifest
(``figures/manifest.json``), each validated into objects whose ids, hashes and file names may be joined
into a path (`Version`, `Index`, `History`).

A damaged index loses nothing: `read_index` says why it cannot be used (``Index.damaged``) and the
callers keep every version folder on disk (`version_folders`), rebuilding the index from the folders
that verify (`recover_version`); an unreadable ``history.json`` is kept as it was (``History.raw_bytes``)
and a malformed entry is left out of the Changes page, not dropped from the file. A file is carried into
a new site only when it is a regular file whose bytes, as carried, have the SHA-256 its record names
(`carry`).

Pitfall: nothing here may raise on hostile content but `readback.BadRecord`/``OSError`` (an
"internal error" on every later build otherwise): every value's type is checked before it is used.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from report_builder import atomic
from report_builder.citations.readback import (_SCALARS, CAPS, ID_FORM, SHA256, BadRecord, _dict_of_dicts, content_hash,
                                               figure_id, load_json, read_bytes, read_json, read_record, record_from)
from report_builder.citations.version_files import DERIVED, FILES, OPTIONAL, chart_path, permalink
from report_builder.errors import ReportBuilderError, UnsafeOutput

INDEX = "figures/versions.json"
HISTORY = "history.json"
MANIFEST = "figures/manifest.json"
KNOWN_FILES = FILES + OPTIONAL + DERIVED  # an index written before cite.bib was derived lists it


@dataclass(frozen=True)
class Version:
    """One published version, validated: registered figure id, content hash, its files (known names ->
    the SHA-256 recorded at its creation; recovered from its folder when the index did not list it)."""

    figure: str
    hash: str
    created: str | None
    title: str
    paper: str
    files: dict[str, str]

    @property
    def permalink(self) -> str:
        return permalink(self.figure, self.hash)

    def entry(self) -> dict[str, Any]:
        """The version's entry in ``versions.json`` (its carried files: `DERIVED` ones are made anew)."""
        return {"created": self.created, "title": self.title, "paper": self.paper,
                "files": dict(sorted(self.files.items()))}


@dataclass
class Index:
    """A site's versions index, validated: ``current`` (id -> hash), ``versions`` (id -> hash -> `Version`),
    ``damaged`` (why the file as a whole could not be used, or None), ``dropped`` (entries ignored),
    ``unverified`` (version folders on disk neither listed nor verifiable: `load_versions`)."""

    current: dict[str, str] = field(default_factory=dict)
    versions: dict[str, dict[str, Version]] = field(default_factory=dict)
    damaged: str | None = None
    dropped: int = 0
    site_url: str | None = None  # the site_url the site was built with (None: none, or not recorded)
    site_url_known: bool = False  # whether the index records it (an older index does not)
    unverified: list[tuple[str, str, str]] = field(default_factory=list)  # folders on disk: (id, hash, why)

    def get(self, fig_id: str, h: str) -> Version | None:
        return (self.versions.get(fig_id) or {}).get(h)

    def all(self) -> list[Version]:
        return [v for _, vs in sorted(self.versions.items()) for _, v in sorted(vs.items())]


def _version(fid: Any, h: Any, rec: Any) -> Version | None:
    if figure_id(fid) is None or content_hash(h) is None or not isinstance(rec, dict):
        return None
    files = rec.get("files")
    if not isinstance(files, dict) or not set(FILES) <= set(files) or not all(
            k in KNOWN_FILES and isinstance(v, str) and SHA256.fullmatch(v) for k, v in files.items()):
        return None
    created = rec.get("created")
    title, paper = rec.get("title", ""), rec.get("paper", "")
    if not isinstance(created, (str, type(None))) or not isinstance(title, str) or not isinstance(paper, str):
        return None
    # a DERIVED file an older index lists (cite.bib) is made anew by every build: never read nor carried
    return Version(fid, h, created, title, paper, {k: v for k, v in files.items() if k not in DERIVED})


def read_index(site: Path) -> Index:
    """``figures/versions.json`` of ``site`` validated (`Index`); a missing file is an empty index, an
    unusable one an empty index with ``damaged`` saying why (callers keep every folder: `version_folders`)."""
    try:
        data = read_json(site, INDEX, CAPS["index"])
    except FileNotFoundError:
        return Index()
    except BadRecord as e:
        return Index(damaged=str(e).split(": ", 1)[-1])
    if not isinstance(data, dict) or not isinstance(data.get("figures"), dict):
        return Index(damaged="not a versions index (no 'figures' object)")
    out = Index()
    for fid, vs in data["figures"].items():
        for h, rec in (vs.items() if isinstance(vs, dict) else [(None, None)]):
            v = _version(fid, h, rec)
            if v is None:
                out.dropped += 1
            else:
                out.versions.setdefault(fid, {})[h] = v
    if "site_url" in data:
        out.site_url_known, out.site_url = True, _site_url(data["site_url"])
    cur = data.get("current")
    for fid, h in (cur.items() if isinstance(cur, dict) else []):
        if figure_id(fid) is not None and content_hash(h) is not None:
            out.current[fid] = h
    return out


def _site_url(value: Any) -> str | None:
    """A recorded ``site_url`` as the configuration accepts it (`values.check_site_url`), else None."""
    from report_builder.values import check_site_url

    if not isinstance(value, str):
        return None
    try:
        return check_site_url(value)
    except ReportBuilderError:
        return None


def version_folders(site: Path, any_id: bool = False) -> list[tuple[str, str]]:
    """The version folders on disk, ``figures/<id>/<hash>/`` with a registered id (``any_id``: any id of
    the form, for `clean`, which keeps what it cannot judge) and a hash of its form, each a real folder
    (links and anything else are not versions)."""
    out = []
    try:
        with atomic.opened_dir(site, ("figures",)) as fd:
            ids = sorted(e.name for e in os.scandir(fd) if (ID_FORM.fullmatch(e.name) if any_id else figure_id(e.name))
                         and e.is_dir(follow_symlinks=False))
        for fid in ids:
            with atomic.opened_dir(site, ("figures", fid)) as sub:
                out += [(fid, e.name) for e in sorted(os.scandir(sub), key=lambda e: e.name)
                        if content_hash(e.name) and e.is_dir(follow_symlinks=False)]
    except (OSError, ReportBuilderError):
        return out
    return out


def check_known_versions(site: Path) -> None:
    """`UnsafeOutput` (one line) when ``site`` holds version folders of a figure id this install does not know
    (neither registered nor declared by the running build: published by a newer report_builder, or by a build
    with its own declarations): a build could not verify nor carry them, and its swap would delete their
    permalinks (`clean` keeps them as they are)."""
    alien = [permalink(f, h) for f, h in version_folders(site, any_id=True) if not figure_id(f)]
    if alien:
        names = ", ".join(alien[:3]) + (f" and {len(alien) - 3} more" if len(alien) > 3 else "")
        raise UnsafeOutput(f"refusing to replace the output directory {site}: it holds {len(alien)} published "
                           f"version{'s' if len(alien) > 1 else ''} of figures this report_builder does not know "
                           f"({names}), which a build cannot carry and would delete; build it with the "
                           f"report_builder (or the figure declarations) that published them, or move them out")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_version(site: Path, v: Version, svg_ok: Callable[[bytes], bool] | None = None) -> str | None:
    """Why the version ``v`` of ``site`` cannot be carried, or None: every recorded file a regular file
    with its recorded SHA-256, the content hash
    recomputed from ``spec.json``, ``data.csv`` (and ``chart.svg``) its name, its record naming it, and its
    drawing accepted by ``svg_ok`` (`site.svgsafe.is_safe`: the site serves it)."""
    from report_builder.citations.version_files import version_hashes

    folder = Path(site) / v.permalink
    texts: dict[str, bytes] = {}
    for name, digest in sorted(v.files.items()):
        try:
            data = read_bytes(folder, name, CAPS["recipe"] if name == "provenance.json" else CAPS["file"])
        except FileNotFoundError:
            return f"{name} is missing"
        except BadRecord as e:
            return f"{name}: {str(e).split(': ', 1)[-1]}"
        if _sha256(data) != digest:
            return f"{name} was changed after it was published"
        if name in ("spec.json", "data.csv", "chart.svg", "provenance.json"):
            texts[name] = data
    try:
        spec, csv = texts["spec.json"].decode("utf-8"), texts["data.csv"].decode("utf-8")
        svg = texts["chart.svg"].decode("utf-8") if "chart.svg" in texts else None
    except (KeyError, UnicodeDecodeError):
        return "spec.json, data.csv or chart.svg cannot be read"
    if v.hash not in version_hashes(spec, csv, svg):
        return "spec.json and data.csv no longer give its content hash"
    if svg_ok is not None and not svg_ok(texts.get("chart.svg", b"")):
        return "chart.svg holds more than a chart draws (a script, an event handler or a link)"
    try:
        rec = record_from(texts["provenance.json"], folder / "provenance.json")
    except BadRecord as e:
        return f"provenance.json: {str(e).split(': ', 1)[-1]}"
    if (rec.figure, rec.content_hash) != (v.figure, v.hash):
        return "its provenance.json names another version"
    return None


def recover_version(site: Path, fig_id: str, h: str, svg_ok: Callable[[bytes], bool] | None = None) -> Version | str:
    """A version folder the index does not list, taken from the folder itself when it verifies
    (`check_version`: content hash, record): its files' SHA-256 computed now, its date, title and paper
    from its record; else why not."""
    folder = Path(site) / permalink(fig_id, h)
    files: dict[str, str] = {}
    for name in FILES + OPTIONAL:
        try:
            files[name] = _sha256(read_bytes(folder, name, CAPS["recipe"] if name == "provenance.json" else CAPS["file"]))
        except FileNotFoundError:
            if name in FILES:
                return f"{name} is missing"
        except BadRecord as e:
            return f"{name}: {str(e).split(': ', 1)[-1]}"
    try:
        rec = read_record(folder, fig_id, h)
    except (OSError, BadRecord) as e:
        return f"provenance.json: {str(e).split(': ', 1)[-1]}"
    fig = rec.data["figure"]
    date = rec.data.get("date")
    v = Version(fig_id, h, date if isinstance(date, str) else None, fig.get("title", ""), fig.get("paper", ""), files)
    why = check_version(site, v, svg_ok)
    return why if why is not None else v


def carry(src_root: Path, src: str, dst_root: Path, dst: str | None = None, sha256: str | None = None) -> str | None:
    """Put the regular file ``src_root/src`` at ``dst_root/dst`` (default: the same relative path) when
    the bytes carried have the SHA-256 ``sha256`` (None: any): the file is opened once (no link
    followed, `atomic.opened_regular`), hashed from that descriptor, and that very inode hard-linked (or
    its bytes copied) by temporary sibling and rename (`atomic.replace_inside`). Returns the SHA-256
    carried, or None (nothing written) when the file is missing, not a regular file or differs."""
    try:
        with atomic.opened_regular(src_root, Path(src_root) / src, CAPS["file"]) as fd:
            h = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
            if sha256 is not None and h.hexdigest() != sha256:
                return None
            atomic.replace_inside(dst_root, Path(dst_root) / (dst or src), link_fd=fd)
    except (OSError, ReportBuilderError):
        return None
    return h.hexdigest()


def file_sha256(root: Path, rel: str) -> str | None:
    """SHA-256 of the regular file ``root/rel`` (bounded, no link followed), or None."""
    try:
        with atomic.opened_regular(root, Path(root) / rel, CAPS["file"]) as fd:
            h = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
    except (OSError, ReportBuilderError):
        return None
    return h.hexdigest()


# ---------------------------------------------------------------- the history


@dataclass
class History:
    """A site's ``history.json``: ``entries`` (the valid ones, in order, as `check_entry` passed them),
    ``raw`` (every entry as read, to be written back as it was), ``damaged`` (why the file as a whole
    cannot be read: it is then kept as it was, ``raw_bytes``, and no entry is added), ``skipped``
    (entry number -> why, each left out of the page)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    raw: list[Any] = field(default_factory=list)
    damaged: str | None = None
    raw_bytes: bytes | None = None
    skipped: dict[int, str] = field(default_factory=dict)


def _fig_ref(f: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(f, dict) and figure_id(f.get("id")) is not None and all(
        content_hash(f.get(k)) is not None for k in keys) and isinstance(f.get("title", ""), str)


def check_entry(e: Any) -> str | None:
    """Why ``e`` is not a history entry the Changes page can show, or None. Every permalink and chart
    path in it must be the one its figure id and hashes give (the page links them)."""
    if not isinstance(e, dict):
        return "not a JSON object"
    if not all(isinstance(e.get(k), _SCALARS) for k in ("id", "date", "report_builder_version", "git_commit",
                                                         "preset", "device", "dtype")):
        return "a shown field is not a plain value"
    if not _dict_of_dicts(e.get("models", {})) or not _dict_of_dicts(e.get("datasets", {})):
        return "models/datasets are not objects of objects"
    if not isinstance(e.get("libraries", {}), dict) or not all(isinstance(v, _SCALARS) for v in e.get("libraries", {}).values()):
        return "libraries is not an object of plain values"
    for key in ("added", "removed"):
        items = e.get(key, [])
        if not isinstance(items, list) or not all(_fig_ref(f, ("hash",)) and f.get("permalink") == permalink(f["id"], f["hash"])
                                                  for f in items):
            return f"{key} lists a figure that is not a registered id with its hash and permalink"
    changed = e.get("changed", [])
    if not isinstance(changed, list):
        return "changed is not a list"
    for c in changed:
        if not _fig_ref(c, ("old", "new")) or c.get("old_permalink") != permalink(c["id"], c["old"]) \
                or c.get("new_permalink") != permalink(c["id"], c["new"]):
            return "changed lists a figure that is not a registered id with its two hashes and permalinks"
        if c.get("chart") not in (None, chart_path(c["id"], c["old"], c["new"])):
            return "a difference chart is not at its own path"
        if c.get("chart_sha256") is not None and not (isinstance(c["chart_sha256"], str) and SHA256.fullmatch(c["chart_sha256"])):
            return "a difference chart's SHA-256 is not 64 hex digits"
        if not _data_ok(c.get("data", {})) or not _inputs_ok(c.get("inputs", [])):
            return "a change's inputs or data are malformed"
    if not _inputs_ok(e.get("inputs_changed", [])):
        return "inputs_changed is malformed"
    return None


def _inputs_ok(rows: Any) -> bool:
    """Rows of `figure_diff.inputs_diff` as the Changes page reads them: kind and what (text), old and new."""
    return isinstance(rows, list) and all(isinstance(r, dict) and isinstance(r.get("kind"), str)
                                          and isinstance(r.get("what"), str) and {"old", "new"} <= set(r) for r in rows)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _data_ok(d: Any) -> bool:
    """A change's data summary (`figure_diff.data_summary`) as `figure_diff.describe_data` reads it."""
    if not isinstance(d, dict):
        return False
    if not d or not d.get("comparable"):
        return True
    if not {"values_changed", "values_compared"} <= set(d):
        return False
    if (d.get("rows_added") or d.get("rows_removed")) and not {"rows_added", "rows_removed"} <= set(d):
        return False
    for key, num in (("largest_abs", "difference"), ("largest_rel", "relative")):
        x = d.get(key)
        if x and not (isinstance(x, dict) and _number(x.get(num)) and "column" in x and isinstance(x.get("where"), dict)
                      and (key == "largest_rel" or {"old", "new"} <= set(x))):
            return False
    return True


def read_history(site: Path) -> History:
    """``history.json`` of ``site`` (`History`): missing -> empty; unreadable -> ``damaged``."""
    try:
        data = read_bytes(site, HISTORY, CAPS["index"])
    except FileNotFoundError:
        return History()
    except BadRecord as e:
        return History(damaged=str(e).split(": ", 1)[-1])
    try:
        obj = load_json(data, Path(site) / HISTORY)
    except BadRecord as e:
        return History(damaged=str(e).split(": ", 1)[-1], raw_bytes=data)
    entries = obj.get("entries") if isinstance(obj, dict) else None
    if not isinstance(entries, list):
        return History(damaged="no 'entries' list", raw_bytes=data)
    out = History(raw=list(entries))
    for k, e in enumerate(entries):
        why = check_entry(e)
        if why is None:
            out.entries.append(e)
        else:
            out.skipped[k + 1] = why
    return out


def _history_current(site: Path) -> dict[str, str]:
    """Each figure's current version as the valid entries of ``site``'s history leave it (added, changed and
    removed replayed in order); empty when the history cannot be read."""
    cur: dict[str, str] = {}
    for e in read_history(site).entries:
        cur.update({f["id"]: f["hash"] for f in e.get("added") or []})
        cur.update({c["id"]: c["new"] for c in e.get("changed") or []})
        for f in e.get("removed") or []:
            cur.pop(f["id"], None)
    return cur


# ---------------------------------------------------------------- the manifest


def _manifest(m: Any, nested: bool) -> dict[str, Any] | None:
    if not isinstance(m, dict) or not isinstance(m.get("figures"), dict):
        return None
    out: dict[str, Any] = {k: m.get(k) for k in ("date", "git_commit", "report_builder_version", "preset")
                           if isinstance(m.get(k), (str, type(None)))}
    out["figures"] = {fid: {"hash": content_hash(r.get("hash")), **{k: r[k] for k in ("title", "paper")
                                                                     if isinstance(r.get(k), str)}}
                      for fid, r in m["figures"].items() if figure_id(fid) and isinstance(r, dict)}
    if nested and m.get("base") is not None:
        out["base"] = _manifest(m["base"], False)
    return out


def read_manifest(site: Path, copy: Path | None = None) -> dict[str, Any] | None:
    """``figures/manifest.json`` of ``site`` (else the ``copy`` the output's state folder keeps) with only
    valid figure ids, hashes and text kept; None when neither can be read."""
    for root, rel in ((Path(site), MANIFEST), *([(Path(copy).parent, Path(copy).name)] if copy else [])):
        try:
            out = _manifest(read_json(root, rel, CAPS["index"]), True)
        except (OSError, BadRecord):
            continue
        if out is not None:
            return out
    return None


def load_versions(site: Path, log: Callable[[str], Any], *, keeping: str = "not republished",
                  svg_ok: Callable[[bytes], bool] | None = None) -> Index:
    """The versions of ``site`` as a build or ``clean`` uses them: the index (`read_index`) plus every
    version folder on disk it does not list that verifies (`recover_version`); ``Index.unverified``: the
    folders that do not. When the index is damaged (or missing beside version folders), its ``current`` comes
    from the manifest, else from the history (`_history_current`: a rebuild is then no "added" figure). Says in one
    warning line what was damaged and what is done (``keeping``: what happens to unverified folders)."""
    index = read_index(site)
    folders = version_folders(site)
    unlisted = [(f, h) for f, h in folders if index.get(f, h) is None]
    for f, h in unlisted:
        v = recover_version(site, f, h, svg_ok)
        if isinstance(v, Version):
            index.versions.setdefault(f, {})[h] = v
        else:
            index.unverified.append((f, h, v))
    if index.damaged is not None or (folders and not os.path.lexists(Path(site) / INDEX)):
        # no usable index: each figure's current version as the manifest names it, else as the history leaves it
        man = read_manifest(site) or {}
        index.current = {f: r["hash"] for f, r in (man.get("figures") or {}).items() if index.get(f, r.get("hash"))} \
            or {f: h for f, h in _history_current(site).items() if index.get(f, h)}
    for f in [f for f, h in index.current.items() if index.get(f, h) is None]:  # names no version the site holds
        del index.current[f]
        index.dropped += 1
    lost = "".join(f"; {len(index.unverified)} that do not verify are {keeping}: " + ", ".join(
        f"{permalink(f, h)} ({why})" for f, h, why in index.unverified) if index.unverified else "")
    n_ok = len(unlisted) - len(index.unverified)
    if index.damaged is not None:
        log(f"warning: {Path(site) / INDEX} cannot be used ({index.damaged}): every version folder found "
            f"({len(folders)}) is kept and the index rebuilt from the {n_ok} that verify{lost}")
    elif unlisted or index.dropped:
        said = [f"{index.dropped} malformed entries ignored"] if index.dropped else []
        if unlisted:
            said.append(f"{len(unlisted)} version folders it does not list: {n_ok} verified and kept{lost}")
        log(f"warning: {Path(site) / INDEX}: " + "; ".join(said))
    return index
