"""K21 figures built from the synthetic fixtures: which ids need which roles, and the numbers they show.

The per-figure contract (builds or says what to configure, valid spec, anchor) is generated from the
registry in `tests/figures/test_contract.py`; this module checks K21-specific behaviour.
"""

import pandas as pd
import pytest
import yaml

from report_builder import papers, schema
from report_builder.figures import reported
from report_builder.figures.k21 import SPECS, categories, frequency, mixing
from report_builder.figures.registry import figure
from report_builder.figures.spec import FigureContext, NotConfigured, Roles
from report_builder.stats import k21_figures as figstats
from tests.figures.test_contract import check_entry
from tests.fixtures.contexts import context
from tests.fixtures.k21_tables import fixture_roles, k21_fixture_tables

METHODS = schema.K21_METHODS


@pytest.fixture(scope="module")
def plain_ctx():
    return context("k21-plain")


@pytest.fixture(scope="module")
def built():
    """Every K21 figure built once per context: ``{(which, id): FigureResult | NotConfigured}``."""
    out = {}
    for which in ("plain", "full"):
        for s in SPECS:
            try:
                out[which, s.id] = s.build(context(f"k21-{which}"))
            except NotConfigured as e:
                out[which, s.id] = e
    return out


def test_fixtures_are_schema_exact():
    tables = k21_fixture_tables(1)
    cols = schema.K21
    for name, c in cols.items():
        assert list(tables[name].columns) == c, name
    assert {"model", "source", "ln_position", "norm", "d_model", "layers", "heads", "kv_heads", "ff_size"} <= set(
        tables["models"].columns)
    assert {"dataset", "model", "n_samples", "mean_tokens", "domain"} <= set(tables["datasets"].columns)
    tok = tables["k21_tokens"]
    assert tok[list(METHODS)].stack().between(0, 100).all()
    assert set(tok["category"]) <= {"Normal", "[MASK]", "[CLS]", "[SEP]"}
    assert (tables["k21_freq"]["freq_rank"] >= 1).all()


def test_expected_not_configured(built):
    """Plain roles: no variants, no seed group, two datasets -> these ids (and only these) are NotConfigured."""
    def failing(which):
        return [s.id for s in SPECS if isinstance(built[which, s.id], NotConfigured)]

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
            figure(fid).build(ctx)
        check_entry(ei.value)
    seed = pytest.raises(NotConfigured, figure("k21-tab7").build, ctx).value
    assert len(yaml.safe_load(seed.config_entry)["models"]) == 25


def test_missing_rows_are_not_configured_not_empty_charts(plain_ctx):
    tables = dict(plain_ctx.tables)
    tables["k21_tokens"] = tables["k21_tokens"][tables["k21_tokens"]["model"] != "tiny-bert"]
    with pytest.raises(NotConfigured):
        categories.build_fig3(FigureContext(tables=tables, roles=plain_ctx.roles))


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
    assert len(d["hconcat"]) == 2
    # each panel names the model, the method and the layer the slider shows (so a static export says it)
    titles = [c["title"]["text"]["expr"] for c in d["hconcat"]]
    assert titles == ['"tiny-bert: ATTN-N, layer " + layer_sel', '"tiny-bert: ATTNRESLN-N, layer " + layer_sel']
    x = d["hconcat"][0]["encoding"]["x"]
    assert x["sort"][:3] == ["0:[CLS]", "1:the", "2:man"]  # pos:token labels in position order
    assert len(set(x["sort"])) == len(x["sort"])
    assert r.params["tokens"] == 60 and r.params["layers"] == 6


def test_fig1_legends_say_the_maps_are_raw_norms(built):
    """SPEC §8: a map says whether it is raw norms or row-normalised. k21-fig1's colour legends read only
    'ATTN-N' and 'ATTNRESLN-N', so its chart.png (cited on its own) did not say its cells are raw norms ‖z_{i←j}‖
    (the K24 maps' legends say 'row-normalised value')."""
    d = built["plain", "k21-fig1"].chart.to_dict()
    legends = [c["encoding"]["color"]["title"] for c in d["hconcat"]]
    assert legends == ["ATTN-N (raw norm)", "ATTNRESLN-N (raw norm)"], legends


def test_fig3_fixed_scale_and_panels(built):
    r = built["plain", "k21-fig3"]
    d = r.chart.to_dict()
    assert d["facet"]["sort"] == list(METHODS)
    color = d["spec"]["layer"][0]["encoding"]["color"]
    assert color["scale"]["domain"] == [0, 100]
    assert set(r.data["category"]) == {"Normal", "[MASK]", "[CLS]", "[SEP]", "Overall"}


def test_fig4_legend_names_the_punctuation_groups(built):
    """The legend's "." and "," were single glyphs beside a dot of colour, hard to see (above all in the
    dark scheme): the drawn legend names them; the data keeps the tokens themselves."""
    import vl_convert as vlc

    r = built["plain", "k21-fig4"]
    svg = vlc.vegalite_to_svg(r.chart.to_dict())
    assert "period (.)" in svg and "comma (,)" in svg and ">other<" in svg
    assert {".", ","} <= set(r.data["group"])


def test_fig4_subsample_is_bounded_and_deterministic(plain_ctx, built):
    a, b = built["plain", "k21-fig4"], frequency.build_fig4(plain_ctx)
    assert (a.data["group"] == "other").sum() <= frequency.FIG4_MAX_OTHER
    assert a.params["other_points_total"] > frequency.FIG4_MAX_OTHER  # the fixture exercises the subsample
    pd.testing.assert_frame_equal(a.data, b.data)
    # [CLS]/[SEP] have no word frequency: left out of the chart, counted and said so in the reading
    assert set(a.data["group"]) == set(figstats.FIG4_GROUPS) - {"[CLS]", "[SEP]"}
    assert a.params["special_tokens_left_out"] > 0
    assert f"leaves out the {a.params['special_tokens_left_out']} [CLS]/[SEP]" in a.reading
    y = a.chart.to_dict()["encoding"]["y"]
    assert y["scale"]["zero"] is False and "domain" not in y["scale"]  # fitted to the data, not 0-100


def test_paper_numbers_only_under_paper_preset_and_matching_source():
    tables = k21_fixture_tables(0)
    models = tables["models"].copy()
    models.loc[models["model"] == "tiny-bert", "source"] = "bert-base-uncased"
    tables = {**tables, "models": models}
    paper_ctx = FigureContext(tables=tables, roles=fixture_roles(preset="paper"))
    default_ctx = FigureContext(tables=tables, roles=fixture_roles(preset="default"))
    r = mixing.build_tab2(paper_ctx)
    assert r.paper is not None and set(r.paper["model"]) == {"tiny-bert"}
    got = r.paper[(r.paper["method"] == "ATTNRESLN-N") & (r.paper["report"] == "authors_run")]
    assert got["mean"].iloc[0] == pytest.approx(18.75)
    assert mixing.build_tab2(default_ctx).paper is None
    r3 = frequency.build_tab3(paper_ctx)
    assert r3.paper.set_index("method").loc["ATTNRESLN-N", "rho_all"] == pytest.approx(-0.544)
    # sst2 numbers for bert-base come from Table 6
    r6 = mixing.build_tab6(paper_ctx)
    assert set(r6.paper["dataset"]) == {"wiki", "sst2"}
    # fixtures' own sources never match
    assert mixing.build_tab2(FigureContext(tables=k21_fixture_tables(0), roles=fixture_roles(preset="paper"))).paper is None


def test_reference_for():
    ref = reported.reference_for("k21-tab2", "sentence-transformers/all-MiniLM-L6-v2")
    assert ref is not None and not ref.matches and ref.paper_model == "bert-base-uncased"
    assert "bert-base-uncased" in ref.note
    ref = reported.reference_for("k21-tab2", "roberta-base", "wiki")
    assert ref.matches and ref.frame.set_index(["method", "report"]).loc[("ATTNRESLN-N", "authors_run"), "mean"] == 16.24
    assert reported.reference_for("k21-tab8", "bert-base-uncased").frame["mean"].iloc[0] == 0.88
    assert reported.reference_for("k21-tab7", "x").paper_model.startswith("google/multiberts")
    assert reported.reference_for("k21-fig3", "bert-base-uncased") is None
    assert reported.load_reported()["methods"] == list(METHODS)




def test_not_configured_entries_name_the_paper_models(plain_ctx):
    """The variant and seed-group entries list the papers' models (from `report_builder.papers`)."""
    variant = pytest.raises(NotConfigured, figure("k21-fig5").build, plain_ctx).value
    names = [m["source"] for m in yaml.safe_load(variant.config_entry)["models"]]
    assert names == [papers.K21_VARIANTS[0].source]
    tab5 = pytest.raises(NotConfigured, figure("k21-tab5").build, plain_ctx).value
    assert [m["source"] for m in yaml.safe_load(tab5.config_entry)["models"]] == [m.source for m in papers.K21_VARIANTS]
    seeds = pytest.raises(NotConfigured, figure("k21-fig15").build, plain_ctx).value
    assert len(yaml.safe_load(seeds.config_entry)["models"]) == papers.N_SEEDS


def test_fig2_shows_the_table_its_caption_promises(built):
    """k21-fig2's caption says 'the table lists each stage's term and bias term', but the page showed the
    diagram alone (the table went only to data.csv): a diagram's data is not shown unless it is its table."""
    from report_builder.site.build import shown_table

    result = built["plain", "k21-fig2"]
    assert "the table lists" in figure("k21-fig2").caption
    table = shown_table(result)
    assert table is not None, "k21-fig2 shows no table"
    assert list(table.iloc[:, 0]) == ["ATTN", "RES", "LN"]
    assert any("bias" in str(c).lower() for c in table.columns), table.columns


def _variant_figure(tables, variant: str):
    roles = Roles(primary_encoder="tiny-bert", primary_causal="tiny-llama", encoders=("tiny-bert", "tiny-llama"),
                  variants=(variant,), seed_group=(), datasets=("wiki", "sst2"))
    return figure("k21-fig5").build(FigureContext(tables=tables, roles=roles))


def test_category_columns_are_named_by_the_models_own_tokens_and_in_the_caption():
    """The K21 Fig. 3 family's caption listed 'columns: Normal, [MASK], [CLS], [SEP], Overall' whatever the
    model: the default build's k21-fig5 (SmolLM2, causal) shows Normal, BOS, Overall under it, and a RoBERTa
    variant's <s>, </s>, <mask> were labelled [CLS], [SEP], [MASK] (SPEC §2 names RoBERTa's categories by its
    own tokens). Every column a category chart shows is named in its caption, and a special category takes
    the model's own token."""
    caption = figure("k21-fig5").caption
    causal = _variant_figure(k21_fixture_tables(0), "tiny-llama")
    assert causal.params["categories"] == ["Normal", "BOS", "Overall"], causal.params
    tables = dict(k21_fixture_tables(0))
    roberta = {"[CLS]": "<s>", "[SEP]": "</s>", "[MASK]": "<mask>"}
    tok = tables["k21_tokens"]
    enc = tok["model"] == "tiny-bert"
    tables["k21_tokens"] = tok.assign(token=tok["token"].where(~enc, tok["token"].replace(roberta)))
    rob = _variant_figure(tables, "tiny-bert")
    assert rob.params["categories"] == ["Normal", "<mask>", "<s>", "</s>", "Overall"], rob.params
    assert set(rob.data["category"]) >= {"[CLS]", "[SEP]", "[MASK]"}  # data.csv keeps the K21 category names
    for shown in causal.params["categories"] + rob.params["categories"]:
        assert shown in caption, (shown, caption)


def test_tab8_data_holds_the_per_layer_rates_its_chart_draws(built):
    """k21-tab8's chart draws the expansion rate of every layer, but its data.csv held only each model's
    mean, SD, min and max: the numbers drawn could not be read from the figure's data. Its data is now one
    row per (model, layer) drawn, with the model's summary beside it (the paper comparison reads those)."""
    r = built["full", "k21-tab8"]
    d = r.data
    assert {"layer", "expansion_rate", "mean", "min", "max"} <= set(d.columns), list(d.columns)
    drawn = r.chart.to_dict()
    tables = k21_fixture_tables(0, n_variants=3, n_seeds=3)["k21_expansion"]
    one = tables[tables["model"] == "tiny-bert"].sort_values("layer")
    got = d[d["model"] == "tiny-bert"].sort_values("layer")
    assert list(got["expansion_rate"]) == list(one["expansion_rate"]) and list(got["layer"]) == list(one["layer"])
    assert drawn  # the chart still builds
    assert d.groupby("model")["mean"].nunique().max() == 1  # one summary per model


def test_fig4_reading_names_the_tokens_without_a_word_frequency():
    """Tokens wordfreq does not list (numbers, dashes: '2013', '—' in the default build) share the worst rank
    (data.frequency), so k21-fig4 drew 99 of its points as a column at rank 26,690 that nothing on the page
    explained. The reading now says how many occurrences share that rank and which tokens they are."""
    tables = dict(k21_fixture_tables(0))
    f = tables["k21_freq"]
    worst = int(f["freq_rank"].max()) + 100
    unseen = f["token"].isin(["the", "man"]) & (f["model"] == "tiny-bert")  # two tokens, many occurrences
    tables["k21_freq"] = f.assign(freq_rank=f["freq_rank"].where(~unseen, worst))
    r = figure("k21-fig4").build(FigureContext(tables=tables, roles=fixture_roles()))
    n = int((unseen & (f["dataset"] == "wiki")).sum())
    assert f"{n} occurrences of 2 tokens" in r.reading and f"{worst:,}" in r.reading, r.reading
    plain = figure("k21-fig4").build(FigureContext(tables=k21_fixture_tables(0), roles=fixture_roles()))
    assert "share the worst rank" not in plain.reading, plain.reading


def test_wrapped_category_panels_each_label_their_columns(built):
    """K21 Fig. 3's five panels wrap 3 + 2 on a laptop page (84e93bf); the token-category axis was drawn only
    under the last row of each column, so the top row's panels had no column labels and the third column's
    axis stood under an empty slot. Every panel now labels its own columns."""
    vlc = pytest.importorskip("vl_convert")
    r = built["plain", "k21-fig3"]
    svg = vlc.vegalite_to_svg(r.chart.to_dict())
    n_panels = len(schema.K21_METHODS)
    assert svg.count(">token category<") == n_panels, svg.count(">token category<")
