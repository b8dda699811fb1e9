"""`reproduce`'s one-line answer says what was compared (docs/cite.md: a folder holding only its
provenance.json has nothing to check but the recipe's seal, and the line says so)."""
from __future__ import annotations

from report_builder.citations.reproduce import Reproduction


def test_identical_from_a_bare_recipe_says_only_the_recorded_hash_was_compared():
    bare = Reproduction(figure="k21-tab1", recorded="f521c1003afb", status="identical", folder_files=[])
    assert bare.line().startswith("reproduced k21-tab1 f521c1003afb: identical (")
    assert "only the recorded hash was compared" in bare.line()
    whole = Reproduction(figure="k21-tab1", recorded="f521c1003afb", status="identical",
                         folder_files=["chart.png", "chart.svg", "data.csv", "spec.json"])
    assert whole.line() == "reproduced k21-tab1 f521c1003afb: identical"


def test_a_recorded_model_name_holding_an_equals_sign_can_be_pointed_at():
    """`reproduce --model 'a=b=/path'` for a model named ``a=b`` (a name the configuration accepts) split
    at the first ``=`` and answered "the recipe has no model 'a'"."""
    from report_builder.citations.reproduce import _pairs

    assert _pairs(["a=b=/models/x"], "model", ["a=b", "c"]) == {"a=b": "/models/x"}
    assert _pairs(["c=/m=1"], "model", ["a=b", "c"]) == {"c": "/m=1"}
    assert _pairs(["tiny=/m"], "model") == {"tiny": "/m"}
