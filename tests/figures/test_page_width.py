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


def _long_example_context():
    """The K24 fixtures with the encoder's first example replaced by one of 64 tokens (the examples' limit)."""
    import pandas as pd

    from report_builder.figures.spec import FigureContext

    from tests.fixtures.k24_tables import k24_fixture_roles, k24_fixture_tables

    tables = k24_fixture_tables(0)
    maps = tables["k24_maps"]
    keep = maps[maps["model"] != "tiny-bert"]
    n = 64  # schema.EXAMPLE_TOKENS
    rows = [{"model": "tiny-bert", "example": "1: a long text", "layer": lay, "scope": sc, "i": i, "j": j,
             "token_i": f"w{i}", "token_j": f"w{j}", "value": 1.0 / n}
            for lay in range(2) for sc in maps[maps["model"] == "tiny-bert"]["scope"].unique()
            for i in range(n) for j in range(n)]
    tables["k24_maps"] = pd.concat([keep, pd.DataFrame(rows)[list(maps.columns)]], ignore_index=True)
    return FigureContext(tables=tables, roles=k24_fixture_roles())


def test_map_explorer_with_a_64_token_example_fits_the_page_at_full_text_size():
    """k24-maps was 1130 px wide for a 64-token example (14 px cells), drawn at 0.8x on a laptop (labels
    ~9.6 px), and charts.js squeezed it to 280 px on a phone (cells of 4 px under 12 px labels)."""
    import altair as alt

    from report_builder.figures import theme

    result = figure("k24-maps").build(_long_example_context())
    chart = result.chart
    assert "reach the limit of 64 tokens" in result.reading  # said nothing: only > 64 tokens counted
    with alt.data_transformers.enable("default", max_rows=None):
        spec = chart.to_dict()
        svg = vlc.vegalite_to_svg(spec)
    w = float(re.search(r'<svg[^>]*width="([\d.]+)"', svg).group(1))
    assert w <= PAGE_WIDTH, f"k24-maps drawn {w:.0f} px wide"
    panel = spec["vconcat"][0]
    # sized by its cells (a step, not a number charts.js narrows): a phone scrolls it at full size
    assert panel["width"] == panel["height"] == {"step": theme.FONT_SIZE}
    # the cut is said on the chart itself: these 64 tokens are the first of a longer text
    assert "the first 64 tokens of its text" in svg
