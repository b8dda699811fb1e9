"""Golden Vega-Lite specs: every figure id, built from the fixed fixture tables, must give the spec and
reading committed under ``tests/figures/golden/<id>.json``; an unintended chart change fails here.

After an intended change, regenerate with ``UPDATE_GOLDEN=1 pytest tests/test_golden_specs.py`` and
review the diff like code. A golden replaces each inline dataset by its row count, the SHA-256 of its
canonical JSON and its first two rows, so the files stay small and their diffs readable while any
data change still fails.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.fixtures.k21_tables import fixture_roles, k21_fixture_tables
from tests.fixtures.k24_tables import k24_fixture_roles, k24_fixture_tables
from report_builder.figures.registry import all_figures
from report_builder.figures.spec import FigureContext, NotConfigured
from report_builder.site.build import figure_title
from report_builder.site.figure_files import export_spec

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def contexts() -> dict[str, FigureContext]:
    """The fixed fixtures: every K21 id is configured (variants, seed group, paper preset)."""
    return {
        "K21": FigureContext(tables=k21_fixture_tables(0, n_variants=3, n_seeds=3),
                             roles=fixture_roles(3, 3, "paper")),
        "K24": FigureContext(tables=k24_fixture_tables(0), roles=k24_fixture_roles()),
    }


def _digest(values) -> dict:
    text = values if isinstance(values, str) else json.dumps(values, sort_keys=True, separators=(",", ":"))
    rows = values if isinstance(values, list) else None
    return {"rows": len(rows) if rows is not None else None,
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "head": rows[:2] if rows is not None else text[:200]}


def _summarise(node):
    """The spec with every inline dataset replaced by its digest."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "values" and isinstance(v, (list, str)):
                out[k] = _digest(v)
            elif k == "datasets" and isinstance(v, dict):
                out[k] = {name: _digest(vals) for name, vals in v.items()}
            else:
                out[k] = _summarise(v)
        return out
    if isinstance(node, list):
        return [_summarise(v) for v in node]
    return node


def golden_record(spec_id: str, ctx: FigureContext) -> dict:
    """What is compared for one figure: its summarised spec and its reading (or why it is not built)."""
    spec = next(s for s in all_figures() if s.id == spec_id)
    try:
        result = spec.build(ctx)
    except NotConfigured as exc:
        return {"id": spec_id, "not_configured": str(exc)}
    table = result.table if result.table is not None else (result.data if result.chart is None else None)
    vl = export_spec(result.chart, table, figure_title(spec, result, ctx.tables))
    return {"id": spec_id, "reading": result.reading, "spec": _summarise(vl)}


@pytest.mark.parametrize("spec_id", [s.id for s in all_figures()])
def test_spec_matches_golden(spec_id, contexts):
    paper = "K21" if spec_id.startswith("k21-") else "K24"
    record = golden_record(spec_id, contexts[paper])
    text = json.dumps(record, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    path = GOLDEN / f"{spec_id}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"no golden for {spec_id}: run UPDATE_GOLDEN=1 pytest {Path(__file__).name}"
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert json.loads(text) == expected, (
        f"{spec_id}: spec or reading differs from tests/figures/golden/{spec_id}.json; if intended, "
        f"regenerate with UPDATE_GOLDEN=1 and review the diff")


def test_no_stale_goldens():
    ids = {s.id for s in all_figures()}
    stale = sorted(p.stem for p in GOLDEN.glob("*.json") if p.stem not in ids)
    assert not stale, f"goldens for ids that no longer exist: {stale}"
