"""The contract every registered figure keeps, generated from the figure registry (no hand lists).

Per figure and fixture context: the builder returns a `FigureResult` whose kind matches its
declaration and whose Vega-Lite spec validates, or raises `NotConfigured` with a pasteable YAML entry;
with no result tables at all it raises `NotConfigured`; its id is an anchor-safe permanent name and
the figure template renders that anchor; its paper, tables and template are declared. Every column of
its data that holds a mixing ratio, a map value or a share declares its unit (`FigureSpec.units`), and
the ``data.csv`` header names it (SPEC §8: the unit is in the column name).
"""
from __future__ import annotations

import csv
import dataclasses
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
from report_builder.site.figure_files import csv_frame
from report_builder.citations.version_files import csv_text
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


MEASURED = ("value", "amp")
"""Column names that always hold a measure with a unit (a map value, a mixing ratio, an FF-amp)."""
RATIO_STATISTICS = ("value", "mean", "max", "min", "sd")
"""Statistics of the mixing ratio (percent) in a figure that reads ``k21_tokens``."""


def required_units(spec, data: pd.DataFrame) -> dict[str, str | None]:
    """The columns of a figure's data that must declare a unit, with the unit when it is known (None: any)."""
    want: dict[str, str | None] = {c: None for c in MEASURED if c in data.columns}
    for table in spec.analysis:  # passed through from a result table: that table's unit
        want.update({c: u for c, u in schema.UNITS.get(table, {}).items() if c in data.columns})
    if "k21_tokens" in spec.analysis:
        want.update({c: schema.PERCENT for c in RATIO_STATISTICS if c in data.columns})
    want.update({c: schema.PERCENT for c in schema.K21_METHODS if c in data.columns})  # a method's ratio
    return want


def check_units(spec, r: FigureResult) -> None:
    """Every measured column declares its unit (the right one where known), every declared column
    exists, and the ``data.csv`` header (the site's one writer) names it ``<name> (<unit>)``."""
    for col, unit in required_units(spec, r.data).items():
        assert col in spec.units, f"{spec.id}: column {col!r} of its data declares no unit"
        assert unit is None or spec.units[col] == unit, f"{spec.id}: {col!r} is in {unit!r}, not {spec.units[col]!r}"
    assert set(spec.units) <= set(r.data.columns), f"{spec.id}: units declared for absent columns"
    assert set(spec.units.values()) <= set(schema.UNIT_TAGS), spec.units
    header = next(csv.reader([csv_text(csv_frame(r.data.head(2), spec.units)).splitlines()[0]]))
    for col, unit in spec.units.items():
        assert f"{col} ({schema.UNIT_TAGS[unit]})" in header and col not in header, (spec.id, header)


@pytest.mark.parametrize("spec,name", CASES, ids=[f"{s.id}@{n}" for s, n in CASES])
def test_builds_from_fixture_or_says_what_to_configure(spec, name):
    r = _build(spec, name)
    if isinstance(r, NotConfigured):
        check_entry(r)
    else:
        check_result(spec, r)
        check_units(spec, r)
        models = set(context(name).tables["models"]["model"])
        assert set(r.models) <= models, f"{spec.id} names models outside the tables"


def test_the_units_check_can_fail():
    """A figure without its declaration, with a misspelt column or the wrong unit is caught; the units
    of a ratio table, a map and a category figure are those the papers' readers expect."""
    by_id = {s.id: s for s in FIGURES}
    fig3, tab2 = by_id["k21-fig3"], by_id["k21-tab2"]
    r = fig3.build(context("k21-plain"))
    check_units(fig3, r)
    for bad in ({}, {"valeu": schema.PERCENT}, {"value": schema.ROW_NORMALISED}, {"value": "percent"}):
        with pytest.raises(AssertionError):
            check_units(dataclasses.replace(fig3, units=bad), r)
    t = tab2.build(context("k21-plain"))
    with pytest.raises(AssertionError, match="'sd'|'max'|'min'|'mean'"):
        check_units(dataclasses.replace(tab2, units={"mean": schema.PERCENT}), t)
    assert {c: schema.UNIT_TAGS[u] for c, u in tab2.units.items()} == {"mean": "%", "max": "%", "min": "%"}
    assert by_id["k24-maps"].units == {"value": schema.ROW_NORMALISED}
    assert by_id["k21-fig1"].units == {"value": schema.K21_MAP_VALUE}
    assert by_id["k21-fig4"].units == {"ATTNRESLN-N": schema.PERCENT}
    assert not by_id["k21-tab3"].units and not by_id["k24-ctx-ff"].units  # Spearman ρ, 1 − ρ: no unit


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
