"""The one registered Altair theme for every report chart.

Pitfall: charts must not name web fonts or remote assets (the site is fully offline), so the theme
uses a system font stack only.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import altair as alt

FONT = "Arial, 'Liberation Sans', Helvetica, 'Helvetica Neue', sans-serif"
"""Fonts with Arial's metrics first: the static ``chart.svg`` is laid out with text widths measured by
vl-convert (Arial, or its metric twin Liberation Sans), and a browser showing that SVG draws it with the
first family it has, so a wider one (``system-ui`` is DejaVu Sans on many Linux systems) would run legend
titles and subtitles past the drawing's edge ("row-normalised val")."""
TOKEN_FONT = "'DejaVu Sans', " + FONT
"""For text made of tokens and source text (``▁`` word starts, ``⟦…⟧`` marks): Arial and Liberation Sans
lack those glyphs, and vl-convert (the static ``chart.png``) then sets the whole line in a serif fallback
font; DejaVu Sans has them. Only for columns drawn with a ``limit`` (a wider face is cut, never overflows);
a browser without DejaVu Sans draws Arial and takes the missing glyphs from another font."""
# Colour-blind-safe categorical palette (Okabe-Ito) and a sequential scheme for maps.
CATEGORICAL = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
SEQUENTIAL = "blues"
#: The outline of points coloured by a sequential scheme: one end of any such scheme is close to the white
#: page (viridis' yellow) or to the dark scheme's (its dark purple); this grey stands out from both (≥ 3:1).
OUTLINE = "#8c8c8c"
DIVERGING = "redblue"

THEME_NAME = "report_builder"
# Smallest text in any chart: 9 pt at 100 % (12 CSS px, the SVG user unit); titles a step larger.
FONT_SIZE = 12
TITLE_SIZE = 15
PAGE_WIDTH = 900
"""The widest a chart may be drawn: the page's content column on a 1280 px laptop is 938 px, and a wider
drawing is scaled down to it, its 12 px text with it."""

_NARROW = set("il.,:;'|!ijtfI[]()`·")
_WIDE = set("mwMW@%")


def text_width(text: str, size: float = FONT_SIZE, bold: bool = False) -> float:
    """Estimated advance width in px of ``text`` in the system sans-serif (Helvetica/Arial metrics).

    Errs on the wide side, so layouts sized with it leave room; used where Vega cannot measure
    (column widths of static tables, label limits).
    """
    w = 0.0
    for ch in str(text):
        if ch == " ":
            w += 0.28
        elif ch in _NARROW:
            w += 0.3
        elif ch in _WIDE:
            w += 0.86
        elif ch.isupper():
            w += 0.68
        elif ch.isdigit():
            w += 0.56
        elif ord(ch) > 0x2e80:
            w += 1.0
        else:
            w += 0.55
    return w * size * (1.07 if bold else 1.0)


@alt.theme.register(THEME_NAME, enable=False)  # registered, not enabled: active only inside `active()`
def report_theme() -> alt.theme.ThemeConfig:
    """Altair theme: quiet axes, system fonts, Okabe-Ito colours."""
    return {
        "config": {
            "font": FONT,
            "background": "transparent",
            "view": {"stroke": None, "continuousWidth": 360, "continuousHeight": 260},
            "axis": {
                "labelFont": FONT,
                "titleFont": FONT,
                "labelFontSize": FONT_SIZE,
                "titleFontSize": FONT_SIZE,
                "titleFontWeight": "normal",
                "gridColor": "#e6e6e6",
                "domainColor": "#888",
                "tickColor": "#888",
            },
            "legend": {"labelFont": FONT, "titleFont": FONT, "labelFontSize": FONT_SIZE, "titleFontSize": FONT_SIZE,
                       "symbolOpacity": 1},
            "header": {"labelFont": FONT, "titleFont": FONT, "labelFontSize": FONT_SIZE + 1,
                       "titleFontSize": FONT_SIZE + 1},
            "title": {"font": FONT, "fontSize": TITLE_SIZE, "fontWeight": "normal", "anchor": "start",
                      "subtitleFont": FONT, "subtitleFontSize": FONT_SIZE, "subtitleColor": "#444"},
            "range": {"category": CATEGORICAL},
            "text": {"font": FONT, "fontSize": FONT_SIZE},
        }
    }


@contextmanager
def active() -> Iterator[None]:
    """The report's theme for the block (a chart is made into a spec in it: `site.figure_files.chart_to_spec`),
    the caller's own afterwards: importing the figures or building a site (``rb.build`` in a notebook) leaves the
    user's Altair theme as it was."""
    was = alt.theme.active
    alt.theme.enable(THEME_NAME)
    try:
        yield
    finally:
        alt.theme.enable(was)
