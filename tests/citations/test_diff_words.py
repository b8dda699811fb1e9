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
