"""Per-figure files under ``figures/<id>/``: spec.json, data.csv, chart.svg, chart.png, data-<hash>.json(.js).

``spec.json`` is the self-contained Vega-Lite spec (data inline). The spec placed on the page keeps
small datasets inline and points large ones (over ``inline_limit`` bytes of JSON) at content-hashed
``data-<hash>.json`` files by relative URL, so pages stay light; each has a script twin
``data-<hash>.json.js`` (`data_script`) that the page's charts.js loads instead, so a site opened from
disk (file://, where a page may not fetch a file) shows every interactive chart too.
Pitfall: Altair numbers its parameters/views per process (``param_7``); names are renumbered in
order of appearance so the content hash is stable across builds.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import vl_convert as vlc

from report_builder import guard, schema
from report_builder.site.figure_cache import RENDER_ENTRY
from report_builder.site.htmltable import fmt_column

VL_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
DEFAULT_INLINE_LIMIT = 200_000  # bytes of JSON data kept inline in a page


@dataclass
class FigureFiles:
    """What was written for one figure (paths relative to the site root)."""

    content_hash: str
    page_spec: dict[str, Any] | None
    files: dict[str, str]  # kind -> relative path (svg, png, csv, json, data-*)
    reused: bool = False  # chart.svg/png taken from the render cache (same content hash)


def sha(text: str | bytes, n: int = 12) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:n]


def version_hash(spec_text: str, csv: str, svg: str | None = None) -> str:
    """A figure version's content hash: its Vega-Lite spec, its ``data.csv`` and, for a drawn diagram,
    its ``chart.svg`` (the one definition: the site names versions by it, `reproduce` compares it)."""
    return sha(spec_text + "\n" + csv + ("\n" + svg if svg is not None else ""))


def _canonical_names(text: str) -> str:
    seen: dict[str, dict[str, str]] = {p: {} for p in ("param", "view", "concat", "layer")}

    def repl(m: re.Match) -> str:  # one pass; each prefix numbered in its own order of appearance
        names = seen[m.group(1)]
        return names.setdefault(m.group(0), f"{m.group(1)}_{len(names) + 1}")

    return _NAME_RE.sub(repl, text)


_NAME_RE = re.compile(r"\b(param|view|concat|layer)_\d+\b")


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


def table_spec(table: pd.DataFrame, max_rows: int = 40, title: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Vega-Lite text-mark rendering of a table, so tables get an SVG/PNG like charts do.

    Each column is as wide as its widest cell (estimated text width plus padding), text columns are
    left-aligned and numeric ones right-aligned, so no two cells touch. When rows are cut, a last
    line says how many more the CSV holds.
    """
    from report_builder.figures import theme

    size, pad, row_h = theme.FONT_SIZE, 18.0, 20
    shown = table.head(max_rows)
    cols = [str(c) for c in shown.columns]
    numeric = [pd.api.types.is_numeric_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c])
               for c in shown.columns]
    texts = [fmt_column(shown[c]) for c in shown.columns]
    widths = [max([theme.text_width(h, size, bold=True)] + [theme.text_width(t, size) for t in col]) + pad
              for h, col in zip(cols, texts)]
    lefts = [sum(widths[:k]) for k in range(len(widths))]
    width = max(120.0, sum(widths))

    def x_of(k: int) -> float:
        return round(lefts[k] + widths[k] - pad / 2 if numeric[k] else lefts[k] + pad / 2, 1)

    values = [{"x": x_of(k), "y": 0, "text": h, "part": "head", "align": "right" if numeric[k] else "left"}
              for k, h in enumerate(cols)]
    for r in range(len(shown)):
        for k in range(len(cols)):
            values.append({"x": x_of(k), "y": (r + 1) * row_h + 4, "text": texts[k][r], "part": "body",
                           "align": "right" if numeric[k] else "left"})
    n_rows = len(shown) + 1
    if len(table) > len(shown):
        values.append({"x": pad / 2, "y": n_rows * row_h + 8, "text": f"… {len(table) - len(shown)} more rows "
                       f"(first {len(shown)} of {len(table)} shown; data.csv has all)", "part": "note",
                       "align": "left"})
        n_rows += 1
    height = n_rows * row_h + 8
    px = {"type": "linear", "zero": False, "nice": False}

    def layer(part: str, align: str, **mark: Any) -> dict[str, Any]:
        return {
            "transform": [{"filter": {"and": [{"field": "part", "equal": part}, {"field": "align", "equal": align}]}}],
            "mark": {"type": "text", "fontSize": size, "align": align, "baseline": "middle", **mark},
            "encoding": {"x": {"field": "x", "type": "quantitative", "axis": None,
                               "scale": {**px, "domain": [0, width], "range": [0, width]}},
                         "y": {"field": "y", "type": "quantitative", "axis": None,
                               "scale": {**px, "domain": [0, height], "range": [0, height]}},
                         "text": {"field": "text", "type": "nominal"}},
        }

    layers = [layer("head", a, fontWeight="bold") for a in ("left", "right")]
    layers += [layer("body", a) for a in ("left", "right")] + [layer("note", "left", fontStyle="italic")]
    rule = {"data": {"values": [{"x": 0, "x2": width, "y": row_h / 2 + 6}]},
            "mark": {"type": "rule", "color": "#888"},
            "encoding": {"x": {"field": "x", "type": "quantitative", "axis": None,
                               "scale": {**px, "domain": [0, width], "range": [0, width]}},
                         "x2": {"field": "x2"},
                         "y": {"field": "y", "type": "quantitative", "axis": None,
                               "scale": {**px, "domain": [0, height], "range": [0, height]}}}}
    spec: dict[str, Any] = {
        "$schema": VL_SCHEMA,
        "data": {"values": values},
        "layer": layers + [rule],
        "width": round(width, 1),
        "height": height,
        "config": {"view": {"stroke": None}, "font": theme.FONT, "text": {"font": theme.FONT},
                   "title": {"font": theme.FONT, "fontSize": theme.TITLE_SIZE, "fontWeight": "normal",
                             "anchor": "start", "subtitleFontSize": size, "subtitleFont": theme.FONT}},
    }
    if title:
        spec["title"] = title
    return spec


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
"""``<data file>.js``: the data file's content for charts.js under its URL, as a JSON string literal (ASCII
only: no character can end the script early) parsed by charts.js for JSON data, kept as text for CSV."""


def data_script(url: str, text: str) -> str:
    """The script twin of a data file (`DATA_SCRIPT`)."""
    return DATA_SCRIPT.replace("{url}", json.dumps(url)).replace("{value}", json.dumps(text))


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


def export_title(title: str, fig_id: str, models: tuple[str, ...] = (), datasets: tuple[str, ...] = (),
                 dataset_names: dict[str, str] | None = None) -> dict[str, Any]:
    """The title of a static export: what it shows, which models and data, and its permanent id.

    Layers and scopes are named by the chart itself (panel headers), where they apply.
    """
    names = dataset_names or {}
    sub = []
    if models:
        sub.append(("Model: " if len(models) == 1 else "Models: ") + ", ".join(models))
    if datasets:
        sub.append("Data: " + "; ".join(f"{d} = {names[d]}" if names.get(d) and names[d] != d else d
                                        for d in datasets))
    sub.append(f"report_builder figure {fig_id}")
    return {"text": title, "subtitle": sub}


def export_spec(chart: Any | None, table: pd.DataFrame | None, title: dict[str, Any] | None = None) -> dict[str, Any]:
    """The self-contained Vega-Lite spec written to ``spec.json`` and drawn as ``chart.svg``/``.png``.

    ``title`` (see `export_title`) becomes the spec's title unless the chart carries its own.
    """
    if chart is not None:
        spec = chart_to_spec(chart)
        if title and "title" not in spec:
            spec["title"] = title
    else:
        spec = table_spec(table, title=title)
    # exported files are read on any background (a paper, a dark viewer): opaque white
    spec.setdefault("config", {})["background"] = "white"
    return spec


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP's CSV-injection list)."""
_FORMULA = re.compile(r"'*[=+\-@\t\r]")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_cell(value: Any) -> Any:
    """A text cell as a CSV of the site writes it: one ``'`` is put before a text that would start a
    formula in a spreadsheet (``=``, ``+``, ``-``, ``@``, tab or CR first, after any ``'``: so the
    rule is reversible, `unspreadsheet_cell`); a text that is a plain number (``-0.5``) and every
    non-text value (numbers stay numbers) are kept as they are. A carriage return inside a text is
    written as a line feed: Python's CSV writer quotes a field with a line feed but not one with a
    lone CR, which a spreadsheet may read as a new row (whose first cell could be a formula)."""
    if not isinstance(value, str):
        return value
    formula = _FORMULA.match(value) is not None and not _PLAIN_NUMBER.fullmatch(value)
    if "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return "'" + value if formula else value


def unspreadsheet_cell(value: Any) -> Any:
    """The inverse of `spreadsheet_cell` (a cell of ``data.csv`` read back as the table had it)."""
    if isinstance(value, str) and value.startswith("'") and _FORMULA.match(value[1:]) \
            and not _PLAIN_NUMBER.fullmatch(value[1:]):
        return value[1:]
    return value


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as the text of a CSV file of the site (no index), safe to open in a spreadsheet:
    every text cell and column name through `spreadsheet_cell`. The one CSV writer of the site
    (``data.csv``, ``paper_vs_ours.csv``)."""
    out = frame.rename(columns=spreadsheet_cell)
    for k in range(out.shape[1]):
        col = out.iloc[:, k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            safe = col.cat.rename_categories(spreadsheet_cell) if any(
                spreadsheet_cell(c) is not c for c in col.cat.categories) else col
        elif col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
            safe = _map_texts(col, spreadsheet_cell)  # numbers, NaN and None untouched
        else:
            continue  # numeric, boolean, datetime columns: written as they are
        if safe is not col and not safe.equals(col):  # unchanged columns keep their dtype (and bytes)
            out.isetitem(k, safe)
    return out.to_csv(index=False)


def _map_texts(col: pd.Series, fn) -> pd.Series:
    """``col.map(fn)`` for a function of text cells (other cells kept), computed once per distinct text
    (a token column repeats a few hundred texts over millions of rows); ``col`` itself when no cell
    changes. The CSV guard and its inverse (`csv_text`, `read_csv`)."""
    try:
        distinct = pd.unique(col.dropna())
    except TypeError:  # unhashable cells (a list): cell by cell
        return col.map(lambda v: fn(v) if isinstance(v, str) else v)
    changed = {}
    for v in distinct:
        if isinstance(v, str):
            new = fn(v)
            if new != v:
                changed[v] = new
    if not changed:
        return col
    return col.map(lambda v: changed.get(v, v) if isinstance(v, str) else v)


def read_csv(path: str | Path) -> pd.DataFrame:
    """A CSV of the site (``data.csv``, ``paper_vs_ours.csv``) read back as the table had it: the
    spreadsheet guard's leading ``'`` removed from text cells and column names (`unspreadsheet_cell`),
    text such as ``NA`` or ``null`` (a token) kept as text, only an empty cell missing. The one reader of
    a site's CSV (`notebook.load_results`, `site.figure_diff`)."""
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    frame = frame.rename(columns=unspreadsheet_cell)
    for k in range(frame.shape[1]):
        col = frame.iloc[:, k]
        if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
            back = _map_texts(col, unspreadsheet_cell)
            if not back.equals(col):
                frame.isetitem(k, back)
    return frame


def write_csv(frame: pd.DataFrame, path: Path) -> str:
    """Write ``frame`` to ``path`` as `csv_text` (UTF-8) and return the text."""
    text = csv_text(frame)
    Path(path).write_text(text, encoding="utf-8")
    return text


def csv_frame(data: pd.DataFrame, units: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The frame written as ``data.csv`` (SPEC §8), so that it stands alone: result tables keep 0-based
    layers, the CSV shows them 1-based (``layer = 1`` is the first layer), like every chart, reading and
    table of the site; each column of ``units`` (the figure's `FigureSpec.units`) is named with its unit,
    ``value (%)``, ``value (row-normalised)`` (`schema.unit_columns`). Both are the transformations
    `notebook.load_results` and the notebook's frames apply, so those frames join ``data.csv`` as they are."""
    return schema.unit_columns(schema.user_layers(data), units or {})


def write_figure_files(fig_id: str, data: pd.DataFrame, chart: Any | None, table: pd.DataFrame | None,
                       figures_dir: Path, inline_limit: int = DEFAULT_INLINE_LIMIT,
                       title: dict[str, Any] | None = None, svg: str | None = None,
                       render_cache: "RenderCache | None" = None,
                       units: Mapping[str, str] | None = None) -> FigureFiles:
    """Write every file of one figure and return its content hash and the spec for the page.

    Args:
        fig_id: permanent figure id (the folder name).
        data: the tidy frame behind the figure (written as ``data.csv``).
        chart: an Altair chart / Vega-Lite dict, or ``None`` for a pure table.
        table: the frame shown for tables (rendered as a text-mark chart when ``chart`` is None).
        figures_dir: ``<docs>/figures``; files go to ``figures_dir/<fig_id>/``.
        inline_limit: datasets with more JSON bytes than this are written to files.
        title: the static export's title (`export_title`); not repeated on the page.
        svg: a drawn diagram (standalone SVG markup): written as ``chart.svg``/``chart.png`` instead of
            the table's rendering (``spec.json`` still draws the table of its parts).
        render_cache: where ``chart.svg``/``chart.png`` of an unchanged content hash are reused from
            instead of drawing them again (`FigureFiles.reused` says which happened).
        units: column -> unit of ``data`` (`FigureSpec.units`): named in ``data.csv``'s header (`csv_frame`).
    """
    fig_dir = figures_dir / fig_id
    fig_dir.mkdir(parents=True, exist_ok=True)
    rel = f"figures/{fig_id}"
    files: dict[str, str] = {}

    csv = write_csv(csv_frame(data, units), fig_dir / "data.csv")
    files["csv"] = f"{rel}/data.csv"

    spec = export_spec(chart, table if table is not None else data, title)
    on_page = chart is not None
    spec_text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    if len(spec_text) < inline_limit:
        spec_text = json.dumps(spec, sort_keys=True, indent=1)  # readable when small
    (fig_dir / "spec.json").write_text(spec_text, encoding="utf-8")
    files["json"] = f"{rel}/spec.json"

    content_hash = version_hash(spec_text, csv, svg)
    cached = render_cache.get(content_hash) if render_cache is not None else None
    if cached is not None:
        (fig_dir / "chart.svg").write_bytes(cached[0])
        (fig_dir / "chart.png").write_bytes(cached[1])
    else:
        drawn = svg if svg is not None else vlc.vegalite_to_svg(spec)
        (fig_dir / "chart.svg").write_text(drawn, encoding="utf-8")
        drawn = (fig_dir / "chart.svg").read_text(encoding="utf-8")
        (fig_dir / "chart.png").write_bytes(vlc.svg_to_png(drawn, scale=2))  # same pixels, no second Vega run
        if render_cache is not None:
            render_cache.put(content_hash, (fig_dir / "chart.svg").read_bytes(), (fig_dir / "chart.png").read_bytes())
    files["svg"] = f"{rel}/chart.svg"
    files["png"] = f"{rel}/chart.png"

    page_spec = _externalise(spec, fig_dir, rel, inline_limit, files) if on_page else None
    if page_spec is not None and title is not None and page_spec.get("title") == title:
        del page_spec["title"]  # the page's heading and caption say it
    return FigureFiles(content_hash=content_hash, page_spec=page_spec, files=files, reused=cached is not None)


class RenderCache:
    """The drawn ``chart.svg``/``chart.png`` of earlier builds, keyed by the figure's content hash and the
    renderer's version, in the output's state folder (``<state>/figure-renders``, `site_state`).

    The content hash covers the whole spec and data, so a hit gives the same bytes a new drawing would.
    Each entry records the SHA-256 of its two files under an HMAC with the state's secret; an entry that
    does not verify (edited, truncated, planted, another key) is ignored and drawn again, and without a
    secret nothing is reused or stored. `prune` keeps only the entries the latest build used.
    """

    def __init__(self, root: Path, secret: bytes | None = None) -> None:
        self.root = Path(root)
        self.secret = secret
        self.used: set[str] = set()
        self.hits = 0

    def _dir(self, content_hash: str) -> Path:
        return self.root / f"{content_hash}-vl{vlc.__version__}"

    def get(self, content_hash: str) -> tuple[bytes, bytes] | None:
        from report_builder.site.site_state import verify

        d = self._dir(content_hash)
        try:
            meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
            if (d / "chart.svg").is_symlink() or (d / "chart.png").is_symlink():
                return None
            svg, png = (d / "chart.svg").read_bytes(), (d / "chart.png").read_bytes()
        except (OSError, ValueError):
            return None
        s, p = hashlib.sha256(svg).hexdigest(), hashlib.sha256(png).hexdigest()
        if not isinstance(meta, dict) or meta.get("svg") != s or meta.get("png") != p or not verify(
                self.secret, meta.get("mac"), d.name, s, p):
            return None
        self.used.add(d.name)
        self.hits += 1
        return svg, png

    def keep(self, content_hash: str) -> None:
        """Keep the entry of ``content_hash`` (if any) through `prune`: its figure was reused whole."""
        d = self._dir(content_hash)
        if d.is_dir():
            self.used.add(d.name)

    def put(self, content_hash: str, svg: bytes, png: bytes) -> None:
        from report_builder.site.site_state import mac

        if self.secret is None:
            return
        d = self._dir(content_hash)
        tmp = self.root / f".{d.name}.tmp-{guard.tmp_tag()}"
        try:
            tmp.mkdir(parents=True, exist_ok=True)
            (tmp / "chart.svg").write_bytes(svg)
            (tmp / "chart.png").write_bytes(png)
            sums = {"svg": hashlib.sha256(svg).hexdigest(), "png": hashlib.sha256(png).hexdigest()}
            sums["mac"] = mac(self.secret, d.name, sums["svg"], sums["png"])
            (tmp / "meta.json").write_text(json.dumps(sums), encoding="utf-8")
            if d.exists():
                shutil.rmtree(d)
            os.rename(tmp, d)
            self.used.add(d.name)
        except OSError:  # a cache that cannot be written only costs time
            shutil.rmtree(tmp, ignore_errors=True)

    def prune(self) -> None:
        """Remove the entries this build did not use (only folders named like ours) and the temporary
        folders of processes that are gone."""
        if not self.root.is_dir():
            return
        for d in self.root.iterdir():
            if d.is_dir() and d.name not in self.used and RENDER_ENTRY.fullmatch(d.name):
                shutil.rmtree(d, ignore_errors=True)
        guard.sweep([self.root], legacy_age_s=None)
