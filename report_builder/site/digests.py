"""What decides whether a site build may skip mkdocs: digests of a site's files and of everything mkdocs turns
into the site (`site.build.render_site` compares them with the output's build record, `site_state`).

Pitfall: the build date is on every page; two renders that differ only in it must digest alike, so each
date a page shows (the build's, the history's, the versions') is masked before hashing.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from report_builder import guard
from report_builder.filehash import sha256_of_file
from report_builder.site import manifest
from report_builder.site.site_state import IN_OUT


def tree_digest(root: Path, date: str | tuple[str, ...] = "", known: dict[str, str] | None = None) -> str | None:
    """SHA-256 over every file of ``root`` (relative path and bytes; ``date`` — one date or several:
    the build's and the earlier builds' its pages show — replaced by a placeholder when given, so two
    renders that differ only in their build date digest alike); None if missing.

    ``known``: relative path -> SHA-256 of files whose bytes were just verified (figure files from
    `figure_cache`, which never hold a build date): taken as they are instead of read again."""
    if not root.is_dir():
        return None
    return files_digest({p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))
                         if (p.is_symlink() or p.is_file()) and p.name != guard.SITE_MARKER
                         and p.relative_to(root).parts[0] != IN_OUT}, date, known)


def files_digest(files: dict[str, Path], date: str | tuple[str, ...] = "",
                 known: dict[str, str] | None = None) -> str:
    """SHA-256 over ``files`` (relative path -> file), in their order (see `tree_digest`)."""
    known = known or {}
    h = hashlib.sha256()
    for rel, p in files.items():
        if rel in known:
            digest = bytes.fromhex(known[rel])
        elif p.is_symlink() or not p.is_file() or p.stat().st_size > DIGEST_IN_MEMORY:
            digest = stream_digest(p)  # a link (never followed: the tool makes none) or a large file
        else:
            data = p.read_bytes()
            for d in (date,) if isinstance(date, str) else date:
                if d:
                    data = data.replace(d.encode("utf-8"), b"\0DATE\0")
            digest = hashlib.sha256(data).digest()
        h.update(rel.encode("utf-8") + b"\0" + digest)
    return h.hexdigest()


DIGEST_IN_MEMORY = 64 << 20
"""Files of a site up to this size are digested with their build dates masked (pages); larger ones streamed."""


def stream_digest(p: Path) -> bytes:
    """SHA-256 of a link's target text (never followed) or of a regular file read in chunks."""
    if p.is_symlink():
        return hashlib.sha256(b"link\0" + os.fsencode(os.readlink(p))).digest()
    return bytes.fromhex(sha256_of_file(p))


def inputs_digest(docs: Path, date: str | tuple[str, ...], extra_files: dict[str, str], site_url: str | None,
                   known: dict[str, str] | None = None) -> str:
    """Everything mkdocs turns into the site: the generated pages and files (build date masked), the
    site's sources (mkdocs.yml, templates, hand-written pages: `paths.source_files`), the extra files,
    the site URL and the versions of mkdocs and report_builder (``known``: see `tree_digest`)."""
    import mkdocs

    from report_builder import __version__
    from report_builder.site.paths import RESOURCES, source_files

    h = hashlib.sha256()
    dates = [d for d in ((date,) if isinstance(date, str) else date) if d]
    for part in (tree_digest(docs, date, known), files_digest(source_files(RESOURCES)), json.dumps(
            {k: functools.reduce(lambda t, d: t.replace(d, "\0DATE\0"), dates, v) for k, v in sorted(extra_files.items())}),
            str(site_url), mkdocs.__version__, __version__):
        h.update(str(part).encode("utf-8") + b"\0")
    return h.hexdigest()


def can_keep(out_dir: Path, docs_dir: Path | None, record_path: Path, inputs: str) -> str | None:
    """The date of the previous build when the existing site can be kept: the same inputs, and the
    site (and generated docs) still exactly as that build left them (not edited, not deleted)."""
    record = manifest.read_manifest(record_path)
    if not record or record.get("inputs") != inputs or not (out_dir / guard.SITE_MARKER).is_file():
        return None
    if tree_digest(out_dir) != record.get("site"):
        return None
    if docs_dir is not None and tree_digest(docs_dir, tuple(record.get("dates") or [str(record.get("date") or "")])
                                             ) != record.get("docs"):
        return None
    return str(record.get("date") or "an earlier build")
