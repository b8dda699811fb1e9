"""Per-figure files under ``figures/<id>/``: spec.json, data.csv, chart.svg, chart.png, data-<hash>.json.

``spec.json`` is the self-contained Vega-Lite spec (data inline). The spec placed on the page keeps
small datasets inline and points large ones (over ``inline_limit`` bytes of JSON) at content-hashed
``data-<hash>.json`` files by relative URL, so pages stay light when served over HTTP.
Pitfall: Altair numbers its parameters/views per process (``param_7``); names are renumbered in
order of appearance so the content hash is stable across builds.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import vl_convert as vlc

from report_builder.site.htmltable import fmt

VL_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
DEFAULT_INLINE_LIMIT = 200_000  # bytes of JSON data kept inline in a page


@dataclass
class FigureFiles:
    """What was written for one figure (paths relative to the site root)."""

    content_hash: str
    page_spec: dict[str, Any] | None
    files: dict[str, str]  # kind -> relative path (svg, png, csv, json, data-*)


def sha(text: str | bytes, n: int = 12) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:n]


def _canonical_names(text: str) -> str:
    for prefix in ("param", "view", "concat", "layer"):
        seen: dict[str, str] = {}

        def repl(m: re.Match, seen=seen, prefix=prefix) -> str:
            return seen.setdefault(m.group(0), f"{prefix}_{len(seen) + 1}")

        text = re.sub(rf"\b{prefix}_\d+\b", repl, text)
    return text


def chart_to_spec(chart: Any) -> dict[str, Any]:
    """An Altair chart (or a ready Vega-Lite dict) as a plain, canonical Vega-Lite dict."""
    if isinstance(chart, dict):
        spec = copy.deepcopy(chart)
    else:
        import altair as alt

        from report_builder.figures import theme

        theme.enable()
        with alt.data_transformers.enable("default", max_rows=None):
            spec = chart.to_dict()
    return json.loads(_canonical_names(json.dumps(spec, sort_keys=True)))


def table_spec(table: pd.DataFrame, max_rows: int = 40) -> dict[str, Any]:
    """A Vega-Lite text-mark rendering of a table, so tables get an SVG/PNG like charts do."""
    shown = table.head(max_rows)
    cols = [str(c) for c in shown.columns]
    values = [
        {"row": r, "column": str(c), "text": fmt(v)}
        for r, rec in enumerate(shown.itertuples(index=False, name=None))
        for c, v in zip(cols, rec)
    ]
    width = max(120, min(1100, sum(max(60, 7 * max([len(c)] + [len(fmt(v)) for v in shown[c0]]))
                                   for c, c0 in zip(cols, shown.columns))))
    return {
        "$schema": VL_SCHEMA,
        "data": {"values": values},
        "mark": {"type": "text", "fontSize": 11},
        "encoding": {
            "x": {"field": "column", "type": "nominal", "sort": cols, "title": None,
                  "axis": {"orient": "top", "labelAngle": 0, "domain": False, "ticks": False,
                           "labelFontWeight": "bold", "labelLimit": 200}},
            "y": {"field": "row", "type": "ordinal", "axis": None},
            "text": {"field": "text", "type": "nominal"},
        },
        "width": width,
        "height": 20 * max(1, len(shown)),
        "config": {"view": {"stroke": None}},
    }


def _size(values: Any) -> int:
    return len(values) if isinstance(values, str) else len(json.dumps(values, separators=(",", ":")))


def _dataset_formats(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``format`` each named dataset is referenced with (first reference wins)."""
    out: dict[str, dict[str, Any]] = {}
    for node in _data_nodes(spec):
        data = node["data"]
        if "name" in data and data.get("format"):
            out.setdefault(data["name"], data["format"])
    return out


def _data_nodes(node: Any):
    """Every dict of a Vega-Lite spec that carries a ``data`` dict, parents before children.

    The caller may replace ``node["data"]`` when it gets a node; the walk then continues below it.
    """
    if isinstance(node, dict):
        if isinstance(node.get("data"), dict):
            yield node
        for v in list(node.values()):
            yield from _data_nodes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _data_nodes(v)


def _url_format(fmt_: dict[str, Any] | None) -> dict[str, Any]:
    out = {"type": "json", **(fmt_ or {})}
    out.setdefault("parse", None)
    return out


def _externalise(spec: dict[str, Any], fig_dir: Path, rel_dir: str, inline_limit: int,
                 files: dict[str, str]) -> dict[str, Any]:
    """Copy of ``spec`` with datasets above ``inline_limit`` moved to content-hashed JSON files."""
    page = copy.deepcopy(spec)
    urls: dict[str, str] = {}

    def write(values: Any, fmt_: dict[str, Any] | None = None) -> str:
        # a string holds already-serialised data (Altair's compact JSON/CSV text): written verbatim
        text = values if isinstance(values, str) else json.dumps(values, separators=(",", ":"))
        ext = (fmt_ or {}).get("type", "json") if isinstance(values, str) else "json"
        name = f"data-{sha(text)}.{ext}"
        (fig_dir / name).write_text(text, encoding="utf-8")
        files[name] = f"{rel_dir}/{name}"
        return f"{rel_dir}/{name}"

    formats = _dataset_formats(page)
    for name, values in list(page.get("datasets", {}).items()):
        if _size(values) > inline_limit:
            urls[name] = write(values, formats.get(name))
            del page["datasets"][name]
    if "datasets" in page and not page["datasets"]:
        del page["datasets"]

    for node in _data_nodes(page):
        data = node["data"]
        # parse: null keeps the records exactly as inline data would be (no type inference,
        # which would turn array fields meant for `flatten` into strings)
        if data.get("name") in urls:
            node["data"] = {"url": urls[data["name"]], "format": _url_format(data.get("format"))}
        elif "values" in data and _size(data["values"]) > inline_limit:
            node["data"] = {"url": write(data["values"], data.get("format")),
                            "format": _url_format(data.get("format"))}
    return page


def write_figure_files(fig_id: str, data: pd.DataFrame, chart: Any | None, table: pd.DataFrame | None,
                       figures_dir: Path, inline_limit: int = DEFAULT_INLINE_LIMIT) -> FigureFiles:
    """Write every file of one figure and return its content hash and the spec for the page.

    Args:
        fig_id: permanent figure id (the folder name).
        data: the tidy frame behind the figure (written as ``data.csv``).
        chart: an Altair chart / Vega-Lite dict, or ``None`` for a pure table.
        table: the frame shown for tables (rendered as a text-mark chart when ``chart`` is None).
        figures_dir: ``<docs>/figures``; files go to ``figures_dir/<fig_id>/``.
        inline_limit: datasets with more JSON bytes than this are written to files.
    """
    fig_dir = figures_dir / fig_id
    fig_dir.mkdir(parents=True, exist_ok=True)
    rel = f"figures/{fig_id}"
    files: dict[str, str] = {}

    csv = data.to_csv(index=False)
    (fig_dir / "data.csv").write_text(csv, encoding="utf-8")
    files["csv"] = f"{rel}/data.csv"

    if chart is not None:
        spec = chart_to_spec(chart)
        on_page = True
    else:
        spec = table_spec(table if table is not None else data)
        on_page = False
    spec_text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    if len(spec_text) < inline_limit:
        spec_text = json.dumps(spec, sort_keys=True, indent=1)  # readable when small
    (fig_dir / "spec.json").write_text(spec_text, encoding="utf-8")
    files["json"] = f"{rel}/spec.json"

    (fig_dir / "chart.svg").write_text(vlc.vegalite_to_svg(spec), encoding="utf-8")
    files["svg"] = f"{rel}/chart.svg"
    svg = (fig_dir / "chart.svg").read_text(encoding="utf-8")
    (fig_dir / "chart.png").write_bytes(vlc.svg_to_png(svg, scale=2))  # same pixels, no second Vega run
    files["png"] = f"{rel}/chart.png"

    content_hash = sha(spec_text + "\n" + csv)
    page_spec = _externalise(spec, fig_dir, rel, inline_limit, files) if on_page else None
    return FigureFiles(content_hash=content_hash, page_spec=page_spec, files=files)
