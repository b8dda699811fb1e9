"""DataFrames as compact, escaped HTML tables for the pages (numbers right-aligned, readable digits),
and as Vega-Lite text-mark tables (`table_spec`: a table's ``chart.svg``/``.png``) with the same cells.

A float is first rounded by the published-precision rule (`precision`), then shown with the digits
its magnitude warrants, so a cell never shows a digit that ``data.csv`` does not have.

Pitfall: tokens such as ``[CLS]``, ``##ing`` or ``*`` would be rewritten by Markdown; HTML tables are
escaped once and passed through untouched.
"""
from __future__ import annotations

import html
import math
from numbers import Integral, Real
from typing import Any

import pandas as pd

from report_builder import precision

VL_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"

_MD_ENTITIES = str.maketrans({"[": "&#91;", "]": "&#93;", "(": "&#40;", ")": "&#41;", "*": "&#42;", "_": "&#95;",
                              "`": "&#96;", "{": "&#123;", "}": "&#125;", "\\": "&#92;", "|": "&#124;"})


def text_html(text: str) -> str:
    """Untrusted text as HTML text: ``& < > " '`` escaped and Markdown punctuation as numeric
    entities, so it stays literal even where Markdown still runs over the HTML (an indented block,
    ``markdown="1"``); the browser shows the same characters."""
    return html.escape(str(text)).translate(_MD_ENTITIES)


def fmt(value, column_decimals: int | None = None) -> str:
    """A cell value as text: ints as is, floats with sensible precision, NaN as an en dash.

    ``column_decimals`` (from `fmt_column`) aligns the decimals of one column."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return f"{int(value):,}" if abs(int(value)) >= 10000 else str(int(value))
    if isinstance(value, Real):
        v = float(value)
        if math.isnan(v):
            return "–"
        if column_decimals is None:  # `fmt_column` rounds a whole column at once
            v = precision.round_value(v)
        if v == 0:
            return "0"
        a = abs(v)
        if a < 1e-3:
            return f"{v:.2e}"
        # never more decimals than the value has (0.62 stays "0.62", not "0.620": no false digits)
        decimals = min(_target(a), _decimals(v) if column_decimals is None else column_decimals)
        return f"{v:,.{decimals}f}"
    return str(value)


def _target(a: float) -> int:
    return 3 if a < 1 else 2 if a < 100 else 1


def fmt_column(values) -> list[str]:
    """Cells of one column: floats share the decimals the column's values carry (95.90 beside 47.95),
    each capped by its own magnitude's precision, never more than any value has."""
    vals = [_rounded(v) for v in values]
    floats = [float(v) for v in vals if isinstance(v, Real) and not isinstance(v, (bool, Integral))
              and not math.isnan(float(v)) and 1e-3 <= abs(float(v))]
    col = max((min(_target(abs(v)), _decimals(v)) for v in floats), default=None)
    return [fmt(v, col) for v in vals]


def _rounded(v):
    return precision.round_value(float(v)) if isinstance(v, Real) and not isinstance(v, (bool, Integral)) else v


def _decimals(v: float) -> int:
    """Decimals in the shortest repr of ``v`` (at least 1 for a non-integer; 1 for an integral float)."""
    text = repr(abs(v))
    if "e" in text or "." not in text:
        return 99 if "e" in text else 1
    frac = text.split(".")[1].rstrip("0")
    return max(1, len(frac))


def _is_num(series: pd.Series) -> bool:
    """A numeric column, also one of object dtype holding only numbers (counts as ints beside floats)."""
    if series.dtype == object:
        vals = series.dropna()
        return len(vals) > 0 and all(isinstance(v, Real) and not isinstance(v, bool) for v in vals)
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _cell(text: str, numeric: bool) -> str:
    cls = "num" if numeric else ("short" if len(text) <= 24 else "")
    return f'<td class="{cls}">{text_html(text)}</td>' if cls else f"<td>{text_html(text)}</td>"


def to_html(df: pd.DataFrame, max_rows: int = 200, index: bool = False) -> str:
    """Render a frame as ``<div class="rb-table-wrap"><table>…`` (one line per row)."""
    if index:
        df = df.reset_index()
    shown = df.head(max_rows)
    num = {c: _is_num(df[c]) for c in df.columns}
    head = "".join(
        f'<th class="num">{html.escape(str(c))}</th>' if num[c] else f"<th>{html.escape(str(c))}</th>"
        for c in df.columns
    )
    texts = [fmt_column(shown[c]) for c in shown.columns]
    rows = []
    for r in range(len(shown)):
        cells = "".join(_cell(texts[k][r], num[c]) for k, c in enumerate(df.columns))
        rows.append(f"<tr>{cells}</tr>")
    more = ""
    if len(df) > max_rows:
        more = f'<p class="rb-caption">Showing {max_rows} of {len(df)} rows; the CSV has all of them.</p>'
    return (
        '<div class="rb-table-wrap"><table class="rb-table">\n<thead><tr>' + head + "</tr></thead>\n<tbody>\n"
        + "\n".join(rows) + "\n</tbody></table></div>" + more
    )


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
