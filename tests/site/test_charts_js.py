"""charts.js's phone layout, run under node (no browser): ``window.rbAdapt`` on a figure's spec at a
390 px window, then drawn by vl-convert. A model x dataset grid (row and column facets: k24-ctx-*,
k24-models, k24-ffamp-top's strip) kept its second dataset to the right of the first, off a phone's screen;
column-only grids were already stacked."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import altair as alt
import pytest
import vl_convert as vlc

from report_builder.figures.registry import figure
from report_builder.site.paths import resources_dir
from tests.fixtures.contexts import context

NODE = shutil.which("node")
PHONE = 390

_RUN = """
const fs = require("fs");
global.window = {innerWidth: %d, addEventListener() {}};
global.document = {readyState: "complete", body: {getAttribute() { return null; }},
                   querySelectorAll() { return []; }, documentElement: {setAttribute() {}}, head: {}};
global.MutationObserver = undefined;
eval(fs.readFileSync(%s, "utf8"));
const spec = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(window.rbAdapt(spec)));
"""


def adapt_on_phone(spec: dict, width: int = PHONE) -> dict:
    """``spec`` as charts.js adapts it for a window ``width`` px wide."""
    js = str(resources_dir() / "templates" / "assets" / "charts.js")
    out = subprocess.run([NODE, "-e", _RUN % (width, json.dumps(js))], input=json.dumps(spec),
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _svg_width(spec: dict) -> float:
    return float(re.search(r'<svg[^>]*width="([\d.]+)"', vlc.vegalite_to_svg(spec)).group(1))


@pytest.mark.skipif(NODE is None, reason="needs node")
@pytest.mark.parametrize("fid", ["k24-ctx-components", "k24-ctx-cumulative", "k24-models", "k24-ffamp-top"])
def test_model_by_dataset_grids_stack_on_a_phone(fid):
    with alt.data_transformers.enable("default", max_rows=None):
        spec = figure(fid).build(context("k24")).chart.to_dict()
    grids = [n for n in _facets(spec) if "row" in n["facet"] and "column" in n["facet"]]
    assert grids, f"{fid}: no model x dataset grid (the check would pass vacuously)"
    phone = adapt_on_phone(spec)
    assert not [n for n in _facets(phone) if "column" in n["facet"]], "a grid keeps a column facet"
    svg = vlc.vegalite_to_svg(phone)
    # every (model, dataset) panel is there, one below the other
    for m in ("tiny-bert", "tiny-llama"):
        for ds in ("wiki", "sst2"):
            assert f"{m} · {ds}" in svg
    # k24-ffamp-top's table is wider than a phone on its own (it scrolls); the grids are not
    if fid != "k24-ffamp-top":
        assert _svg_width(phone) <= PHONE, f"{fid} drawn {_svg_width(phone):.0f} px wide on a phone"


def _facets(node, out=None):
    out = [] if out is None else out
    if isinstance(node, dict):
        if isinstance(node.get("facet"), dict):
            out.append(node)
        for v in node.values():
            _facets(v, out)
    elif isinstance(node, list):
        for v in node:
            _facets(v, out)
    return out
