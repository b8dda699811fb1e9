"""A user's own evaluation set: a local ``.txt``, ``.jsonl`` or ``.csv`` file, or any ``datasets`` dataset.

A dataset entry of the configuration that is not a built-in id describes where its texts come from
(:class:`DataSource`):

- ``path: texts.txt`` — one text per line (blank lines skipped);
- ``path: data.jsonl`` with ``column: text`` (and optionally ``pair_column: hypothesis``) — one JSON
  object per line;
- ``path: data.csv`` with ``column:`` (and optionally ``pair_column:``) — a comma-separated file with
  a header row (``.tsv``: tab-separated);
- ``hub: owner/name`` with ``column:``, optional ``subset:`` (the dataset's configuration) and
  ``split:`` (default ``train``) — loaded through the ``datasets`` library (``pip install
  'report_builder[hub]'``) when the hub is reachable or the dataset is in its local cache.

The set is hashed like the built-ins (:func:`report_builder.data.evalset.items_hash`, over the texts
only) and its datasheet describes the user's data itself: file name or hub id, column(s), the
file's own sha256, and the ``name``/``domain``/``licence`` the entry gives (``unknown`` otherwise).
Pitfall: the datasheet never records an absolute local path (it is published on the site), only
the file's name and content hash.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from typing import Any, Iterable

from report_builder.filehash import sha256_of_file
from report_builder.errors import DataError, clip, for_terminal, shown
from .evalset import EvalSet, TextItem, make_set
from .hub import load_hub_split
from .text import normalise_space

FILE_FORMATS = {".txt": "text", ".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv"}
"""Local file suffixes a user's dataset may have, and how each is read."""

UTF8 = "utf-8-sig"
"""How a data file is decoded: UTF-8, a leading byte order mark (Excel's "CSV UTF-8", Notepad) dropped
rather than read as part of the first header field, JSON line or text."""

FORMAT_HELP = ("a .txt file (one text per line), a .jsonl or .csv/.tsv file with `column:` "
               "(and optionally `pair_column:`), or `hub: <dataset id>` with `column:` and `split:`")


@dataclasses.dataclass(frozen=True)
class DataSource:
    """Where a user's evaluation set comes from (the keys of a dataset entry besides ``id``/``n``).

    Attributes:
        path: A local ``.txt``, ``.jsonl``, ``.csv`` or ``.tsv`` file.
        column: The field holding the (first) text (``.jsonl``/``.csv``/hub; not for ``.txt``).
        pair_column: The field holding the second text of a pair (optional).
        hub: A ``datasets`` dataset id (e.g. ``"stanfordnlp/imdb"``) instead of ``path``.
        subset: The hub dataset's configuration name (e.g. ``"sst2"`` of ``"nyu-mll/glue"``).
        split: The hub split (default ``"train"``).
        name: Display name on the site (default: the id).
        domain: Text domain for the datasheet (default ``"unknown"``).
        licence: Licence of the text for the datasheet (default ``"unknown (user data)"``).
    """

    path: str | None = None
    column: str | None = None
    pair_column: str | None = None
    hub: str | None = None
    subset: str | None = None
    split: str | None = None
    name: str | None = None
    domain: str | None = None
    licence: str | None = None

    @property
    def given(self) -> bool:
        """Whether the entry names any source at all (``path`` or ``hub``)."""
        return self.path is not None or self.hub is not None




def _name(path: str) -> str:
    """A data file as messages name it: its file name, quoted and bounded (never the whole path)."""
    return shown(os.path.basename(path), 100)


def _clean(value: Any) -> str:
    return normalise_space(value) if isinstance(value, str) else ""


def _pairs_from_rows(rows: Iterable[dict], src: DataSource, set_id: str, where: str,
                     fields: list[str] | None = None) -> list[tuple[str, str | None]]:
    """``(text_a, text_b)`` from mapping rows; rows with an empty text are skipped."""
    if not src.column:
        raise DataError(f"dataset {shown(set_id)}: {where} needs `column:` naming the text field"
                        + (f" (fields: {clip(for_terminal(', '.join(fields)), 300)})" if fields else ""))
    wanted = [src.column] + ([src.pair_column] if src.pair_column else [])
    if fields is not None:
        missing = [c for c in wanted if c not in fields]
        if missing:
            raise DataError(f"dataset {shown(set_id)}: {where} has no field(s) {', '.join(map(shown, missing))} "
                            f"(fields: {clip(for_terminal(', '.join(fields)), 300)})")
    out = []
    for row in rows:
        a = _clean(row.get(src.column))
        b = _clean(row.get(src.pair_column)) if src.pair_column else None
        if a and (b is None or b):
            out.append((a, b))
    return out


def _read_txt(path: str, src: DataSource, set_id: str) -> list[tuple[str, str | None]]:
    if src.column or src.pair_column:
        raise DataError(f"dataset {shown(set_id)}: {_name(path)} is a .txt file (one text per "
                        f"line); `column:`/`pair_column:` apply to .jsonl and .csv files only")
    with open(path, encoding=UTF8) as fh:
        return [(t, None) for t in (normalise_space(line) for line in fh) if t]


def _read_jsonl(path: str, src: DataSource, set_id: str) -> list[tuple[str, str | None]]:
    rows = []
    with open(path, encoding=UTF8) as fh:
        for k, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"dataset {shown(set_id)}: {_name(path)} line {k} is not JSON "
                                f"({exc.msg}); expected one JSON object per line") from None
            except (ValueError, RecursionError) as exc:  # nested too deep, an integer of thousands of digits
                why = "nested too deeply" if isinstance(exc, RecursionError) else shown(str(exc))
                raise DataError(f"dataset {shown(set_id)}: {_name(path)} line {k} cannot be read ({why}); "
                                "expected one flat JSON object per line") from None
            if not isinstance(row, dict):
                raise DataError(f"dataset {shown(set_id)}: {_name(path)} line {k} is not a JSON "
                                f"object; expected one object per line with field {shown(src.column)}")
            rows.append(row)
    fields = sorted({f for r in rows for f in r}) if rows else []
    return _pairs_from_rows(rows, src, set_id, _name(path), fields if rows else None)


def _open_quote_line(lines: list[tuple[int, str]], delimiter: str) -> int:
    """The line where the field left open at the end of the file opens its quote, given the lines of its
    row (``(number, text)``), read as `csv` reads them (``""`` inside quotes is a quote; a quote that does
    not start a field is text)."""
    state, opened = "start", lines[0][0]
    for no, line in lines:
        for ch in line:
            if state == "quoted":
                state = "quote" if ch == '"' else state
            elif state == "quote":  # after a quote inside quotes: a doubled one, the end of the field, or text
                state = "quoted" if ch == '"' else ("start" if ch in (delimiter, "\r", "\n") else "field")
            elif ch in (delimiter, "\r", "\n"):
                state = "start"
            elif state == "start" and ch == '"':
                state, opened = "quoted", no
            else:
                state = "field"
    return opened


def _read_csv(path: str, src: DataSource, set_id: str, delimiter: str) -> list[tuple[str, str | None]]:
    pending: list[tuple[int, str]] = []  # the lines of the row being read
    ended = [False]

    def lines(fh):
        for no, line in enumerate(fh, 1):
            pending.append((no, line))
            yield line
        ended[0] = True

    def row_lines() -> list[tuple[int, str]]:  # the row being read, its blank lines left out
        return [(no, line) for no, line in pending if line.strip()]

    def closed() -> None:  # a row (or the header) the end of the file completed: read into an open quote
        if ended[0] and (rest := row_lines()):  # (blank rows: skipped)
            raise DataError(f"dataset {shown(set_id)}: {_name(path)} line {_open_quote_line(rest, delimiter)} "
                            f"opens a quote (\") that is never closed, so every later line would be read into "
                            f"one field; close the quote, or double a quote inside quotes (\"\")")
        pending.clear()

    with open(path, encoding=UTF8, newline="") as fh:
        reader = csv.DictReader(lines(fh), delimiter=delimiter)
        rows: list[dict] = []
        fields: list[str] | None = None
        try:
            fields = [f.strip() for f in (reader.fieldnames or [])]
            reader.fieldnames = fields
            closed()
            for row in reader:
                closed()
                rows.append(row)
        except csv.Error as exc:  # a field over csv.field_size_limit() (131,072 characters), a stray NUL ...
            why = str(exc)
            if "field larger than field limit" in why:
                why = (f"a field is longer than {csv.field_size_limit():,} characters; a text is cut to "
                       "max_length tokens anyway: shorten it, or give the texts as .jsonl")
                if len(rest := row_lines()) > 1:  # over several lines
                    why += f"; it runs from a quote on line {_open_quote_line(rest, delimiter)}: is that quote closed?"
            where = f"row {len(rows) + 1} after the header" if fields is not None else "the header"
            raise DataError(f"dataset {shown(set_id)}: {_name(path)} {where} cannot be read as "
                            f"{'CSV' if delimiter == ',' else 'TSV'} ({clip(for_terminal(why), 300)})"
                            ) from None
    return _pairs_from_rows(rows, src, set_id, _name(path), fields)


def _first_bad_byte(path: str) -> str:
    """Where a file stops being UTF-8: ``": line 3 (byte 0xE9) is not part of a UTF-8 character"``."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return f": line {line} (byte 0x{data[exc.start]:02X}) is not part of a UTF-8 character"
    return ""


def _from_file(set_id: str, src: DataSource) -> tuple[list[tuple[str, str | None]], dict[str, str]]:
    path = os.path.expanduser(src.path or "")
    ext = os.path.splitext(path)[1].lower()
    if ext not in FILE_FORMATS:
        raise DataError(f"dataset {shown(set_id)}: cannot read {_name(path)} (suffix {ext or 'none'}); "
                        f"expected {FORMAT_HELP}")
    if not os.path.isfile(path):
        where = "" if os.path.isabs(path) else (f" (a relative path is read from the current directory, "
                                                 f"{for_terminal(os.getcwd())})")
        raise DataError(f"dataset {shown(set_id)}: data file not found: {shown(src.path)}{where}; expected {FORMAT_HELP}")
    if src.hub or src.subset or src.split:
        raise DataError(f"dataset {shown(set_id)}: give either `path:` or `hub:` (with `subset:`/`split:`), "
                        f"not both")
    kind = FILE_FORMATS[ext]
    try:
        if kind == "text":
            pairs = _read_txt(path, src, set_id)
        elif kind == "jsonl":
            pairs = _read_jsonl(path, src, set_id)
        else:
            pairs = _read_csv(path, src, set_id, "," if kind == "csv" else "\t")
    except UnicodeDecodeError:
        raise DataError(f"dataset {shown(set_id)}: {_name(path)} is not UTF-8 text{_first_bad_byte(path)}; "
                        "save the file as UTF-8 (a spreadsheet's or editor's \"UTF-8\" encoding)") from None
    cols = f", column {src.column!r}" if src.column else ""
    cols += f", pair column {src.pair_column!r}" if src.pair_column else ""
    sheet = {"source": f"{os.path.basename(path)} (user file{cols}; sha256 {sha256_of_file(path)[:16]})",
             "built": (f"Every non-empty {'line' if kind == 'text' else 'row'} of the user's "
                       f"{ext} file in file order"
                       + (", as a sequence pair" if src.pair_column else "") + ", whitespace-normalised.")}
    return pairs, sheet


def _from_hub(set_id: str, src: DataSource) -> tuple[list[tuple[str, str | None]], dict[str, str]]:
    split = src.split or "train"
    hint = "a local .txt/.jsonl/.csv file (`path:`)"
    ds = load_hub_split(set_id, src.hub, src.subset, split, hint)
    fields = list(getattr(ds, "column_names", None) or [])
    pairs = _pairs_from_rows(iter(ds), src, set_id, f"hub dataset {src.hub}", fields or None)
    where = src.hub + (f" ({src.subset})" if src.subset else "") + f", split {split}"
    cols = f", column {src.column!r}" + (f", pair column {src.pair_column!r}" if src.pair_column else "")
    fp = getattr(ds, "_fingerprint", None)
    sheet = {"source": f"hub: {where}{cols}" + (f"; datasets fingerprint {fp}" if fp else ""),
             "built": f"Every non-empty row of the {split} split in dataset order"
                      + (", as a sequence pair" if src.pair_column else "") + ", whitespace-normalised."}
    return pairs, sheet


def build_custom(set_id: str, source: DataSource) -> EvalSet:
    """Build a user's evaluation set from a local file or a ``datasets`` dataset.

    Args:
        set_id: The configured dataset id (used for item ids and on the site).
        source: Where the texts come from.

    Returns:
        The evaluation set, items ``<id>-00000, ...`` in file (or dataset) order.

    Raises:
        DataError: No source, an unsupported file type, a missing file or column, an empty set,
            or (hub) ``datasets`` missing or the dataset unreachable — one line saying what to do.
    """
    if source.hub is not None and source.path is not None:
        raise DataError(f"dataset {shown(set_id)}: give either `path:` or `hub:`, not both")
    if source.path is not None:
        pairs, sheet = _from_file(set_id, source)
    elif source.hub is not None:
        if not source.column:
            raise DataError(f"dataset {shown(set_id)}: `hub: {source.hub}` needs `column:` naming the text field")
        pairs, sheet = _from_hub(set_id, source)
    else:
        raise DataError(f"dataset {shown(set_id)} is not a built-in id; give its data as {FORMAT_HELP}")
    items = [TextItem(f"{set_id}-{k:05d}", a, b) for k, (a, b) in enumerate(pairs)]
    return make_set(set_id, source.name or set_id, items, source=sheet["source"],
                    licence=source.licence or "unknown (user data)", domain=source.domain or "unknown",
                    built=sheet["built"])
