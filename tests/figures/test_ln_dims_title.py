"""k24-ln-dims's per-dimension panels say which layer they show: the static export (chart.svg/png) is
drawn at the slider's first value, and its panels were titled with the model name alone, so a reader of
the PNG could not tell which layer the points belong to."""
from __future__ import annotations

import html
import re

import pandas as pd
import vl_convert as vlc

from report_builder.figures.charts.points import ln_dims_scatter


def _frame(models: dict[str, int]) -> pd.DataFrame:
    rows = [dict(model=m, layer=k, dim=d, ff_change=0.1 * (d + 1), ln_weight=0.5, ln_out_change=0.05,
                 kept_ratio=0.5) for m, n in models.items() for k in range(n) for d in range(3)]
    return pd.DataFrame(rows)


def _texts(chart) -> list[str]:
    svg = vlc.vegalite_to_svg(chart.to_dict())
    return [html.unescape(re.sub(r"<[^>]+>", "", t)) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]


def test_static_panels_name_the_layer_they_show():
    # 0-based layers: "short" has 2 (shown 1-2), "deep" 4 (1-4); the slider starts at 4 // 2 + 1 = 3
    texts = _texts(ln_dims_scatter(_frame({"short": 2, "deep": 4}), n_layers=4, models=["short", "deep"]))
    assert "short, layer 2 of 2" in texts, texts  # beyond its depth: its last layer, said so
    assert "deep, layer 3 of 4" in texts, texts


def test_a_model_name_is_text_in_the_title_expression():
    name = 'o\'b"x\\ + layer_ln + \u00e9'
    texts = _texts(ln_dims_scatter(_frame({name: 2}), n_layers=2, models=[name]))
    assert f"{name}, layer 2 of 2" in texts, texts


def test_the_caption_names_the_summary_panels_in_the_order_drawn():
    """k24-ln-dims's caption named its bottom panels 'Σ LN-output change / Σ FF change ... and the Spearman ρ',
    but the chart draws ρ on the left and the Σ ratio on the right (a reader matched each description to the
    wrong panel). The caption now names them left to right as drawn."""
    from report_builder.figures.registry import figure
    from report_builder.figures.spec import FigureContext
    from tests.fixtures.k24_tables import k24_fixture_roles, k24_fixture_tables

    r = figure("k24-ln-dims").build(FigureContext(tables=k24_fixture_tables(), roles=k24_fixture_roles()))
    svg = html.unescape(vlc.vegalite_to_svg(r.chart.to_dict()))
    rho, kept = "Spearman ρ(FF change, |γ|)", "Σ LN-output change / Σ FF change"
    assert rho in svg and kept in svg
    # the column headers are drawn left to right in document order
    drawn = ["ρ", "Σ"] if svg.index(rho) < svg.index(kept) else ["Σ", "ρ"]
    caption = figure("k24-ln-dims").caption
    named = ["ρ", "Σ"] if caption.index("Spearman ρ") < caption.index("Σ LN-output") else ["Σ", "ρ"]
    assert drawn == named, (drawn, caption)
