"""A figure's Vega-Lite spec as published: its numbers rounded, its datasets named by content, large
datasets moved to content-hashed files, and two specs compared by content.

- `published_spec`: every number rounded by the published-precision rule (`precision`), inline JSON
  data (`figures.charts.data.inline_data`: text) parsed and rounded too, and each named dataset renamed
  after its rounded values (Altair names it by a hash of the unrounded ones, which float noise changes).
- `externalise`: the page's copy of a spec, datasets above the inline limit written to
  ``data-<hash>.json`` beside it, each with a script twin ``data-<hash>.json.js`` (`data_script`) that
  the page's charts.js loads instead, so a site opened from disk (file://, where a page may not fetch a
  file) shows every interactive chart too.
- `comparable_spec`: a spec with its dataset names replaced by their order of reference, so specs whose
  data differ only within the precision compare equal (`precision.json_within`).

Pitfall: a dataset name is referenced from ``data.name`` anywhere in the spec (layers, lookups): renames
go through the JSON text of the whole spec, never one node.
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from report_builder import precision


def sha(text: str | bytes, n: int = 12) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:n]


def published_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with every number rounded by the published-precision rule (`precision.round_json`: data,
    domains a builder computed from data, sizes alike) and each named dataset renamed after its rounded
    values (Altair names a dataset by a hash of its unrounded values, which float noise would change)."""
    spec = copy.deepcopy(spec)
    formats = _dataset_formats(spec)
    for node in _data_nodes(spec):  # inline JSON text (`figures.charts.data.inline_data`): parsed, rounded
        data = node["data"]
        if isinstance(data.get("values"), str):
            data["values"] = _rounded_text(data["values"], data.get("format"))
    datasets = spec.get("datasets")
    if isinstance(datasets, dict):
        for name, values in datasets.items():
            if isinstance(values, str):
                datasets[name] = _rounded_text(values, formats.get(name))
    spec = precision.round_json(spec)
    datasets = spec.get("datasets")
    if not isinstance(datasets, dict) or not datasets:
        return spec
    names = {old: "data-" + sha(values if isinstance(values, str) else
                                json.dumps(values, sort_keys=True, separators=(",", ":")), 32)
             for old, values in datasets.items()}
    text = json.dumps(spec, sort_keys=True)
    for old, new in names.items():
        text = text.replace(json.dumps(old), json.dumps(new))
    return json.loads(text)


def _rounded_text(text: str, fmt_: dict[str, Any] | None) -> str:
    """Inline data held as JSON text (``format: json``) with its numbers rounded by the rule, written
    compactly as `inline_data` writes it; any other text (CSV) is kept as it is."""
    if (fmt_ or {}).get("type", "json") != "json":
        return text
    try:
        values = json.loads(text)
    except ValueError:
        return text
    return json.dumps(precision.round_json(values), separators=(",", ":"), allow_nan=False)


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


DATA_SCRIPT = "window.rbData = window.rbData || {};\nwindow.rbData[{url}] = {value};\n"
"""``<data file>.js``: the data file's text for charts.js under its URL, as a JSON string literal (ASCII
only: no character can end the script early), parsed by charts.js for JSON data, kept as text for CSV."""


def data_script(url: str, text: str) -> str:
    """The script twin of a data file (`DATA_SCRIPT`)."""
    return DATA_SCRIPT.replace("{url}", json.dumps(url)).replace("{value}", json.dumps(text))


def externalise(spec: dict[str, Any], fig_dir: Path, rel_dir: str, inline_limit: int,
                 files: dict[str, str]) -> dict[str, Any]:
    """Copy of ``spec`` with datasets above ``inline_limit`` moved to content-hashed JSON files."""
    page = copy.deepcopy(spec)
    urls: dict[str, str] = {}

    def write(values: Any, fmt_: dict[str, Any] | None = None) -> str:
        # a string holds already-serialised data (Altair's compact JSON/CSV text): written verbatim
        text = values if isinstance(values, str) else json.dumps(values, separators=(",", ":"))
        ext = (fmt_ or {}).get("type", "json") if isinstance(values, str) else "json"
        name = f"data-{sha(text)}.{ext}"
        url = f"{rel_dir}/{name}"
        (fig_dir / name).write_text(text, encoding="utf-8")
        files[name] = url
        # the same data as a script (`DATA_SCRIPT`): charts.js loads it with a <script> element, which a
        # page opened from disk (file://) may do where it may not fetch a file
        (fig_dir / f"{name}.js").write_text(data_script(url, text), encoding="utf-8")
        files[f"{name}.js"] = f"{url}.js"
        return url

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


def comparable_spec(spec: Any) -> Any:
    """A Vega-Lite spec with its named datasets renamed by order of first reference (``dataset-0``, ...)
    and listed in that order, so two specs whose data differ only within the precision compare equal
    whatever names their data hashed to (`published_spec`)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("datasets"), dict):
        return spec
    rest = {k: v for k, v in spec.items() if k != "datasets"}
    datasets = spec["datasets"]
    order: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in sorted(node):
                v = node[k]
                if k == "name" and isinstance(v, str) and v in datasets and v not in order:
                    order.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(rest)
    order += sorted(n for n in datasets if n not in order)
    text = json.dumps(rest, sort_keys=True)
    for k, name in enumerate(order):
        text = text.replace(json.dumps(name), json.dumps(f"dataset-{k}"))
    out = json.loads(text)
    out["datasets"] = [datasets[n] for n in order]
    return out
