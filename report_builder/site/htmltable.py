"""DataFrames as compact, escaped HTML tables for the pages (numbers right-aligned, readable digits).

Pitfall: tokens such as ``[CLS]``, ``##ing`` or ``*`` would be rewritten by Markdown; HTML tables are
escaped once and passed through untouched.
"""
from __future__ import annotations

import html
import math
from numbers import Integral, Real

import pandas as pd


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
    vals = list(values)
    floats = [float(v) for v in vals if isinstance(v, Real) and not isinstance(v, (bool, Integral))
              and not math.isnan(float(v)) and 1e-3 <= abs(float(v))]
    col = max((min(_target(abs(v)), _decimals(v)) for v in floats), default=None)
    return [fmt(v, col) for v in vals]


def _decimals(v: float) -> int:
    """Decimals in the shortest repr of ``v`` (at least 1 for a non-integer; 1 for an integral float)."""
    text = repr(abs(v))
    if "e" in text or "." not in text:
        return 99 if "e" in text else 1
    frac = text.split(".")[1].rstrip("0")
    return max(1, len(frac))


def _is_num(series: pd.Series) -> bool:
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
