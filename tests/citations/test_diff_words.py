"""What ``diff`` and the Changes page call a changed input: the configuration key a user sets, once per model
and dataset, never the recipe's internal path (``figure.inputs.k24_scopes.enc · wiki.top_k``). No build."""
from __future__ import annotations

from report_builder.citations import figure_diff, history


def _record(top_k: int, max_length: int) -> dict:
    data = {"max_length": max_length, "k24_n": 1}
    return {"figure": {"id": "k24-ffamp-top", "inputs": {
        "architecture": {"enc.v2": {}},
        "k21_mixing": {"enc.v2 · wiki": {**data, "mask_rate": 0.12, "seed": 0}},
        "k24_scopes": {"enc.v2 · wiki": {**data, "top_k": top_k}}}, "params": {"k": top_k}}}


def test_a_changed_analysis_parameter_is_named_by_its_configuration_key_once():
    """Before: 'parameter: figure.inputs.k24_scopes.enc · wiki.top_k 5 -> 3' and 'figure.params.k', and a
    dataset's max_length once per analysis reading it."""
    rows = figure_diff.inputs_diff(_record(5, 32), _record(3, 64))
    lines = [figure_diff.describe_input(r) for r in rows]
    assert lines == ["parameter: max_length of dataset wiki (enc.v2 · wiki) 32 -> 64",
                     "parameter: k24.top_k (enc.v2 · wiki) 5 -> 3",
                     "parameter: the figure's own k 5 -> 3"], lines
    html = history._inputs_list(rows)
    assert "k24.top_k (enc.v2 · wiki)" in html and "figure.inputs" not in html


def test_a_folder_whose_files_are_not_its_record_names_the_hash_they_give(tmp_path):
    """A version folder whose spec.json and data.csv give another hash than its provenance.json records (a
    reproduced drawing beside the cited recipe, an edited folder): the check line gave ``min()`` of the two
    hashes its files can stand for, often the one with its chart.svg, which names no version of a figure that
    is not a diagram (the folder ``k24-ffamp-example-a625c548b7a9`` was said to give ``5e881f5eb57a``). It
    now names the hash of its spec.json and data.csv, and the one with its chart.svg as such."""
    from report_builder.citations import version_diff
    from report_builder.citations.version_files import version_hash
    from tests.citations import synthetic as syn

    site = tmp_path / "site"
    old, _ = syn.version(site, syn.FIG, 1, "2020-01-01T00:00:00+00:00")
    new, _ = syn.version(site, syn.FIG, 2, "2020-02-01T00:00:00+00:00")
    folder = site / "figures" / syn.FIG / new
    csv = "layer,value (%)\n1,7.5\n"
    (folder / "data.csv").write_text(csv)
    spec = (folder / "spec.json").read_text()
    out = version_diff.version_diff(site / "figures" / syn.FIG / old / "provenance.json", folder / "provenance.json")
    line = next(c for c in out["checks"] if c.startswith("NEW"))
    plain, drawn = version_hash(spec, csv), version_hash(spec, csv, syn.SVG)
    assert f"give {plain} (with its chart.svg: {drawn})" in line, line
