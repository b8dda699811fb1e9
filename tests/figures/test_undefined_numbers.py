"""A number that is undefined (a Spearman ρ of a constant, a share of nothing) is said in words on the
page, never printed as ``nan``/``inf``: k24-ln-dims printed "ρ(FF change, |γ|) = +nan" for a model whose
LayerNorm weights are all equal (an untrained norm), the K21 ρ readings "a nan", and every prose or
pre-formatted cell printed through `precision.published` wrote "nan"/"inf"."""
from __future__ import annotations

import re

import pandas as pd

from report_builder.figures.registry import figure
from report_builder.figures.spec import FigureContext
from report_builder.precision import published
from tests.fixtures.k24_tables import k24_fixture_roles, k24_fixture_tables

NAN = re.compile(r"\b(nan|inf)\b", re.IGNORECASE)


def _ln_dims(constant: set[str], layers: set[int] | None = None):
    tables = dict(k24_fixture_tables())
    t = tables["k24_ln_dims"].copy()
    hit = t["model"].isin(constant) & (t["layer"].isin(layers) if layers is not None else True)
    t.loc[hit, "ln_weight"] = 1.0  # every dimension's γ equal: ρ(FF change, |γ|) has no ranking to use
    tables["k24_ln_dims"] = t
    return figure("k24-ln-dims").build(FigureContext(tables=tables, roles=k24_fixture_roles()))


def test_ln_dims_says_why_rho_is_undefined_for_a_constant_gamma():
    r = _ln_dims({"tiny-bert"})
    assert not NAN.search(r.reading), r.reading
    part = r.reading.split("tiny-bert:")[1].split(";")[0]
    assert "undefined" in part and "γ" in part and "every dimension" in part, part
    other = r.reading.split("tiny-llama:")[1]
    assert re.search(r"ρ\(FF change, \|γ\|\) = [+-]\d\.\d\d", other), other  # the other model keeps its ρ


def test_ln_dims_names_the_layers_a_mean_rho_covers():
    r = _ln_dims({"tiny-bert"}, layers={0})
    part = r.reading.split("tiny-bert:")[1].split(";")[0]
    n = int(k24_fixture_tables()["models"].set_index("model").loc["tiny-bert", "layers"])
    assert f"over the {n - 1} of {n} layers" in part and "undefined in layer 1" in part, part


def test_a_non_finite_number_prints_as_words():
    for v in (float("nan"), float("inf"), -float("inf")):
        for spec in (".2f", "+.2f", ".0%"):
            assert published(v, spec) == "n/a", (v, spec)


def test_k21_rho_readings_say_undefined():
    from report_builder.figures.k21 import readings

    s = pd.Series({"a": float("nan"), "b": -0.5})
    by_model, by_dataset = readings.rho_by_model_reading(s), readings.rho_by_dataset_reading("m", s)
    assert not NAN.search(by_model) and "a undefined" in by_model, by_model
    assert not NAN.search(by_dataset) and "undefined on a" in by_dataset, by_dataset
    fs = pd.DataFrame({"method": ["ATTNRESLN-N"], "rho_all": [-0.4], "rho_no_special": [float("nan")]})
    text = readings.rho_reading(fs, "m")
    assert not NAN.search(text) and "undefined without [CLS]/[SEP]" in text, text
