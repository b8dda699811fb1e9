"""Points coloured by a scheme whose ends are near a background. k24-ln-dims colours its points by viridis
(kept ratio 0 → dark purple, 1 → yellow): on the dark scheme's background the dark-purple points were nearly invisible, and on white the yellow ones. Each point now has an
outline that stands out from both backgrounds (≥ 3:1, WCAG's minimum for graphics), whatever its fill;
likewise k24-ffamp-top's category strip (the palette's yellow on white)."""
from __future__ import annotations

import re

import pandas as pd
import vl_convert as vlc

from report_builder.figures.charts.points import ln_dims_scatter, top_pairs_strip
from report_builder.figures.theme import CATEGORICAL
from tests.figures.contrast import contrast

WHITE = "#ffffff"
SLATE = "#1e2029"  # material's slate background, hsl(232, 15%, 14%): the site's dark scheme


def test_contrast_helper():
    assert round(contrast("#000000", WHITE), 1) == 21.0 and contrast("#440154", SLATE) < 1.5  # viridis' low end


def test_ln_dims_points_stand_out_on_light_and_dark_backgrounds():
    rows = [dict(model="m", layer=0, dim=d, ff_change=0.1 * d, ln_weight=0.5, ln_out_change=0.05 * d,
                 kept_ratio=d / 9) for d in range(10)]
    _check_outlines(ln_dims_scatter(pd.DataFrame(rows), n_layers=1), 10)


def test_ffamp_top_points_stand_out_on_light_and_dark_backgrounds():
    """k24-ffamp-top's strip colours points by category (Okabe-Ito: "other" #F0E442 is 1.2:1 on white)."""
    cats = [f"c{k}" for k in range(7)]
    rows = [dict(model="m", dataset="d", layer=k, rank=1, token_i="a", token_j="b", category=c, amp=0.1 * k,
                 context="a b") for k, c in enumerate(cats)]
    assert contrast(CATEGORICAL[6], WHITE) < 1.5
    _check_outlines(top_pairs_strip(pd.DataFrame(rows), cats), 7)


def _check_outlines(chart, n: int) -> None:
    svg = vlc.vegalite_to_svg(chart.to_dict())
    points = re.findall(r'<path[^>]*aria-roledescription="point"[^>]*>', svg)
    assert len(points) == n, svg[:400]
    for p in points:
        stroke = re.search(r'stroke="(#[0-9a-fA-F]{6})"', p)
        assert stroke, f"a point has no outline: {p}"
        for bg in (WHITE, SLATE):
            assert contrast(stroke.group(1), bg) >= 3, (stroke.group(1), bg)
