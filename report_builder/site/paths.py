"""Where the site's sources live: the base ``mkdocs.yml``, the Jinja ``templates/`` and the hand-written ``docs/``.

In the repository they sit at its top level, the one copy. The wheel carries them inside the package
as ``report_builder/_site/`` (hatchling ``force-include``, see pyproject.toml), found through
``importlib.resources``, so an installed wheel renders the site from any working directory. The
folder is chosen once, at import:

1. ``REPORT_BUILDER_RESOURCES``: another folder of the same layout (a customised copy);
2. the checkout the package was imported from (an editable install, or ``PYTHONPATH``): its top-level
   files, so editing ``templates/figure.md.j2`` changes the next build;
3. the packaged copy (an installed wheel).

Pitfall: an editable install also puts copies of the sources into site-packages (hatchling installs
forced files in editable mode too); they go stale and are never read, because the checkout wins.
mkdocs and Jinja need real files, so the package must be installed unzipped (pip always does).
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

ENV = "REPORT_BUILDER_RESOURCES"
PACKAGED = "_site"
"""The sources' folder inside the installed package (``report_builder/_site``)."""


def checkout_root() -> Path | None:
    """The repository the package was imported from (the folder above ``report_builder/`` holding
    ``mkdocs.yml`` and ``templates/``), or None for an installed package."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "mkdocs.yml").is_file() and (root / "templates").is_dir() else None


def resources_dir() -> Path:
    """The folder holding ``mkdocs.yml``, ``templates/`` and ``docs/`` (see the module docstring)."""
    override = os.environ.get(ENV)
    if override:
        return Path(override)
    return checkout_root() or Path(str(resources.files("report_builder") / PACKAGED))


def source_files(root: Path) -> dict[str, Path]:
    """Relative path -> file of every source that shapes the pages under ``root``: ``mkdocs.yml``,
    every file under ``templates/`` and the hand-written pages (``docs/*.md`` fragments and the
    ``docs/guide/*.md`` pages; not the images, examples or generated pages in docs' other
    subfolders, which never reach the site)."""
    files = {"mkdocs.yml": root / "mkdocs.yml"} if (root / "mkdocs.yml").is_file() else {}
    for p in sorted((root / "templates").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            files[p.relative_to(root).as_posix()] = p
    docs = root / "docs"
    for p in sorted([*docs.glob("*.md"), *docs.glob("guide/*.md")]) if docs.is_dir() else []:
        if p.is_file():
            files[p.relative_to(root).as_posix()] = p
    return dict(sorted(files.items(), key=lambda kv: kv[0].split("/")))  # the order of sorted paths


RESOURCES = resources_dir()
MKDOCS_YML = RESOURCES / "mkdocs.yml"
TEMPLATES_DIR = RESOURCES / "templates"
HANDWRITTEN_DOCS = RESOURCES / "docs"


def guide_pages() -> list[str]:
    """The standalone hand-written pages, ``docs/guide/<name>.md`` (the site's Guide section: each is
    published as ``guide/<name>.md`` and listed in ``mkdocs.yml``'s nav), sorted by name."""
    d = HANDWRITTEN_DOCS / "guide"
    return sorted(p.name for p in d.glob("*.md") if p.is_file()) if d.is_dir() else []
