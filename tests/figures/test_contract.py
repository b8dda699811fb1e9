"""The contract every registered figure keeps, generated from the figure registry (no hand lists).

Per figure and fixture context: the builder returns a `FigureResult` whose kind matches its
declaration and whose Vega-Lite spec validates, or raises `NotConfigured` with a pasteable YAML entry;
with no result tables at all it raises `NotConfigured`; its id is an anchor-safe permanent name and
the figure template renders that anchor; its paper, tables and template are declared.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import altair as alt
import pandas as pd
import pytest
import yaml

from report_builder import papers, schema
from report_builder.config import ROLES
from report_builder.figures.registry import PLUGINS, all_figures
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured
from report_builder.site import pages
from report_builder.site.paths import TEMPLATES_DIR
from tests.fixtures.contexts import PAPER_CONTEXTS, context

FIGURES = all_figures()
CASES = [(s, name) for s in FIGURES for name in PAPER_CONTEXTS[s.paper]]
MAX_SPEC_BYTES = 2_000_000
ANCHOR = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")


def _build(spec, name):
    try:
        return spec.build(context(name))
    except NotConfigured as exc:
        return exc


def check_entry(exc: NotConfigured) -> None:
    """A NotConfigured carries a message and a YAML entry of known models/datasets keys and roles."""
    assert str(exc)
    doc = yaml.safe_load(exc.config_entry)
    assert isinstance(doc, dict) and doc and set(doc) <= {"models", "datasets"}
    for m in doc.get("models", []):
        assert set(m) == {"name", "source", "role"} and m["role"] in ROLES
    for d in doc.get("datasets", []):
        assert "id" in d and isinstance(d.get("n", 1), int)


def check_result(spec, r: FigureResult) -> None:
    """A built figure: data, reading, a kind-consistent output and a valid, bounded spec."""
    assert isinstance(r, FigureResult)
    assert isinstance(r.data, pd.DataFrame) and len(r.data)
    assert r.reading
    if spec.kind == "table":
        assert isinstance(r.table, pd.DataFrame) and len(r.table)
    if spec.kind == "chart":
        assert r.chart is not None
    if spec.kind == "diagram":
        assert r.chart is not None or r.svg is not None
        assert "svg" not in r.params  # a drawing is no parameter (provenance would list it)
        if r.svg is not None:
            ET.fromstring(r.svg)  # well-formed SVG
    if r.chart is not None:
        with alt.data_transformers.enable("default", max_rows=None):
            d = r.chart.to_dict(validate=True)
        assert "$schema" in d and len(json.dumps(d)) < MAX_SPEC_BYTES
    if r.paper is not None:
        assert len(r.paper)
    json.dumps(r.params, default=str)


@pytest.mark.parametrize("spec,name", CASES, ids=[f"{s.id}@{n}" for s, n in CASES])
def test_builds_from_fixture_or_says_what_to_configure(spec, name):
    r = _build(spec, name)
    if isinstance(r, NotConfigured):
        check_entry(r)
    else:
        check_result(spec, r)
        models = set(context(name).tables["models"]["model"])
        assert set(r.models) <= models, f"{spec.id} names models outside the tables"


@pytest.mark.parametrize("spec", [s for s in FIGURES if s.analysis], ids=lambda s: s.id)
def test_no_tables_is_not_configured(spec):
    roles = context(PAPER_CONTEXTS[spec.paper][-1]).roles
    with pytest.raises(NotConfigured) as ei:
        spec.build(FigureContext(tables={}, roles=roles))
    check_entry(ei.value)


def test_every_paper_context_builds_something():
    for paper, names in PAPER_CONTEXTS.items():
        built = [s.id for s, n in CASES if s.paper == paper and n == names[-1]
                 and not isinstance(_build(s, n), NotConfigured)]
        assert built, f"no {paper} figure builds from its fullest fixture"


@pytest.mark.parametrize("spec", FIGURES, ids=lambda s: s.id)
def test_declaration_and_anchor(spec):
    assert ANCHOR.match(spec.id), spec.id
    assert spec.id.startswith(spec.paper.lower() + "-")
    assert spec.paper in papers.PAPERS
    assert spec.kind in ("chart", "table", "diagram")
    assert spec.title and len(spec.caption) > 40 and callable(spec.build)
    assert set(spec.analysis) <= set(schema.TABLES), spec.analysis
    assert (TEMPLATES_DIR / spec.template).is_file()
    from report_builder.site.build import Section, _NotConfigured

    text = pages.environment().get_template(spec.template).render(
        fig=spec, s=Section(not_configured=_NotConfigured("not here", "models: []\n")), h="##", roles=None)
    assert "{#" + spec.id + " }" in text and f">{spec.id}<" in text


def test_registry_ids_unique_and_grouped_by_paper():
    ids = [s.id for s in FIGURES]
    assert len(ids) == len(set(ids))
    assert ids == [s.id for p in PLUGINS for s in p.SPECS]


def test_figures_and_fixtures_do_not_import_torch():
    code = ("import sys, report_builder.figures.registry, tests.fixtures.contexts, report_builder.papers; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_base_module_imports_no_plugin():
    """No registration cycle: the base module loads without any paper package; the registry loads them."""
    code = ("import sys, report_builder.figures.spec; "
            "assert not any(m.startswith(('report_builder.figures.k21', 'report_builder.figures.k24')) "
            "for m in sys.modules), 'spec imported a paper package'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_config_checks_figure_ids_against_the_registry():
    from report_builder import config
    from report_builder.errors import ConfigError
    from report_builder.housekeeping import check_ids

    base = {"models": [{"name": "m", "source": "minilm", "role": "primary_encoder"}], "datasets": [{"id": "wiki"}]}
    assert check_ids(config.from_dict({**base, "figures": [FIGURES[0].id]})).figures[0] == FIGURES[0].id
    with pytest.raises(ConfigError, match="unknown figure id"):
        check_ids(config.from_dict({**base, "figures": ["k21-no-such-figure"]}))
