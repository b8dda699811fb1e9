"""Where the site's inputs live: mkdocs.yml, templates/ and hand-written docs/ at the repository root.

Pitfall: these are repository files, not package data; the renderer runs from a checkout
(``make report``). ``REPORT_BUILDER_ROOT`` overrides the root for unusual layouts.
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(os.environ.get("REPORT_BUILDER_ROOT", Path(__file__).resolve().parents[2]))
MKDOCS_YML = ROOT / "mkdocs.yml"
TEMPLATES_DIR = ROOT / "templates"
HANDWRITTEN_DOCS = ROOT / "docs"
