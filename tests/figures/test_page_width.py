"""A chart wider than the page's content column (938 px on a 1280 px laptop) is drawn scaled down, its
12 px text with it: K21 Fig. 3 and its variants (five heatmap panels in one row, 1089 px) were shown at
0.83×, their cell values at 10 px. Their panels now wrap when one row does not fit."""
from __future__ import annotations

import re

import vl_convert as vlc

from report_builder.figures.k21.categories import PAGE_WIDTH, panel_columns
from report_builder.figures.registry import figure
from tests.fixtures.contexts import context


def _width(chart) -> float:
    svg = vlc.vegalite_to_svg(chart.to_dict())
    return float(re.search(r'<svg[^>]*width="([\d.]+)"', svg).group(1))


def test_category_heatmaps_fit_the_page():
    for fid, ctx in (("k21-fig3", "k21-plain"), ("k21-fig5", "k21-full")):
        w = _width(figure(fid).build(context(ctx)).chart)
        assert w <= PAGE_WIDTH, f"{fid} drawn {w:.0f} px wide"


def test_panels_stay_in_one_row_when_they_fit():
    assert panel_columns(5, 3) == 5  # a causal model's three categories: one row, as before
    assert panel_columns(5, 5) == 3  # five categories: 3 + 2
