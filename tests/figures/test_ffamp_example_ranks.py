"""k24-ffamp-example's rank numbers stay legible in the dark scheme: charts.js gives every text mark
without a colour of its own the dark scheme's light text colour, and the ranks sit on the map's light
cells, where they vanished. Each rank carries its own colour: dark on a light cell, white on a dark one."""
from __future__ import annotations

import re

import pandas as pd
import vl_convert as vlc

from report_builder.figures.k24.ffamp_example import annotated_amp_map

DARK_SCHEME_TEXT = "#e3e3e3"  # templates/assets/charts.js, DARK.text.color


def _map():
    n = 5
    cells = pd.DataFrame([dict(i=i, j=j, token_i=f"t{i}", amp=(-1.0 if i == j else 0.02)) for i in range(n)
                          for j in range(n)])
    cells.loc[(cells.i == 3) & (cells.j == 1), "amp"] = 0.9   # rank 1: a dark cell
    cells.loc[(cells.i == 4) & (cells.j == 2), "amp"] = 0.1   # rank 2: a light cell
    top = pd.DataFrame([dict(i=3, j=1, rank=1, amp=0.9, category="other"),
                        dict(i=4, j=2, rank=2, amp=0.1, category="other")])
    return annotated_amp_map(cells, top, "t")


def _rank_fills(spec: dict) -> dict[str, str]:
    spec = {**spec, "config": {**spec.get("config", {}), "text": {"color": DARK_SCHEME_TEXT}}}
    svg = vlc.vegalite_to_svg(spec)
    out = {}
    for attrs, text in re.findall(r"<text([^>]*)>(\d)</text>", svg):
        if 'aria-roledescription="text mark"' not in attrs:
            continue  # a legend's or an axis's label
        m = re.search(r'fill="([^"]+)"', attrs)
        out[text] = m.group(1) if m else ""
    return out


def test_ranks_have_their_own_colour_in_the_dark_scheme():
    fills = _rank_fills(_map().to_dict())
    assert set(fills) == {"1", "2"}, fills
    assert fills["1"].lower() in ("white", "#fff", "#ffffff"), fills  # on the dark cell
    assert fills["2"].lower() == "#222", fills                         # on the light cell
