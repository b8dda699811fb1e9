"""The dataset registry: id -> builder, plus ``load_eval_set`` and ``list_datasets``.

Every builder has the signature ``builder(path: str | None) -> EvalSet`` and is deterministic.
Offline sets (``wiki``, ``sentiment-sample``, ``news-sample``) come from the gensim wheel; the
others need ``datasets`` with hub access or a local file. Pitfall: ``n`` takes the first ``n``
items *after* the deterministic build, so a smaller run is a prefix of the full one (and has its
own hash).
"""

from __future__ import annotations

from typing import Callable

from .conll import build_conll2003
from .errors import DataError
from .evalset import EvalSet
from .glue import build_mnli, build_sst2
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


def load_eval_set(id: str, *, n: int | None = None, path: str | None = None) -> EvalSet:  # noqa: A002
    """Build (or load) an evaluation set by id.

    Args:
        id: A key of :data:`DATASETS`.
        n: Keep only the first ``n`` items (``None``: all).
        path: Local file or folder for sets that read one (``sst2``, ``mnli``, ``conll2003``;
            optional replacement source for the offline sets).

    Returns:
        The evaluation set.

    Raises:
        DataError: Unknown id (the message lists the known ids), missing file, empty set, or
            ``datasets`` unavailable.
    """
    try:
        builder = DATASETS[id]
    except KeyError:
        raise DataError(f"unknown dataset id {id!r}; known ids: {', '.join(DATASETS)}") from None
    if n is not None and n < 1:
        raise DataError(f"n must be a positive number of items, got {n!r}")
    return builder(path).head(n)


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
