"""The parts behind figure citations (issue #24), without a build: what changed between two versions,
the recipe's seal, BibTeX-safe permalinks, the age option of ``clean``, and a version page's escaping.
The end-to-end behaviour is tested through the CLI in tests/test_citations.py."""
from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from report_builder.site import figure_diff, permalinks, recipe


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


def test_seal_detects_an_edit():
    rec = recipe.seal({"figure": {"id": "k21-fig3"}, "content_hash": "abc", "config": {"k24": {"top_k": 5}}})
    assert recipe.sealed(rec) is True and list(rec)[0] == "figure"  # record order kept
    rec["config"]["k24"]["top_k"] = 6
    assert recipe.sealed(rec) is False and recipe.sealed({"x": 1}) is None


@pytest.mark.parametrize("url", ["https://example.org/r}/{x}\\y z\"<>/", "https://ex.org/a%20b/#frag"])
def test_permalink_url_is_safe_in_bibtex(url):
    from report_builder.site.provenance import bib_url, figure_bibtex

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
    now = dt.datetime(2025, 6, 30, tzinfo=dt.timezone.utc)
    assert permalinks.parse_age("30d", now) == dt.datetime(2025, 5, 31, tzinfo=dt.timezone.utc)
    assert permalinks.parse_age("2025-06-01", now) == dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc)
    for bad in ("soon", "30", "-1d", ""):
        with pytest.raises(ValueError, match="30d"):
            permalinks.parse_age(bad, now)


def test_version_page_escapes_the_recipe():
    from report_builder.site.version_page import page

    evil = '<script>alert(1)</script>'
    rec = {"figure": {"title": evil, "paper": "K21"}, "models": {evil: {"source": evil, "fingerprint": "f"}},
           "datasets": {}, "params": {}, "max_reconstruction_error": None, "report_builder_version": "1",
           "git_commit": "c", "torch_version": "t", "transformers_version": "t", "device": "cpu", "dtype": "f",
           "preset": "p", "date": "d", "content_hash": "0123456789ab"}
    text = page("k21-fig3", "0123456789ab", rec, "@misc{" + evil + "}", "ffffffffffff", "k21.html", True,
                "figures/k21-fig3/0123456789ab/")
    assert "<script" not in text and "&lt;script&gt;" in text and "A newer version exists" in text
    assert 'href="../ffffffffffff/index.html"' in text and 'href="../../../k21.html#k21-fig3"' in text


def test_diff_text_escapes_terminal_sequences(tmp_path):
    import json

    from report_builder.site.version_diff import diff, format_diff

    evil = "m\x1b[2J\x1b]0;owned\x07\u009b31m\nx"
    for side, fp in (("a", "f1"), ("b", "f2")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "provenance.json").write_text(json.dumps(
            {"figure": {"id": "k21-fig3\x1b[1m"}, "content_hash": side * 12, "models": {evil: {"fingerprint": fp}}}))
        (tmp_path / side / "data.csv").write_text(f"model,value\n{evil!r},{1 if side == 'a' else 2}\n")
    text = format_diff(diff(tmp_path / "a", tmp_path / "b"))
    assert "weights: models.m\\x1b[2J" in text and "largest change 1 in value" in text
    # the one terminal escaper (`errors.for_terminal`), not a copy with its own spelling (before: ``\\n``)
    from report_builder.errors import for_terminal

    assert for_terminal(f"models.{evil}.fingerprint") in text and "\\x0a" in text
    assert not any(not c.isprintable() for line in text.splitlines() for c in line)
