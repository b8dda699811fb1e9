"""``report-builder cite ID [HASH]``: the BibTeX of a figure version, from a built site.

The version is the site's current one of figure ID (``current`` in ``figures/versions.json``) unless
HASH names another version the site holds. The BibTeX is made from the version's own record
(``provenance.json``, read bounded and validated through `readback`) and the site's ``site_url`` (which
every build records in ``versions.json``): the version's absolute address whenever the site has a
``site_url``, also for a version published before it was set; else the relative permalink
(`cite.version_bibtex`, the same text as the site's ``cite.bib`` and Cite boxes).

A damaged ``versions.json`` (unreadable, truncated, of another shape; or deleted beside version folders)
is recovered from as a build recovers (`earlier_site.load_versions`): the versions are the folders that
verify, each figure's current version comes from ``figures/manifest.json``, else from ``history.json``, and
one warning line says so. Such an index records no ``site_url``: the url is then the address the
version's own record names (its ``permalink``, absolute when the site had a ``site_url`` when the version
was published), and the warning says that too.

Errors are one line with exit code 2 (`UsageError`): an unknown figure id (with the closest registered
ids: "did you mean"), a folder that is not a built site, a figure the site has not published, a hash of
another form or one the site does not hold (with the versions it does), a version whose files or record
do not verify (edited after it was published: never cited as if it were that version).
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from report_builder.citations import cite as cite_mod
from report_builder.citations import earlier_site, readback
from report_builder.citations.version_files import HASH, permalink, permalink_url
from report_builder.errors import UsageError, option, shown
from report_builder.values import check_path


@dataclass
class Citation:
    """What `cite` found: the figure id, the version's content hash, whether it is the site's current
    version, its address (absolute with a ``site_url``) and its BibTeX."""

    figure: str
    hash: str
    current: bool
    url: str
    bibtex: str

    def to_dict(self) -> dict:
        return {"figure": self.figure, "hash": self.hash, "current": self.current, "url": self.url,
                "bibtex": self.bibtex}


def _known_id(fig_id: str) -> str:
    ids = readback.registered_ids() or frozenset()
    if readback.figure_id(fig_id) is not None:
        return fig_id
    guess = difflib.get_close_matches(str(fig_id).lower(), sorted(ids), n=3, cutoff=0.6)
    raise UsageError(f"unknown figure id {shown(fig_id)}" + (f"; did you mean {', '.join(guess)}?" if guess else "")
                     + " (`report-builder list figures` shows every id)")


def _warn(line: str) -> None:
    import logging

    logging.getLogger("report_builder").warning(line.removeprefix("warning: "))


def _versions(site: Path, log: Callable[[str], Any]) -> tuple[earlier_site.Index, bool]:
    """The versions ``site`` holds (`earlier_site.load_versions`: the index and the folders that verify) and
    whether its index was usable (else one warning line to ``log``); `UsageError` when ``site`` is no built site."""
    if site.is_symlink():  # read through no link (`readback`): say so, not "no versions.json"
        raise UsageError(f"{site}: a symbolic link; give the site folder it points to with {option('site_dir')}")
    listed = os.path.lexists(site / earlier_site.INDEX)
    if not listed and not earlier_site.version_folders(site):
        raise UsageError(f"{site}: not a built site (no {earlier_site.INDEX}); give the site folder with {option('site_dir')} "
                         f"(default: site), or build one first")
    index = earlier_site.load_versions(site, lambda _line: None)  # its lines speak of a build: cite's own below
    usable = listed and index.damaged is None
    bad = "".join(f"; {len(index.unverified)} that do not verify cannot be cited: " + ", ".join(
        f"{permalink(f, h)} ({why})" for f, h, why in index.unverified) if index.unverified else "")
    if not usable:
        log(f"warning: {site / earlier_site.INDEX} cannot be used ({index.damaged or 'it is missing'}): cited from the "
            f"{len(index.all())} version folders that verify, each figure's current version as "
            f"{earlier_site.MANIFEST} (else {earlier_site.HISTORY}) names it and the url as the version's own record "
            f"names it{bad}; build or render the site again to rebuild the index")
    elif bad or index.dropped:
        log(f"warning: {site / earlier_site.INDEX}: {index.dropped} malformed entries ignored{bad}")
    return index, usable


def cite(fig_id: str, content_hash: str | None = None, site_dir: str | Path = "site",
         log: Callable[[str], Any] | None = None) -> Citation:
    """The `Citation` of a version of figure ``fig_id`` in the built site ``site_dir`` (its current
    version unless ``content_hash`` names another); `UsageError` otherwise (see the module docstring).
    ``log`` gets the warning line of a damaged index (default: the ``report_builder`` logger)."""
    fig_id = _known_id(fig_id)
    check_path(str(site_dir), option("site_dir", flag="cite --dir"), error=UsageError)  # a name too long to look up: one line, not an OSError
    site = Path(site_dir).expanduser()
    if content_hash is not None and not HASH.fullmatch(str(content_hash)):
        raise UsageError(f"{shown(content_hash)} is not a content hash (12 lowercase hex digits, e.g. 3b9d428b72e8)")
    index, usable = _versions(site, log or _warn)
    versions = index.versions.get(fig_id) or {}
    current = index.current.get(fig_id)
    h = content_hash or current
    held = ", ".join(sorted(versions)) or "none"
    if h is None:  # no current version: the last build did not make this figure
        out = f"{fig_id} is not in the last build of {site} (not configured, or left out by `figures:`)"
        raise UsageError(out + (f", so it has no current version; cite one of its {len(versions)} version"
                                f"{'s' * (len(versions) > 1)}: report-builder cite {fig_id} HASH --dir {site} ({held})"
                                if versions else ", and the site holds no version of it"))
    folder = site / permalink(fig_id, h)
    bad = next((why for f, g, why in index.unverified if (f, g) == (fig_id, h)), None)
    if bad is None and h in versions:
        bad = earlier_site.check_version(site, versions[h])  # its bytes, not what the index claims of them
    if bad is not None:
        raise UsageError(f"{folder}: not the version {h} of {fig_id} as published ({bad}); it cannot be cited "
                         f"from this site (`report-builder reproduce {folder}` says what differs)")
    if h not in versions:
        raise UsageError(f"{site} holds no version {h} of {fig_id} (its versions of {fig_id}: {held})")
    try:
        rec = readback.read_record(folder, fig_id, h)
    except FileNotFoundError:
        raise UsageError(f"{folder}: its provenance.json is missing") from None
    site_url = index.site_url if usable else _published_at(rec.data, fig_id, h)
    return Citation(figure=fig_id, hash=h, current=h == current, url=permalink_url(site_url, fig_id, h),
                    bibtex=cite_mod.version_bibtex(rec.data, site_url))


def _published_at(rec: dict[str, Any], fig_id: str, h: str) -> str | None:
    """The ``site_url`` a version's record names in its ``permalink`` (checked by `readback.check_record` to be
    a site_url the configuration accepts followed by this version's permalink), or None for a relative one."""
    link = rec.get("permalink")
    rel = permalink(fig_id, h)
    return link[: -len(rel)] or None if isinstance(link, str) and link.endswith(rel) else None
