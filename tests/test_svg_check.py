"""The exported-SVG checker (tests/svg_check.py) finds each defect it is meant to find, on SVGs Vega wrote."""
from __future__ import annotations

import vl_convert as vlc

from tests.svg_check import check_svg, parse_transform, read_svg


def _svg(spec: dict) -> str:
    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v6.json",
            "config": {"font": "sans-serif", "axis": {"labelFontSize": 12, "titleFontSize": 12},
                       "legend": {"labelFontSize": 12, "titleFontSize": 12}}, **spec}
    return vlc.vegalite_to_svg(spec)


def _kinds(svg: str) -> set[str]:
    return {d.kind for d in check_svg(svg)}


LINE = {"data": {"values": [{"x": 1, "y": 2, "s": "alpha"}, {"x": 2, "y": 3, "s": "beta"}]},
        "mark": "point", "width": 200, "height": 100,
        "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"},
                     "color": {"field": "s", "type": "nominal"}}}


def test_clean_chart_passes():
    assert check_svg(_svg(LINE)) == []


def test_small_text_is_found():
    spec = {**LINE, "config": {"axis": {"labelFontSize": 8}}}
    defects = check_svg(_svg(spec))
    assert any(d.kind == "small text" and "8px" in d.detail for d in defects)


def test_identical_and_faint_legend_colours_are_found():
    same = {**LINE, "encoding": {**LINE["encoding"], "color": {
        "field": "s", "type": "nominal", "scale": {"range": ["#336699", "#336699"]}}}}
    assert any("share #336699" in d.detail for d in check_svg(_svg(same)))
    faint = {**LINE, "mark": {"type": "point", "opacity": 0.2, "filled": True}}
    assert any("faint" in d.detail for d in check_svg(_svg(faint)))


def test_colliding_text_is_found_and_rotation_is_respected():
    rows = [{"c": "a", "t": "a very long cell text that runs on"}, {"c": "b", "t": "next"}]
    table = {"data": {"values": rows}, "mark": {"type": "text", "fontSize": 12}, "width": 120,
             "encoding": {"x": {"field": "c", "type": "nominal"}, "text": {"field": "t"}}}
    assert "overlap" in _kinds(_svg(table))
    # long labels rotated by 90 degrees side by side do not collide
    vals = [{"x": f"label number {k}", "y": k} for k in range(4)]
    rotated = {"data": {"values": vals}, "mark": "bar", "width": {"step": 30},
               "encoding": {"x": {"field": "x", "type": "nominal", "axis": {"labelAngle": -90}},
                            "y": {"field": "y", "type": "quantitative"}}}
    assert "overlap" not in _kinds(_svg(rotated))
    flat = {**rotated, "encoding": {**rotated["encoding"], "x": {"field": "x", "type": "nominal",
                                                                  "axis": {"labelAngle": 0, "labelOverlap": False}}}}
    assert "overlap" in _kinds(_svg(flat))


def test_raw_bpe_markers_are_found():
    vals = [{"t": "Ġman", "v": 1}, {"t": "âĢĵ", "v": 2}, {"t": "▁store", "v": 3}]
    spec = {"data": {"values": vals}, "mark": "bar",
            "encoding": {"y": {"field": "t", "type": "nominal"}, "x": {"field": "v", "type": "quantitative"}}}
    raw = [d.detail for d in check_svg(_svg(spec)) if d.kind == "raw BPE"]
    assert sorted(raw) == sorted(["'Ġman'", "'âĢĵ'"])


def test_transform_and_box_geometry():
    m = parse_transform("translate(10,20) rotate(270) translate(0,3)")
    assert [round(v, 6) + 0.0 for v in m] == [0.0, -1.0, 1.0, 0.0, 13.0, 20.0]
    boxes, legends = read_svg(_svg(LINE))
    assert {s.label for s in legends[0]} == {"alpha", "beta"}
    assert all(b.x1 > b.x0 and b.y1 > b.y0 for b in boxes)
