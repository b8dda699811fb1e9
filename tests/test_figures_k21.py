"""Every K21 figure, built from the synthetic fixture tables: registered, validated, value-checked."""
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
import yaml

from report_builder.figures import k21, reported
from report_builder.figures.fixtures import k21_fixture_tables, fixture_roles
from report_builder.figures.spec import FigureContext, FigureResult, NotConfigured, Roles, _REGISTRY
from report_builder import schema

EXPECTED_IDS = (
    ["k21-fig1", "k21-fig2", "k21-tab1", "k21-tab2", "k21-fig3", "k21-tab3", "k21-fig4", "k21-tab4", "k21-tab5"]
    + [f"k21-fig{k}" for k in range(5, 12)] + ["k21-tab6"] + [f"k21-fig{k}" for k in range(12, 15)]
    + ["k21-tab7"] + [f"k21-fig{k}" for k in range(15, 18)] + ["k21-tab8", "k21-tab9", "k21-tab10", "k21-tab11"]
)
RATIO_COLS = {"value", "mean", "max", "min", "ATTN-W", "ATTN-N", "ATTNRES-W", "ATTNRES-N", "ATTNRESLN-N"}
RHO_COLS = {"rho_all", "rho_no_special", "rho_all_mean", "rho_no_special_mean"}
MAX_SPEC_BYTES = 2_000_000


@pytest.fixture(scope="module")
def plain_ctx():
    return FigureContext(tables=k21_fixture_tables(0), roles=fixture_roles())


@pytest.fixture(scope="module")
def full_ctx():
    return FigureContext(tables=k21_fixture_tables(0, n_variants=3, n_seeds=3), roles=fixture_roles(3, 3, "paper"))


def test_all_k21_ids_registered_in_paper_order():
    assert list(k21.K21_IDS) == EXPECTED_IDS
    assert len(set(EXPECTED_IDS)) == 28
    registered = [i for i in _REGISTRY if i.startswith("k21-")]
    assert registered == EXPECTED_IDS
    for s in k21.SPECS:
        assert s.paper == "K21" and s.title and len(s.caption) > 60 and callable(s.build)
        assert s.kind in ("chart", "table", "diagram")
        assert all(a in {"k21_tokens", "k21_freq", "k21_expansion", "k21_maps", "models", "datasets"}
                   for a in s.analysis)


def test_fixtures_are_fast_and_schema_exact():
    t = time.perf_counter()
    tables = k21_fixture_tables(1)
    assert time.perf_counter() - t < 2.0  # ~0.2 s; generous bound for slow CI
    cols = schema.K21
    for name, c in cols.items():
        assert list(tables[name].columns) == c, name
    assert {"model", "source", "ln_position", "norm", "d_model", "layers", "heads", "kv_heads", "ff_size"} <= set(
        tables["models"].columns)
    assert {"dataset", "model", "n_samples", "mean_tokens", "domain"} <= set(tables["datasets"].columns)
    tok = tables["k21_tokens"]
    assert tok[list(k21.METHODS)].stack().between(0, 100).all()
    assert set(tok["category"]) <= {"Normal", "[MASK]", "[CLS]", "[SEP]"}
    assert (tables["k21_freq"]["freq_rank"] >= 1).all()


def _check_entry(e: NotConfigured):
    doc = yaml.safe_load(e.config_entry)
    assert isinstance(doc, dict) and set(doc) <= {"models", "datasets"} and doc
    for m in doc.get("models", []):
        assert set(m) == {"name", "source", "role"}
        assert m["role"] in {"primary_encoder", "primary_causal", "variant", "seed_group"}
    for d in doc.get("datasets", []):
        assert "id" in d and isinstance(d.get("n", 1), int)
    assert str(e)


def _check_values(df: pd.DataFrame):
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            continue
        v = df[c].dropna()
        if c in RATIO_COLS and "expansion_rate" not in df.columns:
            assert v.between(0, 100).all(), c
        if c in RHO_COLS:
            assert v.between(-1, 1).all(), c


def _check_result(fid: str, r: FigureResult):
    assert isinstance(r, FigureResult)
    assert isinstance(r.data, pd.DataFrame) and len(r.data)
    assert r.reading
    spec = k21.SPECS[k21.K21_IDS.index(fid)]
    if spec.kind == "table":
        assert isinstance(r.table, pd.DataFrame) and len(r.table)
    if spec.kind == "chart":
        assert r.chart is not None
    if spec.kind == "diagram":
        ET.fromstring(r.params["svg"])  # well-formed SVG
    if r.chart is not None:
        d = r.chart.to_dict()  # validates against the Vega-Lite schema
        assert len(json.dumps(d)) < MAX_SPEC_BYTES
    _check_values(r.data)
    if r.table is not None:
        _check_values(r.table.rename(columns=str.lower))
    if r.paper is not None:
        assert len(r.paper)


@pytest.fixture(scope="module")
def built(plain_ctx, full_ctx):
    """Every figure built once per context: ``{(which, id): FigureResult | NotConfigured}``."""
    out = {}
    for which, ctx in (("plain", plain_ctx), ("full", full_ctx)):
        for s in k21.SPECS:
            try:
                out[which, s.id] = s.build(ctx)
            except NotConfigured as e:
                out[which, s.id] = e
    return out


@pytest.mark.parametrize("fid", EXPECTED_IDS)
@pytest.mark.parametrize("which", ["plain", "full"])
def test_build_from_fixtures(fid, which, built):
    r = built[which, fid]
    if isinstance(r, NotConfigured):
        _check_entry(r)
    else:
        _check_result(fid, r)


def test_expected_not_configured(built):
    """Plain roles: no variants, no seed group, two datasets -> these ids (and only these) are NotConfigured."""
    def failing(which):
        return [s.id for s in k21.SPECS if isinstance(built[which, s.id], NotConfigured)]

    plain = failing("plain")
    assert plain == ["k21-tab5"] + [f"k21-fig{k}" for k in range(5, 12)] + ["k21-fig13", "k21-fig14", "k21-tab7",
                                                                          "k21-fig15", "k21-fig16", "k21-fig17",
                                                                          "k21-tab11"]
    assert failing("full") == [f"k21-fig{k}" for k in range(8, 12)] + ["k21-fig13", "k21-fig14"]


def test_no_primary_encoder_raises_with_entry():
    tables = k21_fixture_tables(0)
    roles = Roles(primary_encoder=None, primary_causal="tiny-llama", encoders=("tiny-llama",), variants=(),
                  seed_group=(), datasets=("wiki",))
    ctx = FigureContext(tables=tables, roles=roles)
    for fid in ("k21-fig1", "k21-tab2", "k21-fig3", "k21-tab3", "k21-fig4", "k21-tab6", "k21-tab10"):
        with pytest.raises(NotConfigured) as ei:
            _REGISTRY[fid].build(ctx)
        _check_entry(ei.value)
    seed = pytest.raises(NotConfigured, _REGISTRY["k21-tab7"].build, ctx).value
    assert len(yaml.safe_load(seed.config_entry)["models"]) == 25


def test_missing_rows_are_not_configured_not_empty_charts(plain_ctx):
    tables = dict(plain_ctx.tables)
    tables["k21_tokens"] = tables["k21_tokens"][tables["k21_tokens"]["model"] != "tiny-bert"]
    with pytest.raises(NotConfigured):
        k21.build_fig3(FigureContext(tables=tables, roles=plain_ctx.roles))


@pytest.mark.parametrize("fid", ["k21-fig1", "k21-fig3", "k21-fig4", "k21-tab8"])
def test_compiles_to_svg(fid, built):
    vl_convert = pytest.importorskip("vl_convert")
    r = built["full", fid]
    svg = vl_convert.vegalite_to_svg(r.chart.to_json())
    assert svg.lstrip().startswith("<svg") and ("<rect" in svg or "<path" in svg)


def test_fig1_layout_and_labels(built):
    r = built["plain", "k21-fig1"]
    d = r.chart.to_dict()
    assert [p["name"] for p in d["params"]] == ["layer_sel"]
    assert len(d["hconcat"]) == 2 and [c["title"] for c in d["hconcat"]] == ["ATTN-N", "ATTNRESLN-N"]
    x = d["hconcat"][0]["encoding"]["x"]
    assert x["sort"][:3] == ["0:[CLS]", "1:the", "2:man"]  # pos:token labels in position order
    assert len(set(x["sort"])) == len(x["sort"])
    assert r.params["tokens"] == 60 and r.params["layers"] == 6


def test_fig3_fixed_scale_and_panels(built):
    r = built["plain", "k21-fig3"]
    d = r.chart.to_dict()
    assert d["facet"]["sort"] == list(k21.METHODS)
    color = d["spec"]["layer"][0]["encoding"]["color"]
    assert color["scale"]["domain"] == [0, 100]
    assert set(r.data["category"]) == {"Normal", "[MASK]", "[CLS]", "[SEP]", "Overall"}


def test_fig4_subsample_is_bounded_and_deterministic(plain_ctx, built):
    a, b = built["plain", "k21-fig4"], k21.build_fig4(plain_ctx)
    assert (a.data["group"] == "other").sum() <= k21.FIG4_MAX_OTHER
    assert a.params["other_points_total"] > k21.FIG4_MAX_OTHER  # the fixture exercises the subsample
    pd.testing.assert_frame_equal(a.data, b.data)
    assert set(a.data["group"]) == set(k21.FIG4_GROUPS)


def test_paper_numbers_only_under_paper_preset_and_matching_source():
    tables = k21_fixture_tables(0)
    models = tables["models"].copy()
    models.loc[models["model"] == "tiny-bert", "source"] = "bert-base-uncased"
    tables = {**tables, "models": models}
    paper_ctx = FigureContext(tables=tables, roles=fixture_roles(preset="paper"))
    default_ctx = FigureContext(tables=tables, roles=fixture_roles(preset="default"))
    r = k21.build_tab2(paper_ctx)
    assert r.paper is not None and set(r.paper["model"]) == {"tiny-bert"}
    got = r.paper[(r.paper["method"] == "ATTNRESLN-N") & (r.paper["report"] == "authors_run")]
    assert got["mean"].iloc[0] == pytest.approx(18.75)
    assert k21.build_tab2(default_ctx).paper is None
    r3 = k21.build_tab3(paper_ctx)
    assert r3.paper.set_index("method").loc["ATTNRESLN-N", "rho_all"] == pytest.approx(-0.544)
    # sst2 numbers for bert-base come from Table 6
    r6 = k21.build_tab6(paper_ctx)
    assert set(r6.paper["dataset"]) == {"wiki", "sst2"}
    # fixtures' own sources never match
    assert k21.build_tab2(FigureContext(tables=k21_fixture_tables(0), roles=fixture_roles(preset="paper"))).paper is None


def test_reference_for():
    ref = reported.reference_for("k21-tab2", "sentence-transformers/all-MiniLM-L6-v2")
    assert ref is not None and not ref.matches and ref.paper_model == "bert-base-uncased"
    assert "bert-base-uncased" in ref.note
    ref = reported.reference_for("k21-tab2", "roberta-base", "wiki")
    assert ref.matches and ref.frame.set_index(["method", "report"]).loc[("ATTNRESLN-N", "authors_run"), "mean"] == 16.24
    assert reported.reference_for("k21-tab8", "bert-base-uncased").frame["mean"].iloc[0] == 0.88
    assert reported.reference_for("k21-tab7", "x").paper_model.startswith("google/multiberts")
    assert reported.reference_for("k21-fig3", "bert-base-uncased") is None
    assert reported.load_reported()["methods"] == list(k21.METHODS)


def test_figures_do_not_import_torch():
    code = ("import sys, report_builder.figures.k21, report_builder.figures.fixtures, "
            "report_builder.analyses.k21_stats; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
