"""Evaluation sets kept on disk, so a set that takes seconds to build (``wiki``: the gensim dump is
parsed and its markup stripped) is built once per source file, not on every run.

An entry is ``<user cache>/evalsets/<loader>-<key>.json``: the set's items, name and datasheet. The
key is a SHA-256 over everything the set is computed from: the loader's id and version, its
parameters, the SHA-256 of every source file it reads, the versions of the libraries it parses with,
and the code of the ``data`` package. An entry is trusted only when its items hash to the set hash
it records; anything else (edited, truncated, another format) is built again and replaced.

Pitfall: only a deterministic builder of files may be cached here (the same files give the same
set); a set read from the ``datasets`` hub cache is not.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from report_builder import guard
from report_builder.atomic import write_text
from report_builder.filehash import sha256_of_file

from .evalset import EvalSet, TextItem, items_hash

FORMAT = 1
"""Version of the entry format."""
_ENTRY = re.compile(r"[a-z0-9][a-z0-9_-]*-[0-9a-f]{24}\.json")


def cache_dir() -> Path:
    """``<user cache>/evalsets`` (`guard.user_cache_dir`; ``REPORT_BUILDER_CACHE`` overrides)."""
    return guard.user_cache_dir() / "evalsets"


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """SHA-256 of the ``data`` package's source files."""
    h = hashlib.sha256()
    for p in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(p.name.encode("utf-8") + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _version(lib: str) -> str:
    try:
        return metadata.version(lib)
    except metadata.PackageNotFoundError:
        return "absent"


def set_key(loader: str, version: int, params: dict[str, Any], files: Iterable[str], libs: Iterable[str] = ()) -> str:
    """The key of a set built by ``loader`` (version ``version``) from ``files`` with ``params``."""
    payload = {"format": FORMAT, "loader": loader, "version": version, "params": params,
               "files": [sha256_of_file(f) for f in files], "libs": {lib: _version(lib) for lib in libs},
               "code": _code_digest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:24]


SET_MAX = 512 << 20
"""The largest cached set read back (a larger file, a FIFO or JSON nested too deeply is rebuilt)."""


def _read(path: Path) -> EvalSet | None:
    from report_builder.atomic import read_json_inside

    rec = read_json_inside(path.parent, path, SET_MAX)  # bounded; no FIFO waited on; too deep: None
    if not isinstance(rec, dict):
        return None
    try:
        items = tuple(TextItem(i, a, b) for i, a, b in rec["items"])
        if rec.get("format") != FORMAT or items_hash(items) != rec["hash"]:
            return None
        return EvalSet(rec["id"], rec["name"], items, dict(rec["datasheet"]))
    except (ValueError, KeyError, TypeError):
        return None


def _write(path: Path, es: EvalSet) -> None:
    rec = {"format": FORMAT, "id": es.id, "name": es.name, "hash": es.hash, "datasheet": es.datasheet,
           "items": [[it.id, it.text_a, it.text_b] for it in es.items]}
    try:
        write_text(path, json.dumps(rec, ensure_ascii=False))
    except OSError:  # a cache that cannot be written only costs time
        pass


def cached_set(loader: str, version: int, params: dict[str, Any], files: Iterable[str], build: Callable[[], EvalSet],
               libs: Iterable[str] = ()) -> EvalSet:
    """The set ``build()`` returns, read from the disk cache when its key is there.

    Args:
        loader: the loader's id (part of the file name: lower case, digits, ``-``/``_``).
        version: bump it when the loader's output changes for the same files and parameters.
        params: every parameter of the build (JSON-able).
        files: the source files the set is built from (hashed into the key).
        build: builds the set (deterministic in the files and parameters).
        libs: distributions whose version shapes the result (e.g. ``gensim``).
    """
    path = cache_dir() / f"{loader}-{set_key(loader, version, params, files, libs)}.json"
    es = _read(path)
    if es is None:
        es = build()
        _write(path, es)
    return es


def clean() -> int:
    """Remove the cached sets (only files named like ours); returns how many."""
    d = cache_dir()
    n = 0
    if d.is_dir():
        for p in d.iterdir():
            if p.is_file() and _ENTRY.fullmatch(p.name):
                p.unlink()
                n += 1
        guard.sweep([d], legacy_age_s=None)
    return n
