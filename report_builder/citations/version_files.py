"""A figure version's files as data: their names, its content hash and its ``data.csv`` (the
spreadsheet-safe writer and its one reader).

A version is named by `version_hash` over its ``spec.json``, ``data.csv`` and, for a drawn diagram,
``chart.svg``: the site names versions by it (`site.figure_files.write_figure_files`), `permalinks`
checks the versions it carries by it and `reproduce` compares it. ``data.csv`` (and
``paper_vs_ours.csv``) are written by `csv_text`/`write_csv` and read back by `read_csv` only.

Pitfall: the spreadsheet guard must stay reversible (`unspreadsheet_cell`): `figure_diff` and
`notebook.load_results` read the CSVs back as the tables had them.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pandas as pd

from report_builder import precision

FILES = ("chart.svg", "chart.png", "data.csv", "spec.json", "provenance.json")
"""Every version's files (all required): written once, when the version is created, then carried byte for
byte (each with the SHA-256 the index records); the content hash covers spec.json and data.csv (and a
diagram's chart.svg), the recipe's ``files`` the SHA-256 of the others (docs/cite.md)."""
OPTIONAL = ("paper_vs_ours.csv",)
"""Files a version holds when its figure has them (carried and verified like `FILES`)."""
DERIVED = ("cite.bib",)
"""Files of a version folder that are presentation: made again by every build from the version's record
and the site's current ``site_url`` (`cite.version_bibtex`), so a ``site_url`` set later reaches every
earlier version's citation; neither covered by the content hash nor verified by the index."""
PAGE = "index.html"
"""The site's page about a version, beside its files: derived like `DERIVED`, rewritten by every build."""
HASH = re.compile(r"[0-9a-f]{12}")
"""A content hash: exactly 12 lowercase hex digits (`version_hash`), the name of a version's folder."""
HISTORY_ASSETS = "history"
"""The site folder of the history's difference charts."""


def permalink(fig_id: str, content_hash: str) -> str:
    """The site-relative permalink of a version: ``figures/<id>/<hash>/`` (of a validated id and hash:
    `readback` checks both before anything read back is joined into a path)."""
    return f"figures/{fig_id}/{content_hash}/"


def permalink_url(site_url: str | None, fig_id: str, content_hash: str) -> str:
    """The published address of a version (``<site_url>figures/<id>/<hash>/``), or the relative
    permalink without a ``site_url``."""
    rel = permalink(fig_id, content_hash)
    return (site_url.rstrip("/") + "/" + rel) if site_url else rel


def chart_path(fig_id: str, old: str, new: str) -> str:
    """Site-relative path of the difference chart of a figure's change from version ``old`` to ``new``."""
    return f"{HISTORY_ASSETS}/{fig_id}/{old}-{new}-difference.svg"


def version_hash(spec_text: str, csv: str, svg: str | None = None) -> str:
    """A figure version's content hash: its Vega-Lite spec, its ``data.csv`` and, for a drawn diagram,
    its ``chart.svg`` (the one definition: the site names versions by it, `reproduce` compares it)."""
    text = spec_text + "\n" + csv + ("\n" + svg if svg is not None else "")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def version_hashes(spec_text: str, csv: str, svg: str | None = None) -> set[str]:
    """The content hashes a version folder's texts can stand for: without its drawing, and with it when
    there is one (a drawn diagram's hash covers its ``chart.svg``)."""
    return {version_hash(spec_text, csv), *([version_hash(spec_text, csv, svg)] if svg is not None else [])}


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
    every text cell and column name through `spreadsheet_cell`, every float rounded by the published-
    precision rule (`precision.round_array`; float32 columns as the float64 of their rounded decimal).
    The one CSV writer of the site (``data.csv``, ``paper_vs_ours.csv``)."""
    out = frame.rename(columns=spreadsheet_cell)
    for k in range(out.shape[1]):
        col = out.iloc[:, k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            safe = col.cat.rename_categories(spreadsheet_cell) if any(
                spreadsheet_cell(c) is not c for c in col.cat.categories) else col
        elif pd.api.types.is_float_dtype(col.dtype):  # published precision (`precision`)
            safe = pd.Series(precision.round_array(col.to_numpy(dtype=float)), index=col.index, name=col.name)
        elif col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
            safe = _map_texts(col, spreadsheet_cell)  # numbers, NaN and None untouched
            if col.dtype == object and any(isinstance(v, float) for v in safe):
                safe = safe.map(lambda v: precision.round_value(v) if isinstance(v, float) else v)
        else:
            continue  # integer, boolean, datetime columns: written as they are
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
    a site's CSV (`notebook.load_results`, `citations.figure_diff`)."""
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
