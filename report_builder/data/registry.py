"""The dataset registry: id -> builder, plus ``load_eval_set`` and ``list_datasets``.

Every builder has the signature ``builder(path: str | None) -> EvalSet`` and is deterministic.
Offline sets (``wiki``, ``sentiment-sample``, ``news-sample``) come from the gensim wheel; the
others need ``datasets`` with hub access or a local file. Any other id is a user's own set
(:mod:`report_builder.data.custom`: a ``.txt``/``.jsonl``/``.csv`` file or a ``datasets`` dataset). Pitfall: ``n`` takes the first ``n``
items *after* the deterministic build, so a smaller run is a prefix of the full one (and has its
own hash).
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import os
from typing import Any, Callable

from .conll import build_conll2003
from .custom import DataSource, build_custom
from report_builder.filehash import sha256_of_file
from report_builder.errors import DataError, clip, for_terminal, shown
from .evalset import EvalSet
from .glue import build_mnli, build_sst2
from .layout import DATA_DIR_LAYOUT, data_dir_path
from .samples import build_news, build_sentiment
from .wiki import build_wiki

Builder = Callable[[str | None], EvalSet]

DATASETS: dict[str, Builder] = {
    "wiki": build_wiki,
    "sentiment-sample": build_sentiment,
    "news-sample": build_news,
    "sst2": build_sst2,
    "mnli": build_mnli,
    "conll2003": build_conll2003,
}
"""All known dataset ids and their builders."""

OFFLINE_DATASETS: tuple[str, ...] = ("wiki", "sentiment-sample", "news-sample")
"""Ids that build without network or extra files."""


def load_eval_set(id: str, *, n: int | None = None, path: str | None = None,  # noqa: A002
                  **source: Any) -> EvalSet:
    """Build (or load) an evaluation set by id: a built-in one, or a user's own data.

    Args:
        id: A key of :data:`DATASETS`, or any other id for a user's own set (then ``path`` or
            ``hub`` is required).
        n: Keep only the first ``n`` items (``None``: all).
        path: Local file or folder for sets that read one (``sst2``, ``mnli``, ``conll2003``;
            optional replacement source for the offline sets); for a user's set a ``.txt``,
            ``.jsonl``, ``.csv`` or ``.tsv`` file.
        **source: The other :class:`~report_builder.data.custom.DataSource` fields of a user's set
            (``column``, ``pair_column``, ``hub``, ``subset``, ``split``, ``name``, ``domain``,
            ``licence``); ``None`` values are ignored.

    Returns:
        The evaluation set.

    Raises:
        DataError: Unknown id without data (the message lists the known ids and the formats),
            missing file or column, empty set, or ``datasets`` unavailable.
    """
    if n is not None and n < 1:
        raise DataError(f"n must be a positive number of items, got {shown(n)}")
    known = {f.name for f in dataclasses.fields(DataSource)}
    bad = set(source) - known
    if bad:
        raise DataError(f"dataset {shown(id)}: unknown key(s) {', '.join(sorted(bad))} "
                        f"(known: path, {', '.join(sorted(known - {'path'}))})")
    given = {k: v for k, v in source.items() if v is not None}
    if id in DATASETS:
        if given:
            raise DataError(f"dataset {shown(id)} is a built-in id, which takes only `path:`; give your own "
                            f"data ({', '.join(sorted(given))}) another id")
        es = DATASETS[id](path)
        if path is not None:
            es = _user_datasheet(es, path)
        return es.head(n)
    src = DataSource(path=path, **given)
    if not src.given:
        raise DataError(f"unknown dataset id {shown(id)}; known ids: {', '.join(DATASETS)}; for your own "
                        f"data give `path:` or `hub:`")
    return build_custom(id, src).head(n)


def load_entry(entry: Any, data_dir: str | None = None) -> EvalSet:
    """The evaluation set of one configured dataset entry (a ``config.DatasetConfig``).

    Args:
        entry: Any object with ``id`` and ``n`` and, optionally, the
            :class:`~report_builder.data.custom.DataSource` fields as attributes.
        data_dir: the configured ``data_dir``; fills ``path`` of a built-in set that has none
            (see :data:`DATA_DIR_LAYOUT`).

    Returns:
        The evaluation set (see :func:`load_eval_set`).
    """
    fields = {f.name: getattr(entry, f.name, None) for f in dataclasses.fields(DataSource)}
    path = fields.pop("path")
    in_dir = None if path is not None else data_dir_path(entry.id, data_dir)
    try:
        if in_dir is not None and not any(v is not None for v in fields.values()):
            return _data_dir_set(entry.id, in_dir, entry.n)
        return load_eval_set(entry.id, n=entry.n, path=path, **fields)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:  # a file that is not what the set reads
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS):
            raise  # the disk or the permissions, not the data: the CLI says so
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        kind = "csv.Error" if isinstance(e, csv.Error) else type(e).__name__  # e.g. a field over 131,072 characters
        raise DataError(f"dataset {shown(entry.id)}: cannot read {shown(path or in_dir or entry.id)} "
                        f"({kind}: {clip(for_terminal(why), 200)}); give the file this dataset reads "
                        "(docs/guide/configuration.md \"The papers' own setting\"), or a .txt/.jsonl/.csv file "
                        "under an id of your own (docs/guide/configuration.md \"Your own data\")") from None


def _data_dir_set(set_id: str, folder: str, n: int | None) -> EvalSet:
    """A paper dataset from its standard place under ``data_dir``: the official set's datasheet
    (licence, domain), its source named by the layout path and the file's sha256, never the local
    folder."""
    if n is not None and n < 1:
        raise DataError(f"n must be a positive number of items, got {shown(n)}")
    sub, name = DATA_DIR_LAYOUT[set_id]
    es = DATASETS[set_id](folder)
    target = os.path.join(folder, name)
    digest = _file_digest(target) if os.path.isfile(target) else ""
    sheet = {**es.datasheet, "source": f"data_dir: {sub}/{name}" + (f" (sha256 {digest})" if digest else "")}
    return EvalSet(es.id, es.name, es.items, sheet).head(n)


def _file_digest(path: str) -> str:
    """First 16 hex of the file's sha256 (shown in datasheets)."""
    return sha256_of_file(path)[:16]


def _user_datasheet(es: EvalSet, path: str) -> EvalSet:
    """The set read from a user's file is described as that file (name, sha256, count), never as
    the built-in sample or hub set its format matches (whose licence would not apply)."""
    name = os.path.basename(os.path.normpath(path)) or str(path)
    digest = _file_digest(path) if os.path.isfile(path) else ""
    sheet = {
        "source": f"user file {name}" + (f" (sha256 {digest})" if digest else ""),
        "licence": "as stated by the file's owner (not recorded)",
        "domain": "user-supplied",
        "built": f"{len(es.items)} items read from the user's file {name} in the {es.id!r} format.",
        "size": len(es.items),
    }
    return EvalSet(es.id, f"{es.id} from {name}", es.items, sheet)


def list_datasets() -> list[dict[str, object]]:
    """One row per offline set: ``id``, ``name``, ``domain``, ``size``, ``hash``.

    Returns:
        Rows in registry order (builds each offline set; a few seconds for ``wiki``).
    """
    rows = []
    for set_id in OFFLINE_DATASETS:
        s = load_eval_set(set_id)
        rows.append({"id": s.id, "name": s.name, "domain": s.domain, "size": len(s),
                     "hash": s.hash})
    return rows
