"""Immutable figure permalinks: every version of a figure at ``figures/<id>/<hash>/``, in every later site.

A figure *version* is named by its content hash. Its folder holds ``chart.svg``, ``chart.png``,
``data.csv``, ``spec.json``, ``provenance.json`` (the recipe of the build that created it, `citations.recipe`)
and ``paper_vs_ours.csv`` where the figure has one: these files never change (`version_files.FILES`).
Beside them, two files are presentation made again by every build from the version's record and the
site as it is now (`version_files.DERIVED`, `PAGE`): ``cite.bib`` (its ``url`` the version's address
under the *current* ``site_url``, so a ``site_url`` set later reaches every earlier citation) and
``index.html``, the site's page *about* the version (its chart, provenance, citation, and whether a
newer version exists). ``figures/<id>/`` keeps the current version's files as before, its
``provenance.json`` and ``cite.bib`` being the current version's own. The index records the
``site_url`` each build used; a build that sets or changes it over earlier versions says so in one line.

The site is replaced as a whole on every build (`site.build`), so `Versions.publish` carries every
earlier version into the new site before the swap: hard links where the filesystem allows (copies
elsewhere), each file verified first against the SHA-256 the index recorded when the version was
created (``figures/versions.json``) and the content hash recomputed from ``spec.json`` and
``data.csv``, then carried only when the bytes carried have that SHA-256 (`earlier_site.carry`). A
version that no longer matches is not republished silently: one warning line names it (and it is
recreated only when this build produced the same content hash). The earlier site is read only through
`earlier_site` (ids, hashes and file names validated; a damaged index keeps every folder); everything
is written into the new site by temporary sibling and rename (`atomic.replace_inside`). ``clean`` keeps
every version unless asked (`site_clean`).

Pitfall: nothing a version's hash or index covers may depend on the build that carries it (no build
date, no "current" flag, no address): what does (the address, the status) goes into the derived files.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from report_builder import atomic
from report_builder.citations import earlier_site, readback, recipe
from report_builder.citations.cite import version_bibtex
from report_builder.citations.version_page import EARLIER
from report_builder.citations.version_files import FILES, OPTIONAL, PAGE, permalink
from report_builder.citations.version_files import permalink_url  # noqa: F401 - the site stage's name for it

INDEX = earlier_site.INDEX
INDEX_FORMAT = "report_builder figure versions 1"


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
    svg_ok: Callable[[bytes], bool] | None = None  # what a carried chart.svg must pass (`site.svgsafe.is_safe`)
    index: earlier_site.Index = field(default_factory=earlier_site.Index)
    checked: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (id, hash) -> why damaged
    new: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"hash", "created", "title", "paper"}
    current: dict[str, str] = field(default_factory=dict)  # this build's id -> hash
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # this build's id -> provenance record
    titles: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> {"title", "paper", "page"}
    old: dict[tuple[str, str], readback.Record] = field(default_factory=dict)  # earlier versions' records read

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        earlier_site.check_known_versions(self.out_dir)  # versions it cannot carry: refused, never dropped
        self._read = earlier_site.read_index(self.out_dir)
        self.index = earlier_site.load_versions(self.out_dir, self.log, svg_ok=self.svg_ok)

    def moved(self) -> bool:
        """Whether the output's versions index is no longer the one this build read (another build of the
        same output published since)."""
        return earlier_site.read_index(self.out_dir) != self._read

    @property
    def previous_current(self) -> dict[str, str]:
        """The previous site's current version of each figure."""
        return dict(self.index.current)

    def published(self, fig_id: str, content_hash: str) -> earlier_site.Version | None:
        """A version the previous site published (validated), or None."""
        return self.index.get(fig_id, content_hash)

    def intact(self, fig_id: str, content_hash: str) -> bool:
        """Whether a previously published version still matches its hashes (checked once; a damaged
        one is reported in one warning line)."""
        key = (fig_id, content_hash)
        if key not in self.checked:
            v = self.published(fig_id, content_hash)
            self.checked[key] = "it is not in the index" if v is None else earlier_site.check_version(
                self.out_dir, v, self.svg_ok)
            if v is not None and self.checked[key] is not None:
                self._damaged(fig_id, content_hash)
        return self.checked[key] is None

    def _damaged(self, fig_id: str, content_hash: str) -> None:
        self.log(f"warning: {permalink(fig_id, content_hash)} of {self.out_dir} is damaged "
                 f"({self.checked[(fig_id, content_hash)]}): not republished")

    def old_record(self, fig_id: str, content_hash: str) -> readback.Record | None:
        """The record (provenance.json) of an intact earlier version, read once; None when there is none."""
        key = (fig_id, content_hash)
        if key not in self.old and self.published(fig_id, content_hash) is not None and self.intact(*key):
            try:
                self.old[key] = readback.read_record(self.out_dir / permalink(*key), *key)
            except (OSError, readback.BadRecord) as e:
                self.checked[key] = f"provenance.json: {e}"
                self._damaged(*key)
        return self.old.get(key)

    def old_data(self, fig_id: str, content_hash: str):
        """The ``data.csv`` of an intact earlier version as a table, or None."""
        if self.old_record(fig_id, content_hash) is None:
            return None
        return readback.read_data(self.out_dir / permalink(fig_id, content_hash))

    def record_for(self, spec: Any, content_hash: str, make: Callable[[], dict[str, Any]],
                   page: str | None = None) -> tuple[dict[str, Any], str, str]:
        """(provenance record, provenance.json text, cite.bib text) of this build's version of ``spec``:
        the published version's own record when that hash was published before and is intact, else
        ``make()``'s record (sealed here): a new version. The citation is made from the record and the
        site's current ``site_url`` either way (`cite.version_bibtex`: derived, never carried)."""
        self.current[spec.id] = content_hash
        self.titles[spec.id] = {"title": spec.title, "paper": spec.paper, "page": page or ""}
        old = self.old_record(spec.id, content_hash)
        if old is not None:
            self.records[spec.id] = old.data
            return old.shown, old.text, version_bibtex(old.data, self.site_url)
        rec = recipe.seal(make())
        self.records[spec.id] = rec
        self.new[spec.id] = {"hash": content_hash, "created": rec.get("date"), "title": spec.title,
                             "paper": spec.paper}
        return rec, recipe.dumps(rec), version_bibtex(rec, self.site_url)

    def all_versions(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Every version the new site will hold: the previous index's (intact) plus this build's."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for v in self.index.all():
            out.setdefault(v.figure, {})[v.hash] = v.entry()
        for fid, v in self.new.items():
            out.setdefault(fid, {})[v["hash"]] = {k: v[k] for k in ("created", "title", "paper")}
        return out

    def publish(self, tmp_site: Path, write_page: Callable[..., str]) -> dict[str, Any]:
        """Write every version into ``tmp_site`` (the new site, before the swap) and the index.

        Re-reads the output's index first (another build of the same output may have published since
        this one started: its versions are carried too). ``write_page(fig_id, hash, record, bib,
        current hash, newer exists)`` -> the version's index.html. Returns the new index.
        """
        tmp_site = Path(tmp_site)
        if self.moved():
            self.log("site: another build published into the output meanwhile; its versions are kept")
            self._read = earlier_site.read_index(self.out_dir)
            self.index = earlier_site.load_versions(self.out_dir, self.log, svg_ok=self.svg_ok)
            self.checked.clear()
            self.old.clear()
        index: dict[str, Any] = {"format": INDEX_FORMAT, "site_url": self.site_url,
                                 "current": dict(sorted(self.current.items())), "figures": {}}
        pages: dict[tuple[str, str], dict[str, Any]] = {}
        new = {(f, v["hash"]) for f, v in self.new.items()}
        for v in self.index.all():
            key = (v.figure, v.hash)
            if key in new:
                self.log(f"site: {v.permalink} recreated from this build (the same content hash)")
                continue  # recreated by this build (its published folder was damaged)
            rec = self.old_record(*key)
            if rec is None:
                continue
            if not all(earlier_site.carry(self.out_dir, v.permalink + name, tmp_site, sha256=digest)
                       for name, digest in sorted(v.files.items())):
                self.checked[key] = "a file changed while it was carried"
                self._damaged(*key)
                atomic.remove_inside(tmp_site, tmp_site / v.permalink)
                continue
            index["figures"].setdefault(v.figure, {})[v.hash] = v.entry()
            pages[key] = rec.shown
        for fid, v in self.new.items():
            h, files = v["hash"], {}
            for name in FILES + OPTIONAL:
                digest = earlier_site.carry(tmp_site, f"figures/{fid}/{name}", tmp_site, permalink(fid, h) + name)
                if digest is not None:
                    files[name] = digest
            index["figures"].setdefault(fid, {})[h] = {"created": v["created"], "title": v["title"],
                                                       "paper": v["paper"], "files": dict(sorted(files.items()))}
            pages[(fid, h)] = self.records[fid]
        for fid, vs in index["figures"].items():  # a version's files never change: read-only (as DVC's and git's
            for h, rec in vs.items():  # objects), so an edit of the current copy that shares them cannot reach them
                for name in rec["files"]:
                    _read_only(tmp_site / permalink(fid, h) / name)
        for fid, h in self.current.items():  # the current files: one copy on disk with their version's
            rec = (index["figures"].get(fid) or {}).get(h)
            if rec is not None:
                _share(tmp_site, fid, h, rec["files"])
        for fid, vs in index["figures"].items():
            cur = self.current.get(fid)
            for h in vs:  # the derived files: the citation (site_url as it is now) and the page
                rec = pages[(fid, h)]
                bib = version_bibtex(rec, self.site_url)
                atomic.replace_inside(tmp_site, tmp_site / permalink(fid, h) / "cite.bib", bib)
                text = write_page(fid, h, rec, bib, cur, _newer(vs, h, cur))
                atomic.replace_inside(tmp_site, tmp_site / permalink(fid, h) / PAGE, text)
        earlier = sum(len(vs) for fid, vs in index["figures"].items()) - len(self.new)
        if earlier and (self.site_url != self.index.site_url if self.index.site_url_known else self.site_url):
            self.log(f"site: site_url is now {self.site_url or 'unset'}" + (
                f" (was {self.index.site_url or 'unset'})" if self.index.site_url_known else "")
                + f": the citations and pages of the {earlier} earlier versions follow it (their hashed files "
                f"are unchanged)")
        # one order, whatever the order versions were carried or made in: a rebuild with no change keeps the bytes
        index["figures"] = {f: dict(sorted(vs.items())) for f, vs in sorted(index["figures"].items())}
        atomic.replace_inside(tmp_site, tmp_site / INDEX, json.dumps(index, indent=1, ensure_ascii=False) + "\n")
        return index


def _read_only(path: Path) -> None:
    """Take the write permission off the regular file ``path`` of the new site (a version's file: the current
    copy of ``figures/<id>/`` is a hard link to it, and an in-place edit there, ``>> data.csv``, changed the
    cited version with it); a filesystem without permissions keeps it as it is. POSIX only (Windows cannot
    remove or rename over a read-only file)."""
    if os.name != "posix":
        return
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o222:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o222)
    except OSError:
        pass


def _share(site: Path, fid: str, h: str, files: dict[str, str]) -> None:
    """Replace each file of ``figures/<fid>/`` that has the same bytes as its version's (SHA-256 recorded in
    ``files``) by a hard link to it, so the site holds one copy (mkdocs wrote the current files anew)."""
    for name, digest in files.items():
        if earlier_site.file_sha256(site, f"figures/{fid}/{name}") == digest:
            earlier_site.carry(site, permalink(fid, h) + name, site, f"figures/{fid}/{name}", digest)


def _newer(versions: dict[str, dict[str, Any]], h: str, current: str | None) -> bool | str:
    """Whether a version other than ``h`` is current: True (a newer version exists), `version_page.EARLIER`
    when the current one was created before ``h`` (a rebuild went back to it: a model swapped back), False
    when ``h`` is current or the figure is not in the report."""
    if current is None or current == h or current not in versions:
        return False
    then, now = (versions.get(x, {}).get("created") for x in (h, current))
    if isinstance(then, str) and isinstance(now, str) and now < then:
        return EARLIER
    return True
