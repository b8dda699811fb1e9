"""The last build's record, ``<cache>/last_build.json``: which cache entries made its tables, and its
provenance, so that ``render`` (and `notebook.load_results`) can rebuild its tables from the cache alone.

Pitfalls: the record names entries, never tables, so it is only as good as the cache it points into
(a missing entry is a clear `FileNotFoundError`, never a partial table); it is replaced atomically,
so a concurrent reader sees the old record or the new one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from report_builder.atomic import write_text
from report_builder.cache import Cache, frame_hash
from report_builder.config import Config

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

RECORD = "last_build.json"


def save(cfg: Config, entries: list[tuple[str, str]], provenance: dict[str, Any],
         tables: "dict[str, pd.DataFrame]") -> dict[str, str]:
    """Record a build's ``(analysis, key)`` entries and provenance; returns each table's `cache.frame_hash`
    (recorded too)."""
    hashes = {k: frame_hash(v) for k, v in tables.items()}
    write_text(Path(cfg.cache_dir) / RECORD,
               json.dumps({"entries": entries, "provenance": provenance, "table_hashes": hashes}, default=str))
    return hashes


def tables_from_cache(cfg: Config) -> "tuple[dict[str, pd.DataFrame], dict[str, Any]]":
    """The tables and provenance of the last build, read from the cache only (no torch needed)."""
    p = Path(cfg.cache_dir) / RECORD
    if not p.exists():
        raise FileNotFoundError(f"no previous build recorded in {p}; run `report-builder build` first")
    meta = json.loads(p.read_text())
    from report_builder.analyses.assemble import concat_tables

    cache = Cache(cfg.cache_dir)
    parts = []
    for analysis, key in meta["entries"]:
        e = cache.get(analysis, key)
        if e is None:
            raise FileNotFoundError(f"cache entry {analysis}/{key} is missing; run `report-builder build`")
        parts.append(e.tables)
    tables = concat_tables(parts, cfg)
    return tables, meta["provenance"]
