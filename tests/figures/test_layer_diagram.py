"""The K24 layer diagram stays legible in both colour schemes.

Its blocks are light boxes in either scheme; the site's dark scheme (templates/assets/charts.js) turns
every text mark without its own colour light, which made the block labels (ATTN, LN₁, FF, ⊕, ...)
vanish into their boxes. A label inside a box carries a dark colour of its own; the ``x``/``y`` labels
on the page do not, so they follow the scheme.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from report_builder import schema
from report_builder.figures.charts.diagrams import layer_diagram
from tests.figures.contrast import contrast

CHARTS_JS = Path(__file__).resolve().parents[2] / "templates" / "assets" / "charts.js"


def _dark_text_colour() -> str:
    """The colour charts.js gives text marks in the dark scheme."""
    m = re.search(r'text:\s*\{\s*color:\s*"(#[0-9a-fA-F]{6})"', CHARTS_JS.read_text(encoding="utf-8"))
    assert m, "charts.js no longer sets a dark-scheme text colour"
    return m.group(1)


def _mark(layer: dict) -> dict:
    return layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}


def _rows(spec: dict, layer: dict) -> list[dict]:
    data = layer["data"]
    values = spec["datasets"][data["name"]] if "name" in data else data["values"]
    return json.loads(values) if isinstance(values, str) else values


def _box_fills(spec: dict) -> list[str]:
    """The fills of the diagram's boxes: the colour range of its rect layer."""
    (rect,) = [lay for lay in spec["layer"] if _mark(lay)["type"] == "rect"]
    return rect["encoding"]["color"]["scale"]["range"]


def _text_layers(spec: dict) -> list[tuple[dict, list[dict]]]:
    """The node label layers (the scope markers' labels, coloured like their markers, have no kind)."""
    out = [(_mark(lay), _rows(spec, lay)) for lay in spec["layer"]
           if _mark(lay)["type"] == "text" and lay["encoding"]["text"]["field"] == "label"]
    return [(mark, rows) for mark, rows in out if rows and "kind" in rows[0]]


@pytest.mark.parametrize("layout", schema.LAYOUTS, ids=lambda lay: lay.id)
def test_block_labels_are_dark_on_their_light_boxes(layout):
    spec = layer_diagram(layout, "t").to_dict()
    dark_text, fills = _dark_text_colour(), _box_fills(spec)
    assert all(contrast(dark_text, fill) < 3 for fill in fills)  # why a label needs its own colour
    boxed = 0
    for mark, rows in _text_layers(spec):
        kinds = {r["kind"] for r in rows}
        if kinds & {"box", "add"}:
            assert kinds <= {"box", "add"}, kinds  # no page label shares the boxes' fixed colour
            assert "color" in mark, "a label inside a box takes the scheme's text colour"
            assert all(contrast(mark["color"], fill) >= 4.5 for fill in fills), mark["color"]
            boxed += len(rows)
        else:
            assert kinds == {"io"} and "color" not in mark  # x and y follow the page's scheme
    assert boxed == len(layout.blocks)
