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
