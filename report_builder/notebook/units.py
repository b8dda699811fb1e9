"""How a notebook map is normalised, and what its values are called (SPEC §8: the unit is always said).

One default for every ``normalise`` argument (`NORMALISE`), read by `Decomposition.map`, ``to_frame``,
``plot``, ``show`` and the inline view; the units themselves are the vocabulary's (`schema.RAW_NORM`,
`schema.ROW_NORMALISED`). Pitfall: a unit is checked here, once, before any map is touched.
"""
from __future__ import annotations

from report_builder import schema

NORMALISE = "row"
"""The default of every ``normalise`` argument: maps are row-normalised (each row sums to 1, as the
site's K24 maps); ``normalise=None`` gives the raw norms ``||z_{i<-j}||`` (as the site's K21 maps)."""
NORMALISE_OPTIONS = ("row", None)


def map_unit(normalise: str | None) -> str:
    """The unit of a map value under ``normalise`` (`schema.ROW_NORMALISED` or `schema.RAW_NORM`)."""
    if normalise not in NORMALISE_OPTIONS:
        raise ValueError(f"normalise: expected 'row' (each row sums to 1) or None (raw norms), got {normalise!r}")
    return schema.ROW_NORMALISED if normalise == "row" else schema.RAW_NORM


def unit_label(unit: str, names=()) -> str:
    """The short label of a map unit on charts: ``"row-normalised"`` or ``"raw norm ||z_i←j||"``; a raw
    map of a weight method (ATTN-W, ATTNRES-W, among ``names``) holds attention weights, not norms."""
    if unit == schema.ROW_NORMALISED:
        return "row-normalised"
    weights = [n for n in names if str(n).endswith("-W")]
    if weights and len(weights) == len(names):
        return "attention weight"
    return "raw norm ||z_i←j||" + ("; weight for -W methods" if weights else "")
