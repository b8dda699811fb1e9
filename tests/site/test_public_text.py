"""What a reader of the site reads names nothing the site does not publish: the project's internal
specification ("SPEC §1", "SPEC §8") is not on the site, so a page, a figure's caption or a docstring
the API page renders that cites it leaves the reader with a dangling reference (the API page's
``decompose`` and the Performance guide did)."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from report_builder.figures.registry import all_figures
from report_builder.site.paths import TEMPLATES_DIR

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(r"\bSPEC\s*§")


def _api_objects():
    """Every object the API page renders (``::: dotted.name``), with its public members."""
    text = (Path(TEMPLATES_DIR) / "pages" / "api.md.j2").read_text(encoding="utf-8")
    for dotted in re.findall(r"^::: *([\w.]+)", text, re.M):
        module, _, name = dotted.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            obj = importlib.import_module(dotted)
        yield dotted, obj
        for member, value in inspect.getmembers(obj):
            if not member.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value)
                                               or isinstance(value, property)):
                yield f"{dotted}.{member}", value


def test_api_docstrings_cite_no_internal_spec():
    found = [name for name, obj in _api_objects() if INTERNAL.search(inspect.getdoc(obj) or "")]
    assert not found, found


def test_pages_and_captions_cite_no_internal_spec():
    sources = sorted((ROOT / "docs").rglob("*.md")) + sorted(Path(TEMPLATES_DIR).rglob("*.j2"))
    assert len(sources) > 10
    found = [str(p.relative_to(ROOT)) for p in sources if INTERNAL.search(p.read_text(encoding="utf-8"))]
    found += [s.id for s in all_figures() if INTERNAL.search(f"{s.title} {s.caption}")]
    assert not found, found
