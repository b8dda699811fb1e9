"""K24 figures built from the synthetic fixtures: tables, readings, widgets and layout-specific behaviour.

The per-figure contract is generated from the registry in `tests/figures/test_contract.py`.
"""
from __future__ import annotations

import dataclasses
import json

import altair as alt
import pytest

from report_builder import schema
from report_builder.figures.k24 import SPECS, maps
from report_builder.figures.spec import FigureContext, NotConfigured
from tests.fixtures.k24_tables import DATASETS, k24_fixture_roles, k24_fixture_tables

SCHEMA = {"models": schema.MODELS, **schema.K24}


@pytest.fixture(scope="module")
def tables():
    return k24_fixture_tables()


@pytest.fixture(scope="module")
def ctx(tables):
    return FigureContext(tables=tables, roles=k24_fixture_roles())


@pytest.fixture(scope="module")
def results(ctx):
    return {s.id: s.build(ctx) for s in SPECS}


def test_fixture_schema():
    t = k24_fixture_tables(seed=1)
    for name, cols in SCHEMA.items():
        assert list(t[name].columns) == cols, name
        assert len(t[name]) > 0
    assert set(t["models"].model) == {"tiny-bert", "tiny-llama"}
    assert set(t["k24_ctx"].dataset) == set(DATASETS)
    assert t["k24_ctx"].change.between(0, 2).all()
    assert t["k24_maps"].value.between(0, 1).all()
    causal = t["k24_maps"][t["k24_maps"].model == "tiny-llama"]
    assert (causal.j <= causal.i).all()


def test_analysis_tables_exist(tables):
    for s in SPECS:
        assert set(s.analysis) <= set(tables), s.id


def test_ffamp_top_table(results, tables):
    r = results["k24-ffamp-top"]
    assert r.table is None and len(r.data) == len(tables["k24_ffamp_pairs"])  # every pair in the CSV
    d = r.chart.to_dict()
    assert {p["name"] for p in d["params"]} == {"layer_top", "model_top", "dataset_top"}
    table = d["vconcat"][0]
    assert table["height"] == 20 * 10  # one (model, dataset, layer) at a time: 10 rows, not every layer's
    assert "layer_top" in table["title"]["text"]["expr"]


def test_cumulative_reading_reports_cancellation(results):
    assert "largely cancel" in results["k24-ctx-cumulative"].reading


def test_maps_explorer_has_widgets(results):
    with alt.data_transformers.enable("default", max_rows=None):
        spec = results["k24-maps"].chart.to_dict()
    params = [p for p in spec.get("params", [])] + [p for v in spec.get("vconcat", []) for p in v.get("params", [])]
    inputs = {p["bind"].get("input") for p in params if "bind" in p}
    assert {"range", "select"} <= inputs


@pytest.mark.parametrize("fid", ["k24-ctx-cumulative", "k24-ffamp-categories", "k24-res-norms"])
def test_compiles_to_svg(results, fid):
    vlc = pytest.importorskip("vl_convert")
    with alt.data_transformers.enable("default", max_rows=None):
        svg = vlc.vegalite_to_svg(results[fid].chart.to_dict())
    assert svg.lstrip().startswith("<svg")


def test_fig1_with_encoder_only(tables):
    only = {k: (v[v.model == "tiny-bert"] if "model" in v.columns else v) for k, v in tables.items()}
    roles = dataclasses.replace(k24_fixture_roles(), primary_causal=None)
    r = maps.build_fig1(FigureContext(tables=only, roles=roles))
    assert r.models == ("tiny-bert",) and "pre-LN" in r.reading
    with pytest.raises(NotConfigured):
        maps.build_fig1(FigureContext(tables=only, roles=dataclasses.replace(roles, primary_encoder=None)))


def test_maps_explorer_cuts_long_examples(tables, ctx):
    r = maps.build_maps(ctx, max_tokens=8)
    assert r.data.i.max() < 8 and r.data.j.max() < 8
    assert "first 8 tokens" in r.reading


def test_cancellation_reading_computes_each_components_direction():
    """LN adding change back after RES is said so (the numbers decide the verb, never the paper)."""
    from report_builder import schema
    from report_builder.stats.headlines import Cancellation
    from report_builder.figures.k24 import readings

    lay = schema.POST_LN
    path = {"ATB": 0.0, "ATBFF": 0.042, "ATBFFRES": 0.030, "ATBFFRESLN": 0.052}
    text = readings.cancellation_reading([("m", lay, "wiki", Cancellation("m", 0.042, 0.052, lay), path)])
    assert "RES undoes part of it (0.042 → 0.030)" in text
    assert "LN adds change (0.030 → 0.052)" in text
    assert "RES and LN together do not undo it" in text


def test_ffamp_categories_zero_counts_are_no_data(results):
    d = results["k24-ffamp-categories"].chart.to_dict()
    text = json.dumps(d)
    assert "datum.top_count == 0" in text and "no data" in text


@pytest.mark.parametrize("layout", ["sandwich", "post"])
def test_fig1_with_a_primary_causal_model_of_another_layout_says_nothing_is_missing(tables, layout):
    """`build --model SmolLM2-135M=<a Gemma-2 or OPT-350m folder>`: both roles were configured and drawn, yet the
    reading said "No pre-LN model is configured ... (add a model with role primary_causal)" (missing was
    decided by layout, not by role)."""
    t = dict(tables)
    t["models"] = tables["models"].assign(
        ln_position=[layout if m == "tiny-llama" else p for m, p in zip(tables["models"].model,
                                                                          tables["models"].ln_position)])
    r = maps.build_fig1(FigureContext(tables=t, roles=k24_fixture_roles()))
    assert r.models == ("tiny-bert", "tiny-llama")
    assert "is configured" not in r.reading and "missing_config" not in r.params, r.reading


def _table_svg(pairs) -> str:
    """The k24-ffamp-top table drawn as vl-convert draws chart.svg (the widgets at their first values)."""
    from report_builder.figures.charts import points

    vlc = pytest.importorskip("vl_convert")
    models, datasets = sorted(pairs["model"].unique()), sorted(pairs["dataset"].unique())
    ch = points.top_pairs_table(pairs, models=models, datasets=datasets, per_layer=10)
    return ch, vlc.vegalite_to_svg(ch.to_dict())


def test_ffamp_top_title_states_the_rows_shown_not_a_constant(tables):
    """A build with top_k 5 (or a layer keeping fewer pairs) said 'Top 10' over 5 rows."""
    p = tables["k24_ffamp_pairs"]
    five = p[p["rank"] <= 5]
    ch, svg = _table_svg(five)
    assert "Top 5 FF-amplified pairs" in svg and "Top 10" not in svg
    assert ch.to_dict()["height"] == 20 * 5
    # the layer shown first (the slider's middle value) keeps only 3 pairs: the title says 3
    m, ds = sorted(p["model"].unique())[0], sorted(p["dataset"].unique())[0]
    mid = min((int(p["layer"].max()) + 1) // 2 + 1, int(p[p["model"] == m]["layer"].max()) + 1) - 1  # slider's start, 0-based
    few = five[~((five["model"] == m) & (five["dataset"] == ds) & (five["layer"] == mid) & (five["rank"] > 3))]
    assert "Top 3 FF-amplified pairs" in _table_svg(few)[1]


def test_ffamp_top_token_text_is_set_in_a_font_with_its_marks(tables):
    """The pair and context columns (▁, ⟦…⟧) were set in the theme's Arial stack: vl-convert drew chart.png's
    context column in a serif fallback font, as Arial/Liberation Sans have no ⟦."""
    from report_builder.figures import theme

    ch, _ = _table_svg(tables["k24_ffamp_pairs"])
    fonts = {lay["mark"]["x"]: lay["mark"].get("font") for lay in ch.to_dict()["layer"] if lay["mark"].get("baseline") == "middle"}
    assert fonts[40] == fonts[420] == theme.TOKEN_FONT  # pair, context
    assert theme.TOKEN_FONT.startswith("'DejaVu Sans'")


def test_ffamp_top_context_keeps_both_marked_tokens(tables):
    """The table cut each pair's context to its first 64 characters, so where the two tokens lie farther apart
    (the default build's 'workers ← rocker', ranks 1-3 of MiniLM-L6 layer 6) only the query token was marked
    and the source token was cut away, though the caption promises '⟦…⟧ marks both tokens'. The context now
    keeps both marks, eliding the text between them (…) where they do not fit in one window."""
    from report_builder.figures.charts import points

    p = tables["k24_ffamp_pairs"]
    far = ("…hey believe that ⟦workers⟧' organisations (the organisations that struggle against the wage "
           "system, which, in anarcho-syndicalist theory, will eventually form the basis of a new society) "
           "should be run by the ⟦rocker⟧ himself, and more text after it…")
    p = p.assign(context=[far] + list(p["context"].iloc[1:]))
    ch = points.top_pairs_table(p, models=sorted(p["model"].unique()), datasets=sorted(p["dataset"].unique()),
                                per_layer=10)
    spec = ch.to_dict()
    values = spec["datasets"][spec["layer"][0]["data"]["name"]]
    rows = json.loads(values) if isinstance(values, str) else values
    shown = [r["context"] for r in rows if "workers" in r["context"] or "rocker" in r["context"]]
    assert shown, rows[:2]
    for text in shown:
        assert "⟦workers⟧" in text and "⟦rocker⟧" in text, text
        assert len(text) <= 64, (len(text), text)
    for text in (r["context"] for r in rows):
        assert len(text) <= 64 and text.count("⟦") == text.count("⟧"), text
