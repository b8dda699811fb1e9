"""Tokenizer-independent evaluation sets and their content hash.

An :class:`EvalSet` is a tuple of :class:`TextItem` (one text or a text pair) plus a datasheet. Its
:attr:`EvalSet.hash` is a sha256 over a canonical JSON of the items only, so it is stable across
runs, machines and Python versions and changes whenever any text changes. Pitfall: the hash must
not depend on the datasheet or on dict ordering; it is used in cache keys downstream.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from typing import Any

DATASHEET_KEYS = ("source", "licence", "domain", "built", "size")


@dataclasses.dataclass(frozen=True)
class TextItem:
    """One evaluation example.

    Attributes:
        id: Stable identifier within its set (e.g. ``"wiki-0007"``).
        text_a: The (first) text.
        text_b: The second text of a pair, or ``None`` for a single text.
    """

    id: str
    text_a: str
    text_b: str | None = None

    @property
    def is_pair(self) -> bool:
        """Whether the item is a sequence pair."""
        return self.text_b is not None


def items_hash(items: tuple[TextItem, ...] | list[TextItem]) -> str:
    """Content hash of a sequence of items.

    Args:
        items: The items, in order.

    Returns:
        The first 16 hex characters of the sha256 of a canonical JSON
        (``[[id, text_a, text_b], ...]``, UTF-8, no whitespace).
    """
    payload = json.dumps(
        [[it.id, it.text_a, it.text_b] for it in items],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class EvalSet:
    """A named, hashed evaluation set.

    Attributes:
        id: Stable dataset id (the registry key, e.g. ``"wiki"``).
        name: Human-readable name.
        items: The examples in their deterministic order.
        datasheet: ``source``, ``licence``, ``domain``, ``built`` (one sentence), ``size``.
    """

    id: str
    name: str
    items: tuple[TextItem, ...]
    datasheet: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    @functools.cached_property
    def hash(self) -> str:  # noqa: A003 - the contract names it ``hash``
        """First 16 hex chars of the sha256 of the canonical JSON of :attr:`items`."""
        return items_hash(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    @property
    def domain(self) -> str:
        """The datasheet's domain (empty string when unknown)."""
        return str(self.datasheet.get("domain", ""))

    def head(self, n: int | None) -> "EvalSet":
        """The first ``n`` items as a new set (``None``: the set itself).

        Args:
            n: Number of items to keep; must be positive.

        Returns:
            An :class:`EvalSet` with the same id, name and datasheet (``size`` updated; ``built`` says
            which items are kept).
        """
        if n is None or n >= len(self.items):
            return self
        if n < 1:
            from report_builder.errors import DataError, shown

            raise DataError(f"n must be a positive number of items, got {shown(n)}")
        sheet = dict(self.datasheet)
        sheet["size"] = n
        if sheet.get("built"):  # the whole set's sentence, then what of it is kept
            sheet["built"] = f"{str(sheet['built']).rstrip()} Only the first {n} of these {len(self.items)} items are used."
        return EvalSet(self.id, self.name, self.items[:n], sheet)


def make_set(
    set_id: str, name: str, items: list[TextItem], *, source: str, licence: str, domain: str,
    built: str,
) -> EvalSet:
    """Build an :class:`EvalSet`, refusing an empty one.

    Args:
        set_id: Dataset id.
        name: Display name.
        items: The items (must be non-empty).
        source: Where the text comes from (file, URL or hub id).
        licence: Licence of the text.
        domain: Text domain (e.g. ``"Wikipedia"``).
        built: One sentence on how the set was built.

    Returns:
        The evaluation set.

    Raises:
        DataError: If ``items`` is empty.
    """
    from report_builder.errors import DataError, shown

    if not items:
        raise DataError(f"dataset {shown(set_id)} is empty (source: {source}); nothing to evaluate")
    sheet = {"source": source, "licence": licence, "domain": domain, "built": built,
             "size": len(items)}
    return EvalSet(set_id, name, tuple(items), sheet)
