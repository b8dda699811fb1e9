"""DataFrames as compact, escaped HTML tables for the pages (numbers right-aligned, readable digits).

Pitfall: tokens such as ``[CLS]``, ``##ing`` or ``*`` would be rewritten by Markdown; HTML tables are
escaped once and passed through untouched.
"""
from __future__ import annotations

import html
import math
from numbers import Integral, Real

import pandas as pd


def fmt(value) -> str:
    """A cell value as text: ints as is, floats with sensible precision, NaN as an en dash."""
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
        if a < 1:
            return f"{v:.3f}"
        if a < 100:
            return f"{v:.2f}"
        return f"{v:,.1f}"
    return str(value)


def _is_num(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _cell(text: str, numeric: bool) -> str:
    cls = "num" if numeric else ("short" if len(text) <= 24 else "")
    return f'<td class="{cls}">{html.escape(text)}</td>' if cls else f"<td>{html.escape(text)}</td>"


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
    rows = []
    for rec in shown.itertuples(index=False, name=None):
        cells = "".join(_cell(fmt(v), num[c]) for c, v in zip(df.columns, rec))
        rows.append(f"<tr>{cells}</tr>")
    more = ""
    if len(df) > max_rows:
        more = f'<p class="rb-caption">Showing {max_rows} of {len(df)} rows; the CSV has all of them.</p>'
    return (
        '<div class="rb-table-wrap"><table class="rb-table">\n<thead><tr>' + head + "</tr></thead>\n<tbody>\n"
        + "\n".join(rows) + "\n</tbody></table></div>" + more
    )
