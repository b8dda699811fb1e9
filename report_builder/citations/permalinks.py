"""Immutable figure permalinks: every version of a figure at ``figures/<id>/<hash>/``, in every later site.

A figure *version* is named by its content hash. Its folder holds ``chart.svg``, ``chart.png``,
``data.csv``, ``spec.json``, ``provenance.json`` (the recipe of the build that created it, `citations.recipe`),
``cite.bib`` (pointing at the permalink) and ``paper_vs_ours.csv`` where the figure has one; these files
never change. ``index.html`` beside them is the site's page *about* the version (its chart, provenance,
citation, and whether a newer version exists): the one file a later build rewrites.
``figures/<id>/`` keeps the current version's files as before, its ``provenance.json`` and
``cite.bib`` being the current version's own.

The site is replaced as a whole on every build (`site.build`), so `Versions.publish` carries every
earlier version into the new site before the swap: hard links where the filesystem allows (copies
elsewhere), each file verified first against the SHA-256 the index recorded when the version was
created (``figures/versions.json``) and the content hash recomputed from ``spec.json`` and
``data.csv``. A version that no longer matches is not republished silently: one warning line names
it (and it is recreated only when this build produced the same content hash). ``clean`` keeps every
version unless asked (`clean_site`).

Pitfall: nothing inside a version folder may depend on the build that carries it (no build date,
no "current" flag) except ``index.html``; a version's ``cite.bib`` names the address it was first
published at.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from report_builder import guard
from report_builder.atomic import replace_file, write_text
from report_builder.citations import recipe
from report_builder.filehash import sha256_of_file
from report_builder.citations.version_files import version_hash

FILES = ("chart.svg", "chart.png", "data.csv", "spec.json", "provenance.json", "cite.bib")
"""Every version's files (all required)."""
OPTIONAL = ("paper_vs_ours.csv",)
"""Files a version holds when its figure has them."""
PAGE = "index.html"
INDEX = "figures/versions.json"
INDEX_FORMAT = "report_builder figure versions 1"
HASH = re.compile(r"[0-9a-f]{12}")


def permalink(fig_id: str, content_hash: str) -> str:
    """The site-relative permalink of a version: ``figures/<id>/<hash>/``."""
    return f"figures/{fig_id}/{content_hash}/"


def permalink_url(site_url: str | None, fig_id: str, content_hash: str) -> str:
    """The published address of a version (``<site_url>figures/<id>/<hash>/``), or the relative
    permalink without a ``site_url``."""
    rel = permalink(fig_id, content_hash)
    return (site_url.rstrip("/") + "/" + rel) if site_url else rel



def content_hash_of(folder: Path) -> set[str]:
    """The content hashes a version folder's ``spec.json`` and ``data.csv`` give (with and without the
    drawn ``chart.svg``, which a diagram's hash covers), as `site.figure_files.write_figure_files` makes them."""
    spec = (folder / "spec.json").read_text(encoding="utf-8")
    csv = (folder / "data.csv").read_text(encoding="utf-8")
    out = {version_hash(spec, csv)}
    svg = folder / "chart.svg"
    if svg.is_file():
        out.add(version_hash(spec, csv, svg.read_text(encoding="utf-8")))
    return out


def read_index(site: Path) -> dict[str, Any]:
    """A site's version index (``{"current": {id: hash}, "figures": {id: {hash: record}}}``); empty when
    missing or unreadable."""
    try:
        data = json.loads((Path(site) / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"current": {}, "figures": {}}
    if not isinstance(data, dict) or not isinstance(data.get("figures"), dict):
        return {"current": {}, "figures": {}}
    data.setdefault("current", {})
    return data


def check_version(site: Path, fig_id: str, content_hash: str, record: dict[str, Any]) -> str | None:
    """Why the version ``fig_id``/``content_hash`` of ``site`` cannot be republished, or None when every
    file matches the SHA-256 recorded at its creation and its content hash matches its name."""
    folder = Path(site) / permalink(fig_id, content_hash)
    files = record.get("files") or {}
    if not HASH.fullmatch(content_hash) or not set(FILES) <= set(files):
        return "its index entry is incomplete"
    if not folder.is_dir():
        return "its folder is missing"
    for name, digest in files.items():
        p = folder / name
        if not p.is_file() or p.is_symlink():
            return f"{name} is missing"
        if sha256_of_file(p) != digest:
            return f"{name} was changed after it was published"
    try:
        if content_hash not in content_hash_of(folder):
            return "spec.json and data.csv no longer give its content hash"
    except (OSError, UnicodeDecodeError):
        return "spec.json or data.csv cannot be read"
    return None


def link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (a copy where the filesystem refuses links)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@dataclass
class Versions:
    """The figure versions of one output folder: the previous site's (verified on use) and this build's.

    Build flow (`site.build.render_site`): `record_for` gives each figure's provenance record and
    citation (the existing version's own when its hash was published before), `entry` the history
    entry (`citations.history`), `publish` writes every version into the new site before the swap.
    """

    out_dir: Path
    site_url: str | None = None
    log: Callable[[str], Any] = print
    index: dict[str, Any] = field(default_factory=dict)
    checked: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (id, hash) -> why damaged
    new: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"hash", "created", "title", "paper"}
    current: dict[str, str] = field(default_factory=dict)  # this build's id -> hash
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # this build's id -> provenance record
    titles: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> {"title", "paper", "page"}

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.index = read_index(self.out_dir)

    @property
    def previous_current(self) -> dict[str, str]:
        """The previous site's current version of each figure."""
        return dict(self.index.get("current") or {})

    def published(self, fig_id: str, content_hash: str) -> dict[str, Any] | None:
        """The index record of a version the previous site published, or None."""
        return (self.index["figures"].get(fig_id) or {}).get(content_hash)

    def intact(self, fig_id: str, content_hash: str) -> bool:
        """Whether a previously published version still matches its hashes (checked once; a damaged
        one is reported in one warning line)."""
        key = (fig_id, content_hash)
        if key not in self.checked:
            rec = self.published(fig_id, content_hash)
            self.checked[key] = "it is not in the index" if rec is None else check_version(
                self.out_dir, fig_id, content_hash, rec)
            if rec is not None and self.checked[key] is not None:
                self.log(f"warning: {permalink(fig_id, content_hash)} of {self.out_dir} is damaged "
                         f"({self.checked[key]}): not republished")
        return self.checked[key] is None

    def old_folder(self, fig_id: str, content_hash: str) -> Path | None:
        """The previous site's folder of an intact version, or None."""
        if self.published(fig_id, content_hash) is None or not self.intact(fig_id, content_hash):
            return None
        return self.out_dir / permalink(fig_id, content_hash)

    def record_for(self, spec: Any, content_hash: str, make: Callable[[], tuple[dict[str, Any], str]],
                   page: str | None = None) -> tuple[dict[str, Any], str, str]:
        """(provenance record, provenance.json text, cite.bib text) of this build's version of ``spec``:
        the published version's own files when that hash was published before and is intact, else
        ``make()``'s record (sealed here) and citation: a new version."""
        self.current[spec.id] = content_hash
        self.titles[spec.id] = {"title": spec.title, "paper": spec.paper, "page": page or ""}
        old = self.old_folder(spec.id, content_hash)
        if old is not None:
            try:
                text = (old / "provenance.json").read_text(encoding="utf-8")
                bib = (old / "cite.bib").read_text(encoding="utf-8")
                self.records[spec.id] = json.loads(text)
                return self.records[spec.id], text, bib
            except (OSError, ValueError):
                self.checked[(spec.id, content_hash)] = "provenance.json cannot be read"
        rec, bib = make()
        rec = recipe.seal(rec)
        self.records[spec.id] = rec
        self.new[spec.id] = {"hash": content_hash, "created": rec.get("date"), "title": spec.title,
                             "paper": spec.paper}
        return rec, recipe.dumps(rec), bib

    def all_versions(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Every version the new site will hold: the previous index's (intact) plus this build's."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for fid, vs in self.index["figures"].items():
            for h, rec in vs.items():
                out.setdefault(fid, {})[h] = rec
        for fid, v in self.new.items():
            out.setdefault(fid, {})[v["hash"]] = {k: v[k] for k in ("created", "title", "paper")}
        return out

    def publish(self, tmp_site: Path, write_page: Callable[..., str]) -> dict[str, Any]:
        """Write every version into ``tmp_site`` (the new site, before the swap) and the index.

        Re-reads the output's index first (another build of the same output may have published since
        this one started: its versions are carried too). ``write_page(fig_id, hash, record, bib,
        current hash, newer exists)`` -> the version's index.html. Returns the new index.
        """
        latest = read_index(self.out_dir)
        if latest != self.index:
            self.log("site: another build published into the output meanwhile; its versions are kept")
            self.index = latest
        index: dict[str, Any] = {"format": INDEX_FORMAT, "current": dict(sorted(self.current.items())), "figures": {}}
        for fid, vs in sorted(self.index["figures"].items()):
            for h, rec in sorted(vs.items()):
                if (fid, h) in {(f, v["hash"]) for f, v in self.new.items()}:
                    self.log(f"site: {permalink(fid, h)} recreated from this build (the same content hash)")
                    continue  # recreated by this build (its published folder was damaged)
                if not self.intact(fid, h):
                    continue
                src = self.out_dir / permalink(fid, h)
                dst = tmp_site / permalink(fid, h)
                for name in rec["files"]:
                    link_or_copy(src / name, dst / name)
                index["figures"].setdefault(fid, {})[h] = rec
        for fid, v in self.new.items():
            h = v["hash"]
            src, dst = tmp_site / "figures" / fid, tmp_site / permalink(fid, h)
            dst.mkdir(parents=True, exist_ok=True)
            files = {}
            for name in FILES + OPTIONAL:
                if (src / name).is_file():
                    link_or_copy(src / name, dst / name)
                    files[name] = sha256_of_file(dst / name)
            index["figures"].setdefault(fid, {})[h] = {"created": v["created"], "title": v["title"],
                                                       "paper": v["paper"], "files": dict(sorted(files.items()))}
        for fid, h in self.current.items():  # the current files: one copy on disk with their version's
            rec = (index["figures"].get(fid) or {}).get(h)
            if rec is not None:
                _share(tmp_site / "figures" / fid, tmp_site / permalink(fid, h), rec["files"])
        for fid, vs in index["figures"].items():
            cur = self.current.get(fid)
            for h in vs:
                folder = tmp_site / permalink(fid, h)
                rec = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
                bib = (folder / "cite.bib").read_text(encoding="utf-8")
                text = write_page(fid, h, rec, bib, cur, _newer(vs, h, cur))
                (folder / PAGE).write_text(text, encoding="utf-8")
        (tmp_site / INDEX).parent.mkdir(parents=True, exist_ok=True)
        (tmp_site / INDEX).write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return index


def _share(current: Path, version: Path, files: dict[str, str]) -> None:
    """Replace each file of ``current`` that has the same bytes as its version's (SHA-256 recorded in
    ``files``) by a hard link to it, so the site holds one copy (mkdocs wrote the current files anew)."""
    for name, digest in files.items():
        cur, ver = current / name, version / name
        try:
            if not cur.is_file() or os.path.samefile(cur, ver) or cur.stat().st_size != ver.stat().st_size:
                continue
            if sha256_of_file(cur) != digest:
                continue
            replace_file(cur, lambda tmp: os.link(ver, tmp))
        except OSError:
            continue  # another filesystem or no links: the copy stays


def _newer(versions: dict[str, dict[str, Any]], h: str, current: str | None) -> bool:
    """Whether a version other than ``h`` is current (a newer version exists)."""
    return current is not None and current != h and current in versions


# ---------------------------------------------------------------- clean


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
    if m:
        return now - _dt.timedelta(days=int(m.group(1)))
    try:
        t = _dt.datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"--versions-older-than: cannot read {text!r}; give a number of days (30d), a date "
                         f"(2025-06-01) or all") from None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _created(rec: dict[str, Any]) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(str(rec.get("created")))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


KEPT = ("figures", "history", "history.json", guard.SITE_MARKER)


def clean_site(out: Path, older_than: _dt.datetime | None = None, current_too: bool = False) -> tuple[int, int]:
    """Remove a built site but keep its published figure versions, their index and the report history
    (``figures/<id>/<hash>/``, ``figures/versions.json``, ``history.json``, ``history/``); with
    ``older_than``, also the versions created before it, except each figure's current one (what the
    last build showed: its permalink stays) unless ``current_too``. When no version remains, the whole
    folder goes. Returns (versions kept, versions removed). The caller holds the site's lock."""
    out = Path(out)
    if not out.exists():
        return 0, 0
    index = read_index(out)
    current = index.get("current") or {}
    removed = 0
    for fid, vs in list(index["figures"].items()):
        for h, rec in list(vs.items()):
            created = _created(rec)
            if current.get(fid) == h and not current_too:
                continue
            if older_than is not None and (created is None or created < older_than):
                shutil.rmtree(out / permalink(fid, h), ignore_errors=True)
                del vs[h]
                removed += 1
        if not vs:
            del index["figures"][fid]
    kept = sum(len(vs) for vs in index["figures"].values())
    if kept == 0:
        shutil.rmtree(out)
        return 0, removed
    keep_dirs = {(out / permalink(fid, h)).resolve() for fid, vs in index["figures"].items() for h in vs}
    for p in sorted(out.iterdir()):
        if p.name not in KEPT:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    figs = out / "figures"
    for d in sorted(figs.iterdir()) if figs.is_dir() else []:
        if d.name == Path(INDEX).name:
            continue
        if not d.is_dir() or d.is_symlink():
            d.unlink()
            continue
        for q in sorted(d.iterdir()):
            if q.resolve() not in keep_dirs:
                shutil.rmtree(q) if q.is_dir() and not q.is_symlink() else q.unlink()
        if not any(d.iterdir()):
            d.rmdir()
    write_text(out / INDEX, json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    return kept, removed
