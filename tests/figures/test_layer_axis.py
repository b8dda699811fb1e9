"""A quantitative layer axis starts at layer 1 (SPEC §8: layers count from 1).

Vega-Lite nices a quantitative domain by default: a 30-layer model's layers ``[1, 30]`` were drawn on
``[0, 30]``, so the K24 per-layer charts showed a "layer 0" tick under the title "layer (1 = first)".
Checked on drawn SVGs (the labels a reader sees) and, for every registered figure, on its spec.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest
import vl_convert as vlc

from report_builder.figures.charts.data import LAYER_TITLE
from report_builder.figures.charts.lines import per_layer_lines
from report_builder.figures.charts.points import top_pairs_strip
from report_builder.figures.registry import all_figures
from report_builder.figures.spec import NotConfigured
from tests.fixtures.contexts import PAPER_CONTEXTS, context

N_LAYERS = 30  # SmolLM2-135M's depth: [1, 30] niced to [0, 30]


def _labels(chart) -> list[str]:
    svg = vlc.vegalite_to_svg(chart.to_dict())
    return [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]


def _x_tick_numbers(labels: list[str], y_values: set[str]) -> list[int]:
    return [int(t) for t in labels if re.fullmatch(r"\d+", t) and t not in y_values]


def test_per_layer_lines_has_no_layer_zero_tick():
    # 0-based table layers 0..29 (shown 1..30); y values far from the layer range so their labels differ
    df = pd.DataFrame({"layer": range(N_LAYERS), "model": "m", "change": [500.0 + k for k in range(N_LAYERS)]})
    labels = _labels(per_layer_lines(df, "change", "model", y_title="change", y_zero=False))
    assert LAYER_TITLE in labels
    ticks = _x_tick_numbers(labels, {t for t in labels if t.isdigit() and int(t) >= 500})
    assert ticks and min(ticks) >= 1 and max(ticks) <= N_LAYERS, ticks


def test_top_pairs_strip_has_no_layer_zero_tick():
    df = pd.DataFrame({"layer": list(range(N_LAYERS)), "rank": 1, "token_i": "a", "token_j": "b",
                       "category": "other", "amp": [0.5] * N_LAYERS, "context": "a b", "model": "m",
                       "dataset": "d"})
    labels = _labels(top_pairs_strip(df, ["other"]))
    ticks = [int(t) for t in labels if re.fullmatch(r"\d+", t)]  # the FF-amp axis labels are decimals
    assert ticks and min(ticks) >= 1, ticks


def _layer_x_encodings(node):
    if isinstance(node, dict):
        x = (node.get("encoding") or {}).get("x")
        if isinstance(x, dict) and x.get("field") == "layer" and x.get("type") == "quantitative":
            yield x
        for v in node.values():
            yield from _layer_x_encodings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _layer_x_encodings(v)


CASES = [(s, name) for s in all_figures() for name in PAPER_CONTEXTS[s.paper]]


def _chart(spec, name) -> dict:
    """The figure's chart as a dict for the context ``name``; {} when it is not configured there or has none."""
    try:
        r = spec.build(context(name))
    except NotConfigured:
        return {}
    return r.chart.to_dict() if r.chart is not None else {}


@pytest.mark.parametrize("spec,name", CASES, ids=[f"{s.id}@{n}" for s, n in CASES])
def test_every_quantitative_layer_axis_is_not_niced(spec, name):
    for x in _layer_x_encodings(_chart(spec, name)):
        scale = x.get("scale") or {}
        assert scale.get("nice") is False and scale.get("zero") is False, (spec.id, x)


def _layer_axes(node):
    """Every x/y encoding of a layer column (``layer``, ``Layer`` of the K21 heatmaps, ``_layer`` of the per-layer chart)."""
    if isinstance(node, dict):
        for ch in ("x", "y"):
            enc = (node.get("encoding") or {}).get(ch)
            if isinstance(enc, dict) and str(enc.get("field", "")).lower() in ("layer", "_layer"):
                yield enc
        for v in node.values():
            yield from _layer_axes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _layer_axes(v)


@pytest.mark.parametrize("spec,name", CASES, ids=[f"{s.id}@{n}" for s, n in CASES])
def test_every_layer_axis_says_layers_count_from_one(spec, name):
    """One vocabulary: a layer axis is titled "layer (1 = first)" wherever it appears (the K21 category
    heatmaps said "layer" alone, beside K21 Table 8's and every K24 chart's "layer (1 = first)")."""
    for enc in _layer_axes(_chart(spec, name)):
        title = enc.get("title", (enc.get("axis") or {}).get("title"))
        assert title == LAYER_TITLE or (enc.get("axis", True) is None), (spec.id, enc)


@pytest.mark.parametrize("layers", [2, 3, 5])
def test_a_model_of_few_layers_gets_one_label_per_layer(layers):
    """Before: a 2-layer model (bert-tiny of the paper preset, a tiny model) had the x labels "1 2 2": Vega put a
    tick at layer 1.5 (``tickMinStep`` does not reach it) and the integer format labelled it 2; 3 layers: "1 2 2 3 3"."""
    import altair as alt

    from report_builder.figures.charts.data import layer_x

    df = pd.DataFrame({"layer": list(range(1, layers + 1)), "v": [float(k) for k in range(layers)]})
    chart = alt.Chart(df).mark_point().encode(x=layer_x(), y=alt.Y("v:Q", axis=None)).properties(width=220)
    assert [t for t in _labels(chart) if t.strip() and t != LAYER_TITLE] == [str(k) for k in range(1, layers + 1)]


def test_the_top_pairs_strip_of_a_two_layer_model_labels_each_layer_once():
    df = pd.DataFrame({"model": ["m"] * 4, "dataset": ["d"] * 4, "layer": [0, 0, 1, 1], "rank": [1, 2, 1, 2],
                       "amp": [0.1, 0.2, 0.3, 0.4], "token_i": ["a"] * 4, "token_j": ["b"] * 4,
                       "category": ["other"] * 4, "context": ["x"] * 4})
    ticks = [t for t in _labels(top_pairs_strip(df, ["other"])) if re.fullmatch(r"\d+", t)]  # (FF-amp: decimals)
    assert sorted(ticks) == ["1", "2"], ticks
