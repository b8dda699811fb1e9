"""Prose and pre-formatted cells print numbers through the published-precision rule (`precision.published`):
the printed text follows from the number the CSV publishes, and noise below the rule changes no digit."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import report_builder.figures as figures
from report_builder.figures.k21 import readings as k21
from report_builder.figures.k24 import readings as k24
from report_builder.precision import published, round_value


def test_published_text_rounds_the_published_number_half_up():
    assert published(21.9500000004, ".1f") == published(21.9499999996, ".1f") == "22.0"  # the CSV says 21.95
    assert published(0.123456789, ".3f") == "0.123" and published(-0.1235, ".3f") == "-0.124"
    assert published(0.1234, ".0%") == "12%" and published(0.125, ".1%") == "12.5%"
    assert published(0.05, "+.2f") == "+0.05" and published(-0.05, "+.2f") == "-0.05"
    assert published(float("nan"), ".2f") == "n/a" and published(float("nan"), ".0%") == "n/a"
    assert published(round_value(1 / 3), ".2f") == "0.33"
    with pytest.raises(ValueError, match="not .Nf"):
        published(1.0, ".2e")


def test_noise_below_the_rule_changes_no_word():
    """Values at a .x5 boundary, moved by float noise (1e-9 relative) either way: the raw print flips, the
    readings do not."""
    for base, spec in ((12.35, ".1f"), (0.125, ".2f"), (1.0005, ".3f")):
        lo, hi = base * (1 - 1e-9), base * (1 + 1e-9)
        assert format(lo, spec) != format(hi, spec)  # what printing the float itself would do
        s = [k21.variants_reading(pd.Series({"a": v, "b": v + 3.0})) for v in (lo, hi)]
        assert s[0] == s[1], s
        e = [k21.expansion_reading(pd.Series({"model": "m", "mean": v, "min": v, "max": v})) for v in (lo, hi)]
        assert e[0] == e[1], e
        stats = [pd.DataFrame({"method": ["ATTN-N", "ATTNRESLN-N"], "mean": [v, v / 2]}) for v in (lo, hi)]
        assert k21.mixing_reading(stats[0], "m") == k21.mixing_reading(stats[1], "m")


def test_no_float_is_formatted_in_the_figures_without_the_rule():
    """No f-string in `figures/` formats a float to a few decimals (``:.3f``, ``:.0%``) itself: every such
    number is printed by `published`."""
    fmt = re.compile(r"\{[^{}]*:[+]?\.[0-9][f%]\}")
    bare = [f"{p.name}: {m.group(0)}" for p in Path(figures.__file__).parent.rglob("*.py")
            for m in fmt.finditer(p.read_text())]
    assert bare == [], bare
    assert len(re.findall(r"pub\(", Path(k24.__file__).read_text())) >= 10  # the readings print through it
