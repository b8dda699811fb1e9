"""Provenance states the sequences each figure's results were computed from, counted from the tables."""
from __future__ import annotations

import pandas as pd

from report_builder.citations.cite import figure_provenance, provenance_html

PROV = {"models": {"enc": {"source": "x"}, "dec": {"source": "y"}},
        "datasets": {"wiki": {"hash": "h1", "n": 256}, "sst": {"hash": "h2", "n": 200}}}


def _tables() -> dict[str, pd.DataFrame]:
    tok = pd.DataFrame([{"model": m, "dataset": d, "seq": s, "layer": 0, "pos": 0}
                        for m in ("enc", "dec") for d, n in (("wiki", 5), ("sst", 3)) for s in range(n)])
    # the K24 pass used 4 wiki sequences for enc, 2 for dec (one layer had only 3 valid for enc)
    ctx = pd.DataFrame([{"model": "enc", "dataset": "wiki", "layer": 0, "n_seqs": 4},
                        {"model": "enc", "dataset": "wiki", "layer": 1, "n_seqs": 3},
                        {"model": "dec", "dataset": "wiki", "layer": 0, "n_seqs": 2}])
    maps = pd.DataFrame([{"model": "enc", "example": e, "layer": 0} for e in range(2)])
    return {"k21_tokens": tok, "k24_ctx": ctx, "k24_res_norms": ctx.drop(columns="n_seqs"), "k24_maps": maps}


def test_k21_counts_come_from_the_tables_not_the_config():
    rec = figure_provenance(PROV, _tables(), ("enc",), ("wiki", "sst"), {}, "h", ("k21_tokens", "models"))
    assert {d: v["n"] for d, v in rec["datasets"].items()} == {"wiki": 5, "sst": 3}
    assert "5 sequences" in provenance_html(rec) and "256" not in provenance_html(rec)


def test_k24_counts_per_model_when_they_differ():
    rec = figure_provenance(PROV, _tables(), ("enc", "dec"), ("wiki",), {}, "h", ("k24_res_norms", "models"))
    assert rec["datasets"]["wiki"]["n"] == {"dec": 2, "enc": 4}
    assert "4 sequences (enc)" in provenance_html(rec)


def test_map_figures_record_examples_not_datasets():
    rec = figure_provenance(PROV, _tables(), ("enc",), (), {}, "h", ("k24_maps", "models"))
    assert rec["datasets"] == {} and rec["examples"] == 2


def test_the_parameters_row_leaves_out_empty_values():
    """Every K21 table's version page read "Parameters ... max_memory = 1GiB; missing = []": ``missing`` (the
    configured encoders without rows) is a figure's own parameter, shown raw even when nothing is missing. An
    empty value is left out of the row; a value that says something stays (the record keeps both)."""
    rec = figure_provenance(PROV, _tables(), ("enc",), ("wiki",), {"missing": [], "seed": 0}, "h",
                            ("k21_tokens", "models"))
    page = provenance_html(rec)
    assert "missing" not in page and "seed = <code>0</code>" in page
    assert rec["params"]["missing"] == []  # the record is unchanged: only the page leaves it out
    named = figure_provenance(PROV, _tables(), ("enc",), ("wiki",), {"missing": ["dec"]}, "h", ("k21_tokens", "models"))
    assert "missing = <code>[&#x27;dec&#x27;]</code>" in provenance_html(named)
