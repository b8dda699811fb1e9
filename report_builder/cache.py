"""Content-addressed results store: one directory per (analysis, key) with parquet tables + meta.json.

The key is the sha256 of exactly what a result depends on: analysis id and version, parameters,
model fingerprint, dataset hash. Writes go to a temporary directory that is renamed into place, so an
interrupted build never leaves a partial entry. ``meta.json`` records each table's sha256; an entry
whose files do not match is reported as corrupt, removed, and recomputed.

Pitfall: parameters must be JSON-serialisable and canonical (sorted keys) or keys will drift.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from report_builder.atomic import atomic_dir


def result_key(analysis: str, version: int, params: dict[str, Any]) -> str:
    """sha256 (first 20 hex) of the canonical JSON of analysis, version and parameters."""
    blob = json.dumps({"analysis": analysis, "version": version, "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _file_hash(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def frame_hash(df: pd.DataFrame) -> str:
    """A stable content hash of a table (values and column names)."""
    h = hashlib.sha256(",".join(map(str, df.columns)).encode())
    h.update(pd.util.hash_pandas_object(df, index=False).values.tobytes())
    return h.hexdigest()[:16]


@dataclass
class Entry:
    """A cached result: its tables and metadata."""

    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any]
    reused: bool


class Cache:
    """The results store rooted at ``root`` (git-ignored, e.g. ``.cache/report_builder``)."""

    def __init__(self, root: str | Path):
        self.root = Path(root) / "results"
        self.log: list[str] = []

    def path(self, analysis: str, key: str) -> Path:
        return self.root / analysis / key

    def get(self, analysis: str, key: str) -> Entry | None:
        """Load an entry, verifying its files; a corrupt entry is removed and None returned."""
        d = self.path(analysis, key)
        meta_p = d / "meta.json"
        if not meta_p.exists():
            return None
        try:
            meta = json.loads(meta_p.read_text())
            tables = {}
            for name, sha in meta["tables"].items():
                p = d / f"{name}.parquet"
                if _file_hash(p) != sha:
                    raise ValueError(f"{p.name} does not match its recorded hash")
                tables[name] = pd.read_parquet(p)
            return Entry(tables, meta, reused=True)
        except Exception as e:  # noqa: BLE001 - any damage means: recompute
            self.log.append(f"corrupt cache entry {analysis}/{key} ({e}); recomputing")
            shutil.rmtree(d, ignore_errors=True)
            return None

    def put(self, analysis: str, key: str, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Entry:
        """Write an entry atomically (temp dir + rename)."""
        with atomic_dir(self.path(analysis, key)) as tmp:
            hashes = {}
            for name, df in tables.items():
                p = tmp / f"{name}.parquet"
                df.reset_index(drop=True).to_parquet(p, index=False)
                hashes[name] = _file_hash(p)
            meta = {**meta, "tables": hashes, "table_hashes": {n: frame_hash(t) for n, t in tables.items()},
                    "written": time.strftime("%Y-%m-%dT%H:%M:%S")}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True, default=str))
        return Entry(tables, meta, reused=False)

    def get_or_compute(self, analysis: str, version: int, params: dict[str, Any],
                       compute: Callable[[], tuple[dict[str, pd.DataFrame], dict[str, Any]]]) -> Entry:
        """Return the cached entry for these parameters, or compute, store and return it."""
        key = result_key(analysis, version, params)
        hit = self.get(analysis, key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        tables, meta = compute()
        meta = {"analysis": analysis, "version": version, "params": params, "key": key,
                "seconds": round(time.perf_counter() - t0, 3), **meta}
        return self.put(analysis, key, tables, meta)

    def clean(self) -> int:
        """Remove every entry; returns how many were removed."""
        if not self.root.exists():
            return 0
        n = sum(1 for a in self.root.iterdir() if a.is_dir() for _ in a.iterdir())
        shutil.rmtree(self.root)
        return n

    def stale_temp(self) -> list[Path]:
        """Leftover temporary dirs (should be none, even after Ctrl-C)."""
        return list(self.root.glob("*/.tmp-*")) if self.root.exists() else []
