"""The one registered Altair theme for every report chart.

Pitfall: charts must not name web fonts or remote assets (the site is fully offline), so the theme
uses a system font stack only.
"""
from __future__ import annotations

import altair as alt

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
# Colour-blind-safe categorical palette (Okabe-Ito) and a sequential scheme for maps.
CATEGORICAL = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
SEQUENTIAL = "blues"
DIVERGING = "redblue"

THEME_NAME = "report_builder"


@alt.theme.register(THEME_NAME, enable=True)
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
                "labelFontSize": 11,
                "titleFontSize": 12,
                "titleFontWeight": "normal",
                "gridColor": "#e6e6e6",
                "domainColor": "#888",
                "tickColor": "#888",
            },
            "legend": {"labelFont": FONT, "titleFont": FONT, "labelFontSize": 11, "titleFontSize": 12},
            "header": {"labelFont": FONT, "titleFont": FONT, "labelFontSize": 12, "titleFontSize": 12},
            "title": {"font": FONT, "fontSize": 14, "fontWeight": "normal", "anchor": "start"},
            "range": {"category": CATEGORICAL},
            "text": {"font": FONT},
        }
    }


def enable() -> None:
    """Make sure the report theme is active (idempotent)."""
    alt.theme.enable(THEME_NAME)
