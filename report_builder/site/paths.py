"""Where the site's inputs live: the base mkdocs.yml, the Jinja templates and the hand-written pages.

They ship inside the package (``report_builder/site/resources/``) and are found through
``importlib.resources``, so an installed wheel renders the site from any working directory; nothing
is read from a checkout's root. ``REPORT_BUILDER_RESOURCES`` points at another folder of the same
layout (a customised copy). Pitfall: mkdocs and Jinja need real files, so the package must be
installed unzipped (pip always does; a zipapp is not supported).
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


def resources_dir() -> Path:
    """The folder holding ``mkdocs.yml``, ``templates/`` and ``docs/``."""
    override = os.environ.get("REPORT_BUILDER_RESOURCES")
    if override:
        return Path(override)
    return Path(str(resources.files("report_builder.site") / "resources"))


RESOURCES = resources_dir()
MKDOCS_YML = RESOURCES / "mkdocs.yml"
TEMPLATES_DIR = RESOURCES / "templates"
HANDWRITTEN_DOCS = RESOURCES / "docs"
