"""``report-builder cite ID [HASH]``: the BibTeX of a figure version, from a built site.

The version is the site's current one of figure ID (``current`` in ``figures/versions.json``) unless
HASH names another version the site holds. The BibTeX is made from the version's own record
(``provenance.json``, read bounded and validated through `readback`) and the site's ``site_url`` (which
every build records in ``versions.json``): the version's absolute address whenever the site has a
``site_url``, also for a version published before it was set; else the relative permalink
(`cite.version_bibtex`, the same text as the site's ``cite.bib`` and Cite boxes).

Errors are one line with exit code 2 (`UsageError`): an unknown figure id (with the closest registered
ids: "did you mean"), a folder that is not a built site, a figure the site has not published, a hash of
another form or one the site does not hold (with the versions it does), a version whose record does
not verify.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from report_builder.citations import cite as cite_mod
from report_builder.citations import earlier_site, readback
from report_builder.citations.version_files import HASH, permalink, permalink_url
from report_builder.errors import UsageError, shown


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


def cite(fig_id: str, content_hash: str | None = None, site_dir: str | Path = "site") -> Citation:
    """The `Citation` of a version of figure ``fig_id`` in the built site ``site_dir`` (its current
    version unless ``content_hash`` names another); `UsageError` otherwise (see the module docstring)."""
    fig_id = _known_id(fig_id)
    site = Path(site_dir).expanduser()
    if content_hash is not None and not HASH.fullmatch(str(content_hash)):
        raise UsageError(f"{shown(content_hash)} is not a content hash (12 lowercase hex digits, e.g. 3b9d428b72e8)")
    if site.is_symlink():  # read through no link (`readback`): say so, not "no versions.json"
        raise UsageError(f"{site}: a symbolic link; give the site folder it points to with --dir")
    if not (site / earlier_site.INDEX).is_file():
        raise UsageError(f"{site}: not a built site (no {earlier_site.INDEX}); give the site folder with --dir "
                         f"(default: site), or build one first")
    index = earlier_site.read_index(site)
    if index.damaged is not None:
        raise UsageError(f"{site / earlier_site.INDEX}: cannot be used ({index.damaged})")
    versions = index.versions.get(fig_id) or {}
    current = index.current.get(fig_id)
    h = content_hash or current
    held = ", ".join(sorted(versions)) or "none"
    if h is None:  # no current version: the last build did not make this figure
        out = f"{fig_id} is not in the last build of {site} (not configured, or left out by `figures:`)"
        raise UsageError(out + (f", so it has no current version; cite one of its {len(versions)} version"
                                f"{'s' * (len(versions) > 1)}: report-builder cite {fig_id} HASH --dir {site} ({held})"
                                if versions else ", and the site holds no version of it"))
    if h not in versions:
        raise UsageError(f"{site} holds no version {h} of {fig_id} (its versions of {fig_id}: {held})")
    try:
        rec = readback.read_record(site / permalink(fig_id, h), fig_id, h)
    except FileNotFoundError:
        raise UsageError(f"{site / permalink(fig_id, h)}: its provenance.json is missing") from None
    return Citation(figure=fig_id, hash=h, current=h == current, url=permalink_url(index.site_url, fig_id, h),
                    bibtex=cite_mod.version_bibtex(rec.data, index.site_url))
