"""The parts behind figure citations (issue #24), without a build: what changed between two versions,
the recipe's seal, BibTeX-safe permalinks, the age option of ``clean``, and a version page's escaping.
The end-to-end behaviour is tested through the CLI in tests/test_citations.py."""
from __future__ import annotations

import datetime as dt
import re

import pandas as pd
import pytest

from report_builder.citations import figure_diff, permalinks, recipe


def _frames():
    old = pd.DataFrame({"model": ["m"] * 4, "dataset": ["d"] * 4, "layer": [1, 1, 2, 2],
                        "category": ["A", "B", "A", "B"], "value": [10.0, 20.0, 30.0, 0.0], "n_seqs": [3, 3, 3, 3]})
    new = old.assign(value=[10.0, 21.0, 27.0, 0.5], n_seqs=[40, 40, 40, 40])
    return old, new


def test_data_summary_names_the_largest_change_and_where():
    old, new = _frames()
    s = figure_diff.data_summary(old, new)
    assert s["comparable"] and s["keys"] == ["model", "dataset", "layer", "category"]
    a, r = s["largest_abs"], s["largest_rel"]
    # the measure (float column) wins over the larger change of a count
    assert (a["column"], a["difference"], a["where"]) == ("value", -3.0, {"model": "m", "dataset": "d", "layer": 2,
                                                                          "category": "A"})
    assert r["column"] == "value" and r["relative"] == pytest.approx(0.1) and r["where"]["layer"] == 2  # 0 -> 0.5 has no relative change
    assert s["values_changed"] == 3 + 4 and s["columns"]["n_seqs"]["changed"] == 4
    assert "largest change -3 in value" in figure_diff.describe_data(s)
    same = figure_diff.data_summary(old, old)
    assert same["values_changed"] == 0 and same["largest_abs"] is None


def test_where_a_number_only_table_changed_keeps_its_layer_a_whole_number():
    """A data.csv of numbers only (``layer``, ``value (%)``): the change was "at layer 1.0" (the matched row read
    whole, upcast to float), on the Changes page and in `diff`; layers are whole numbers counted from 1."""
    old = pd.DataFrame({"layer": [1, 2], "value (%)": [2.5, 7.0]})
    s = figure_diff.data_summary(old, old.assign(**{"value (%)": [3.5, 7.0]}))
    assert s["largest_abs"]["where"] == {"layer": 1} and isinstance(s["largest_abs"]["where"]["layer"], int)
    assert "at layer 1;" in figure_diff.describe_data(s) and "1.0" not in figure_diff.where_text(s["largest_rel"]["where"])


def test_a_version_written_before_units_named_columns_is_compared_by_name():
    """A data.csv published before its measured columns carried their unit (``value``) is compared with
    the new one (``value (%)``) column for column; the difference chart picks the unit-bearing value."""
    old, new = _frames()
    new = new.rename(columns={"value": "value (%)"})
    s = figure_diff.data_summary(old, new)
    assert s["largest_abs"]["column"] == "value (%)" and s["largest_abs"]["difference"] == -3.0
    assert s["values_changed"] == 3 + 4
    heat = figure_diff.difference_spec(old, new, {"mark": "rect"}, "f")
    assert {r["difference"] for r in heat["data"]["values"]} == {0.0, 1.0, -3.0, 0.5}
    assert heat["title"]["subtitle"].startswith("value (%)")
    # a column that is not a bare name plus a known unit is not matched (it may be another measure)
    other = figure_diff.data_summary(old, new.rename(columns={"value (%)": "value (m)"}))
    assert other["largest_abs"]["column"] == "n_seqs"


def test_rows_are_matched_by_rank_and_unmatched_ones_counted():
    old = pd.DataFrame({"model": ["m"] * 3, "layer": [1] * 3, "rank": [1, 2, 3], "i": [4, 5, 6], "amp": [0.3, 0.2, 0.1]})
    new = pd.DataFrame({"model": ["m"] * 2, "layer": [1] * 2, "rank": [1, 2], "i": [9, 5], "amp": [0.35, 0.2]})
    s = figure_diff.data_summary(old, new)
    assert s["keys"] == ["model", "layer", "rank"] and s["rows_removed"] == 1 and s["rows_added"] == 0
    assert s["largest_abs"]["column"] == "amp" and s["largest_abs"]["where"]["rank"] == 1
    odd = figure_diff.data_summary(pd.DataFrame({"x": [1.0, 1.0]}), pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    assert not odd["comparable"] and "row counts differ" in odd["reason"]


def test_difference_chart_only_for_lines_and_heatmaps():
    old, new = _frames()
    heat = figure_diff.difference_spec(old, new, {"mark": "rect"}, "f")
    assert heat["mark"] == "rect" and {r["difference"] for r in heat["data"]["values"]} == {0.0, 1.0, -3.0, 0.5}
    line = figure_diff.difference_spec(old, new, {"layer": [{"mark": {"type": "line"}}]}, "f")
    assert line["mark"]["type"] == "line"
    assert figure_diff.difference_spec(old, new, {"mark": "point"}, "f") is None
    assert figure_diff.difference_spec(old.drop(columns="layer"), new.drop(columns="layer"), {"mark": "rect"}, "f") is None


def test_inputs_diff_kinds():
    a = {"models": {"m": {"source": "s", "fingerprint": "f1"}}, "datasets": {"d": {"hash": "h1", "n": 3}},
         "config": {"k24": {"top_k": 5}, "datasets": [{"id": "d", "n": 3}], "models": [{"name": "m", "source": "s"}]},
         "params": {"top_k": 5}, "report_builder_version": "1", "libraries": {"pandas": "2"}, "device": "cpu",
         "date": "x", "content_hash": "a", "figure": {"version": 1}}
    b = {**a, "models": {"m": {"source": "s", "fingerprint": "f2"}}, "datasets": {"d": {"hash": "h2", "n": 3}},
         "config": {"k24": {"top_k": 3}, "datasets": [{"id": "d", "n": 4}], "models": [{"name": "m", "source": "s"}]},
         "params": {"top_k": 3}, "libraries": {"pandas": "3"}, "device": "cuda", "date": "y", "content_hash": "b",
         "figure": {"version": 2}}
    rows = {(r["kind"], r["what"]) for r in figure_diff.inputs_diff(a, b)}
    assert rows == {("weights", "models.m.fingerprint"), ("data", "datasets.d.hash"),
                    ("parameter", "config.k24.top_k"), ("parameter", "config.datasets.d.n"),
                    ("code", "figure.version"), ("library", "libraries.pandas"), ("device", "device")}
    gone = figure_diff.inputs_diff(a, {**a, "models": {}})
    assert [(r["kind"], r["what"], r["new"]) for r in gone] == [("weights", "models.m", "removed")]
    # the published files' checksums are the version's output, not an input: never a "parameter" change
    files = figure_diff.inputs_diff({**a, "files": {"data.csv": "1" * 64, "chart.svg": "2" * 64}},
                                    {**a, "files": {"data.csv": "3" * 64, "chart.svg": "4" * 64}})
    assert files == []


def _build_prov(top_k: int, mask_rate: float) -> dict:
    """A build provenance as `provenance.build_provenance` records it: every analysis' tasks with the
    parameters they declare (subject keys dropped), two models, two datasets."""
    def rows(params, scope="dataset"):
        return [{"model": m, "dataset": d if scope == "dataset" else None, "params": params}
                for m in ("a", "b") for d in (("wiki", "sst2") if scope == "dataset" else (None,))]

    return {"analyses": {
        "architecture": {"version": 2, "tables": ["models"], "inputs": rows({}, "model")},
        "k21_mixing": {"version": 2, "tables": ["k21_tokens", "recon_errors", "dataset_stats"],
                       "inputs": rows({"max_length": 32, "mask_rate": mask_rate, "seed": 0})},
        "k24_scopes": {"version": 2, "tables": ["k24_ctx"], "inputs": rows({"max_length": 32, "top_k": top_k})},
        "k24_examples": {"version": 2, "tables": ["k24_maps"],
                         "inputs": [{"model": "a", "dataset": "wiki", "params": {"examples": 2}}]}},
        "config": {"k24": {"top_k": top_k}, "k21": {"mask_rate": mask_rate}}}


def _recipe(prov: dict, tables: tuple, datasets: list) -> dict:
    from types import SimpleNamespace

    spec = SimpleNamespace(id="f", title="t", paper="K21", version=1, kind="heatmap", analysis=tables)
    rec = recipe.recipe_fields(spec, {}, prov, None, ["a"], 100, datasets, {"normalise": "row"})
    return {**rec, "params": {"top_k": prov["config"]["k24"]["top_k"]}}  # the build-wide params, as recorded


def test_a_figure_records_and_diffs_only_the_parameters_its_analyses_declare():
    """Before: the whole configuration was compared, so `k24.top_k` was a changed input of a K21 figure."""
    k21 = _recipe(_build_prov(5, 0.12), ("k21_tokens",), ["wiki"])
    assert k21["figure"]["inputs"] == {"architecture": {"a": {}},
                                       "k21_mixing": {"a · wiki": {"max_length": 32, "mask_rate": 0.12, "seed": 0}}}
    assert k21["figure"]["params"] == {"normalise": "row"} and k21["config"]  # the full configuration stays
    other_top_k = _recipe(_build_prov(10, 0.12), ("k21_tokens",), ["wiki"])
    assert figure_diff.inputs_diff(k21, other_top_k) == []
    other_mask = _recipe(_build_prov(5, 0.2), ("k21_tokens",), ["wiki"])
    assert [(r["kind"], r["what"], r["old"], r["new"]) for r in figure_diff.inputs_diff(k21, other_mask)] == [
        ("parameter", "figure.inputs.k21_mixing.a · wiki.mask_rate", 0.12, 0.2)]
    k24 = _recipe(_build_prov(5, 0.12), ("k24_ctx",), ["wiki"])
    rows = figure_diff.inputs_diff(k24, _recipe(_build_prov(10, 0.12), ("k24_ctx",), ["wiki"]))
    assert [(r["kind"], r["what"]) for r in rows] == [("parameter", "figure.inputs.k24_scopes.a · wiki.top_k")]
    # the examples run on the first dataset: kept although the figure names no dataset
    maps = _recipe(_build_prov(5, 0.12), ("k24_maps",), [])
    assert maps["figure"]["inputs"]["k24_examples"] == {"a · wiki": {"examples": 2}}
    # the figure's own parameters are compared too
    own = {**k21, "figure": {**k21["figure"], "params": {"normalise": None}}}
    assert [r["what"] for r in figure_diff.inputs_diff(k21, own)] == ["figure.params.normalise"]
    # a record made before the inputs were recorded: the configuration is compared, as before
    old = {k: v for k, v in k21.items()}
    old["figure"] = {k: v for k, v in k21["figure"].items() if k not in ("inputs", "params")}
    assert ("parameter", "config.k24.top_k") in {(r["kind"], r["what"]) for r in figure_diff.inputs_diff(
        old, {**old, "config": {"k24": {"top_k": 10}, "k21": {"mask_rate": 0.12}}})}
    assert "inputs" not in _recipe({**_build_prov(5, 0.12), "analyses": {"k21_mixing": {"version": 2, "tables": [
        "k21_tokens"]}}}, ("k21_tokens",), ["wiki"])["figure"]


def test_subject_keys_are_what_names_a_task_subject():
    """`analyses.base.input_params` drops exactly what `Subject.base_params`/`data_params` add to name the
    model, its weights, the dataset, its data and the device (recorded and compared as such)."""
    from report_builder.analyses.base import SUBJECT_KEYS, Subject, input_params
    from report_builder.config import DatasetConfig, ModelConfig, from_dict

    cfg = from_dict({"preset": "smoke", "device": "cuda"})
    s = Subject(cfg, ModelConfig(name="m", source="minilm"), "fp", False, DatasetConfig(id="wiki"), "h", 3)
    assert set(s.data_params()) - set(SUBJECT_KEYS) == {"max_length"}
    assert input_params({**s.data_params(), "top_k": 3}) == {"max_length": s.dataset.max_length, "top_k": 3}


def test_seal_detects_an_edit():
    rec = recipe.seal({"figure": {"id": "k21-fig3"}, "content_hash": "abc", "config": {"k24": {"top_k": 5}}})
    assert recipe.sealed(rec) is True and list(rec)[0] == "figure"  # record order kept
    rec["config"]["k24"]["top_k"] = 6
    assert recipe.sealed(rec) is False and recipe.sealed({"x": 1}) is None


@pytest.mark.parametrize("url", ["https://example.org/r}/{x}\\y z\"<>/", "https://ex.org/a%20b/#frag"])
def test_permalink_url_is_safe_in_bibtex(url):
    from report_builder.citations.cite import bib_url, figure_bibtex

    link = permalinks.permalink_url(url, "k21-fig3", "0123456789ab")
    bib = figure_bibtex("k21-fig3", "T", "K21", "0123456789ab", {"date": "2025-01-01"}, url=link)
    depth = 0
    for c in bib.replace("\\{", "").replace("\\}", ""):
        depth += (c == "{") - (c == "}")
        assert depth >= 0
    assert depth == 0 and f"url          = {{{bib_url(link)}}}" in bib
    assert not set('{}\\" <>') & set(bib_url(link)) and bib_url(link).endswith("figures/k21-fig3/0123456789ab/")
    rel = figure_bibtex("k21-fig3", "T", "K21", "0123456789ab", {}, url=permalinks.permalink_url(None, "k21-fig3",
                                                                                                  "0123456789ab"))
    assert "url          = {figures/k21-fig3/0123456789ab/}" in rel


def test_versions_older_than():
    from report_builder.citations.site_clean import parse_age

    now = dt.datetime(2025, 6, 30, tzinfo=dt.timezone.utc)
    assert parse_age("30d", now) == dt.datetime(2025, 5, 31, tzinfo=dt.timezone.utc)
    assert parse_age("2025-06-01", now) == dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc)
    oldest = dt.datetime.min.replace(tzinfo=dt.timezone.utc)  # more days than the calendar: before every date
    for many in ("999999999d", "99999999999999999999d", "9" * 5000 + "d"):
        assert parse_age(many, now) == oldest
    assert parse_age("0000030d", now) == dt.datetime(2025, 5, 31, tzinfo=dt.timezone.utc)
    for bad in ("soon", "30", "-1d", ""):
        with pytest.raises(ValueError, match="30d"):
            parse_age(bad, now)


def test_version_page_escapes_the_recipe():
    from report_builder.citations.version_page import page

    evil = '<script>alert(1)</script>'
    rec = {"figure": {"title": evil, "paper": "K21"}, "models": {evil: {"source": evil, "fingerprint": "f"}},
           "datasets": {}, "params": {}, "max_reconstruction_error": None, "report_builder_version": "1",
           "git_commit": "c", "torch_version": "t", "transformers_version": "t", "device": "cpu", "dtype": "f",
           "preset": "p", "date": "d", "content_hash": "0123456789ab"}
    text = page("k21-fig3", "0123456789ab", rec, "@misc{" + evil + "}", "ffffffffffff", "k21.html", True,
                "figures/k21-fig3/0123456789ab/")
    assert "<script" not in text and "&lt;script&gt;" in text and "A newer version exists" in text
    assert 'href="../ffffffffffff/index.html"' in text and 'href="../../../k21.html#k21-fig3"' in text


def test_version_page_links_its_chart_at_full_size_and_asks_for_no_favicon():
    """A version page's chart is shrunk to the phone's width (358 px at 390 px): it links to the drawing at
    full size; and the page names its icon (none) so that a browser asks the static host for no
    favicon.ico, which logged a 404 on every version page."""
    from report_builder.citations.version_page import page

    rec = {"figure": {"title": "T", "paper": "K21"}, "models": {}, "datasets": {}, "params": {},
           "max_reconstruction_error": None, "report_builder_version": "1", "git_commit": "c", "torch_version": "t",
           "transformers_version": "t", "device": "cpu", "dtype": "f", "preset": "p", "date": "d",
           "content_hash": "0123456789ab"}
    text = page("k21-fig3", "0123456789ab", rec, "@misc{x}", "0123456789ab", "k21.html", False,
                "figures/k21-fig3/0123456789ab/")
    assert re.search(r'<a href="chart\.svg"[^>]*><img class="rb-chart" src="chart\.svg"', text), text
    assert "full size" in text
    head = text.split("</head>", 1)[0]
    assert '<link rel="icon" href="data:,">' in head


def test_diff_text_escapes_terminal_sequences(tmp_path):
    import json

    from report_builder.citations.version_diff import diff, format_diff

    evil = "m\x1b[2J\x1b]0;owned\x07\u009b31m\nx"
    for side, fp in (("a", "f1"), ("b", "f2")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "provenance.json").write_text(json.dumps(
            {"figure": {"id": "k21-fig3"}, "content_hash": side * 12, "models": {evil: {"fingerprint": fp}}}))
        (tmp_path / side / "data.csv").write_text(f"model,value\n{evil!r},{1 if side == 'a' else 2}\n")
    text = format_diff(diff(tmp_path / "a", tmp_path / "b"))
    assert "weights: models.m\\x1b[2J" in text and "largest change 1 in value" in text
    # the one terminal escaper (`errors.for_terminal`), not a copy with its own spelling (before: ``\\n``)
    from report_builder.errors import for_terminal

    assert for_terminal(f"models.{evil}.fingerprint") in text and "\\x0a" in text
    assert not any(not c.isprintable() for line in text.splitlines() for c in line)
    # a figure id that is not a registered one is refused in one line (it names no figure of this tool)
    (tmp_path / "b" / "provenance.json").write_text(json.dumps({"figure": {"id": "k21-fig3\x1b[1m"},
                                                                 "content_hash": "b" * 12}))
    from report_builder.errors import UsageError

    with pytest.raises(UsageError, match="figure.id is not a registered figure id"):
        diff(tmp_path / "a", tmp_path / "b")


def test_cite_of_a_figure_the_current_build_left_out_says_so(tmp_path):
    """A figure outside the last build (`figures:` or not configured) has no current version: `cite ID` said
    "holds no a version of ID (its versions of ID: <hash>)"; it now says why and how to cite a version."""
    import json

    from report_builder import api
    from report_builder.citations.earlier_site import FILES
    from report_builder.errors import UsageError

    rec = {"created": "2026-01-01T00:00:00+00:00", "title": "t", "paper": "K24",
           "files": {f: "0" * 64 for f in FILES}}
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "versions.json").write_text(json.dumps({
        "format": "report_builder figure versions 1", "site_url": None, "current": {},
        "figures": {"k24-maps": {"3b812387c3b9": rec, "d701a3d4981b": rec}}}))
    with pytest.raises(UsageError, match=r"^k24-maps is not in the last build of .* \(not configured, or left out "
                                         r"by `figures:`\), so it has no current version; cite one of its 2 versions: "
                                         r"report-builder cite k24-maps HASH --dir .* \(3b812387c3b9, d701a3d4981b\)$"):
        api.cite("k24-maps", site_dir=tmp_path)
    with pytest.raises(UsageError, match=r"^k21-fig6 is not in the last build of .* \(not configured, or left out "
                                         r"by `figures:`\), and the site holds no version of it$"):
        api.cite("k21-fig6", site_dir=tmp_path)
    with pytest.raises(UsageError, match=r"holds no version 0123456789ab of k24-maps \(its versions of k24-maps: "
                                         r"3b812387c3b9, d701a3d4981b\)$"):
        api.cite("k24-maps", "0123456789ab", site_dir=tmp_path)
