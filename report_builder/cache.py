"""Content-addressed results store: one directory per (analysis, key) with parquet tables + meta.json.

The key is the sha256 of exactly what a result depends on: analysis id and version, parameters,
model fingerprint, dataset hash. Writes go to a temporary directory that is renamed into place, so an
interrupted build never leaves a partial entry. ``meta.json`` records each table's sha256; an entry
whose files do not match is reported as corrupt, removed, and recomputed.

Concurrency: each entry has a lock file (``results/<analysis>/.<key>.lock``). Computing and
publishing an entry happen under its lock, so two builds needing the same entry compute it once
(the second waits and reuses it: first writer wins). Readers read without the lock; an entry that
fails verification is re-checked under the lock and only then removed, so a reader never deletes an
entry another process is writing. The cache root carries a ``.report_builder-cache`` marker: a
folder without it is used only when missing or empty (nothing is adopted), and `clean` refuses it.
`clean` removes only what it can prove it wrote: entry folders holding exactly ``meta.json`` and the
tables it lists, their lock files and dead processes' temporary folders; anything else is left and named.

The whole cache has a lock too (`cache_lock.using`): ``build``, ``analyze``, ``render`` and ``reproduce``
share it, ``clean`` takes it alone.

Pitfall: parameters must be JSON-serialisable and canonical (sorted keys) or keys will drift.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from report_builder.filehash import sha256_of_fd, sha256_of_file
from report_builder import guard
from report_builder import atomic
from report_builder.atomic import atomic_dir
from report_builder.errors import UnsafeOutput, option, shown


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
"""An analysis id or entry key as a path component: no separator, no leading dot (no ``..``), bounded."""
META_MAX = 64 << 20
"""The largest ``meta.json`` of an entry that is read (a larger one is damage)."""
TABLE_MAX = 1 << 40
"""The largest table of an entry that is read (a bound, not a limit a result reaches)."""


def result_key(analysis: str, version: int, params: dict[str, Any]) -> str:
    """sha256 (first 20 hex) of the canonical JSON of analysis, version and parameters."""
    blob = json.dumps({"analysis": analysis, "version": version, "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]




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

    def __init__(self, root: str | Path, *, create: bool = True):
        self.base = Path(root)
        if create:
            guard.mark_cache(self.base)
        self.root = self.base / "results"
        if create and self.root.is_symlink():  # entries would be written and removed through it
            raise guard.UnsafeOutput(f"refusing to use the cache {self.base}: its results folder is a symbolic link "
                                     f"(to {os.readlink(self.root)}), which report_builder never makes; remove the link")
        self.log: list[str] = []

    @classmethod
    def existing(cls, root: str | Path) -> "Cache | None":
        """The cache at ``root`` without creating or marking anything: None when ``root`` is missing or an
        empty folder; `UnsafeOutput` when it holds files and no marker (not the tool's)."""
        root = Path(root)
        if guard.is_cache(root):
            return cls(root, create=False)
        if not root.exists() or (root.is_dir() and not root.is_symlink() and not any(
                c.name != guard.CACHE_LOCK for c in root.iterdir())):  # a `clean` killed at its very end
            return None
        guard.mark_cache(root)  # raises: the folder is not ours
        raise AssertionError("unreachable")  # pragma: no cover

    def path(self, analysis: str, key: str) -> Path:
        """The entry's folder; `UnsafeOutput` when ``results`` or the analysis' folder is a symbolic link
        (a copied or tampered cache: nothing is read, locked or written through it)."""
        for name in (analysis, key):  # from a record read back (`last_build`): checked before it is joined
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise UnsafeOutput(f"refusing to use the cache entry {shown(analysis)}/{shown(key)} of {self.base}: "
                                   "not a name report_builder gives an entry (a tampered build record?); run "
                                   "`report-builder build` again")
        for p in (self.root, self.root / analysis):
            if p.is_symlink():
                raise UnsafeOutput(f"refusing to use {p}: it is a symbolic link, which report_builder never makes "
                                   "in a results cache; remove it (its results are computed again) or use another "
                                   f"{option('cache_dir')}")
        return self.root / analysis / key

    def lock(self, analysis: str, key: str):
        """The entry's lock (a `filelock.FileLock`)."""
        return guard.lock_for(self.path(analysis, key))

    @staticmethod
    def _load(d: Path) -> Entry | None:
        """The verified entry in ``d``; None when absent; raises when present but damaged (a link, FIFO
        or device among its files is damage: never followed or read)."""
        if d.is_symlink():
            raise ValueError("the entry is a symbolic link")
        meta_p = d / "meta.json"
        if not os.path.lexists(meta_p):
            if d.exists() and any(d.iterdir()):
                raise ValueError("meta.json is missing")
            return None
        meta = json.loads(atomic.read_inside(d, meta_p, META_MAX))  # regular files, no link: else damage
        tables = {}
        for name, sha in meta["tables"].items():
            p = d / f"{name}.parquet"
            with atomic.opened_regular(d, p, TABLE_MAX) as fd:
                if sha256_of_fd(fd) != sha:
                    raise ValueError(f"{p.name} does not match its recorded hash")
                os.lseek(fd, 0, os.SEEK_SET)  # the very file just hashed (never opened again by its name)
                with os.fdopen(os.dup(fd), "rb") as fh:
                    tables[name] = pd.read_parquet(fh)
        return Entry(tables, meta, reused=True)

    def _get_locked(self, analysis: str, key: str) -> Entry | None:
        """Verify under the entry's lock (held by the caller); remove the entry only if damaged."""
        d = self.path(analysis, key)
        try:
            return self._load(d)
        except Exception as e:  # noqa: BLE001 - any damage means: recompute
            self.log.append(f"corrupt cache entry {analysis}/{key} ({e}); recomputing")
            shutil.rmtree(d, ignore_errors=True)
            return None

    def get(self, analysis: str, key: str) -> Entry | None:
        """Load an entry, verifying its files; a corrupt entry is removed and None returned.

        A failed check is repeated under the entry's lock before anything is removed (another
        process may have been publishing it at that moment).
        """
        try:
            return self._load(self.path(analysis, key))
        except Exception:  # noqa: BLE001
            pass
        with _held(self.lock(analysis, key), f"{analysis}/{key}"):
            return self._get_locked(analysis, key)

    def put(self, analysis: str, key: str, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Entry:
        """Write an entry atomically (temp dir + rename) under its lock; an existing valid entry wins."""
        with _held(self.lock(analysis, key), f"{analysis}/{key}"):
            existing = self._get_locked(analysis, key)
            if existing is not None:
                return existing
            return self._put_locked(analysis, key, tables, meta)

    def _put_locked(self, analysis: str, key: str, tables: dict[str, pd.DataFrame], meta: dict[str, Any]) -> Entry:
        with atomic_dir(self.path(analysis, key)) as tmp:
            hashes = {}
            for name, df in tables.items():
                p = tmp / f"{name}.parquet"
                df.reset_index(drop=True).to_parquet(p, index=False)
                hashes[name] = sha256_of_file(p)
            meta = {**meta, "tables": hashes, "table_hashes": {n: frame_hash(t) for n, t in tables.items()},
                    "written": time.strftime("%Y-%m-%dT%H:%M:%S")}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True, default=str))
        return Entry(tables, meta, reused=False)

    def get_or_compute(self, analysis: str, version: int, params: dict[str, Any],
                       compute: Callable[[], tuple[dict[str, pd.DataFrame], dict[str, Any]]]) -> Entry:
        """Return the cached entry for these parameters, or compute, store and return it."""
        key = result_key(analysis, version, params)
        try:
            hit = self._load(self.path(analysis, key))
        except Exception:  # noqa: BLE001 - verified again under the lock below
            hit = None
        if hit is not None:
            return hit
        with _held(self.lock(analysis, key), f"{analysis}/{key}"):  # first writer wins: a second build waits, reuses
            hit = self._get_locked(analysis, key)
            if hit is not None:
                return hit
            t0 = time.perf_counter()
            tables, meta = compute()
            meta = {"analysis": analysis, "version": version, "params": params, "key": key,
                    "seconds": round(time.perf_counter() - t0, 3), **meta}
            return self._put_locked(analysis, key, tables, meta)

    def clean(self) -> tuple[int, list[Path]]:
        """Remove every entry the cache can prove it wrote (`is_entry`), each under its lock, with its lock
        file and the temporary folders of dead processes; empty folders go too. Returns how many entries
        were removed and what was left (not provably the tool's). `UnsafeOutput` when ``results`` is a
        symbolic link (nothing removed)."""
        guard.check_no_symlink(self.root, "the results folder")
        if not self.root.exists():
            return 0, []
        n, left = 0, []
        for a in sorted(self.root.iterdir()):
            if a.is_symlink() or not a.is_dir():
                left.append(a)
                continue
            for e in sorted(a.iterdir()):
                if is_entry(e):
                    with guard.removing_locked(e):
                        atomic.remove_dir(e)  # cut short: a temporary name the sweep below removes next time
                    n += 1
            guard.sweep([a], legacy_age_s=None)
            for e in sorted(a.iterdir()):
                if _is_lock_file(e) and not (a / e.name[1:-5]).exists():
                    os.unlink(e)
                else:
                    left.append(e)
            _rmdir_if_empty(a)
        _rmdir_if_empty(self.root)
        return n, left

    @property
    def reproduced(self) -> Path:
        """Where `report-builder reproduce` draws the figures it rebuilds: ``reproduced/<id>-<hash>/``."""
        return self.base / REPRODUCED

    def reproduced_lock(self) -> dict[str, str]:
        """How the lock of ``reproduced/`` (`guard.site_lock` of a drawing in it) is named in its error line."""
        return {"what": f"the reproduced figures folder {self.reproduced}", "holder": "another reproduce into this cache",
                "setting": "cache_dir"}

    def restore_reproduced(self) -> list[Path]:
        """Put back each drawing of ``reproduced/`` that a ``reproduce`` killed mid-replacement left renamed
        aside (`atomic.replace_dir`, `atomic.restore_swapped`) before a sweep could remove it; returns them."""
        d = self.reproduced
        if not d.is_dir() or d.is_symlink():
            return []
        back = []
        for p in guard.stale_temp_dirs(d, legacy_age_s=None):
            name = p.name[1:].split(".old-")[0]
            if ".old-" in p.name and _REPRODUCED_NAME.fullmatch(name) and atomic.restore_swapped(
                    d / name, **self.reproduced_lock()):
                back.append(d / name)
        return back

    def clean_reproduced(self) -> tuple[int, list[Path]]:
        """Remove the figures `reproduce` drew here (folders named ``<figure id>-<12 hex>``) and dead
        processes' temporary folders; returns (how many, what was left: not provably the tool's)."""
        d = self.reproduced
        guard.check_no_symlink(d, "the reproduced figures folder")
        if not d.is_dir():
            return 0, []
        guard.sweep([d], legacy_age_s=None)
        n, left = 0, []
        for e in sorted(d.iterdir()):
            if e.is_dir() and not e.is_symlink() and _REPRODUCED_NAME.fullmatch(e.name):
                shutil.rmtree(e)
                n += 1
            else:
                left.append(e)
        _rmdir_if_empty(d)
        return n, left

    def temp_parents(self) -> list[Path]:
        """Folders where this cache's temporary dirs and files may be left: the cache itself (its JSON
        records, `atomic.write_text`), each analysis folder, the reproduced figures' folder and each
        folder of kept data copies (``inputs/<sha[:16]>/``, `atomic.copy_file`)."""
        parents = [self.base] if self.base.is_dir() else []
        if self.root.is_dir() and not self.root.is_symlink():  # never a folder a link leads to
            parents += [a for a in self.root.iterdir() if a.is_dir() and not a.is_symlink()]
        if self.reproduced.is_dir() and not self.reproduced.is_symlink():
            parents.append(self.reproduced)
        inputs = self.base / "inputs"  # the kept data copies (`last_build`): a copy killed midway
        if inputs.is_dir() and not inputs.is_symlink():
            parents += [d for d in inputs.iterdir() if d.is_dir() and not d.is_symlink()]
        return parents

    def stale_temp(self) -> list[Path]:
        """Leftover temporary dirs and files (should be none, even after Ctrl-C)."""
        return [p for a in self.temp_parents() for p in a.iterdir() if ".tmp-" in p.name]

    def sweep(self) -> list[Path]:
        """Remove temporary dirs and files left by processes that are gone (never a live build's); a
        reproduced drawing renamed aside by a ``reproduce`` killed mid-replacement is put back first."""
        self.restore_reproduced()
        return guard.sweep(self.temp_parents())


@contextmanager
def _held(lock: Any, what: str) -> Iterator[None]:
    """Hold an entry's lock; when another process holds it (a build computing the same entry, or one suspended
    with Ctrl-Z), say once that this one waits, and stop with one line after `guard.LOCK_TIMEOUT_S`."""
    from filelock import Timeout

    try:
        lock.acquire(timeout=0)
    except Timeout:
        logging.getLogger("report_builder").info(f"waiting for the cache entry {what}: another build is computing "
                                                 "it (it is reused when done)")
        try:
            lock.acquire(timeout=guard.LOCK_TIMEOUT_S)
        except Timeout:
            raise UnsafeOutput(f"another build has held the cache entry {what} for {guard.LOCK_TIMEOUT_S / 3600:g} h "
                               f"(stopped with Ctrl-Z?); let it finish or end it, or give another {option('cache_dir')}"
                               ) from None
    try:
        yield
    finally:
        lock.release()


def is_entry(d: Path) -> bool:
    """Whether ``d`` is a cache entry as `Cache.put` writes it: a real folder holding ``meta.json`` and
    exactly the ``<table>.parquet`` files that ``meta.json`` lists (what `clean` may remove)."""
    if d.name.startswith(".") or d.is_symlink() or not d.is_dir():
        return False
    meta = atomic.read_json_inside(d, d / "meta.json", META_MAX)
    tables = meta.get("tables") if isinstance(meta, dict) else None
    if not isinstance(tables, dict):
        return False
    names = {c.name: c for c in d.iterdir()}
    want = {"meta.json"} | {f"{t}.parquet" for t in tables}
    return set(names) == want and all(c.is_file() and not c.is_symlink() for c in names.values())


def _is_lock_file(p: Path) -> bool:
    """A ``.<name>.lock`` file as `guard.lock_for` makes it (empty, regular)."""
    try:
        return (p.name.startswith(".") and p.name.endswith(".lock") and not p.is_symlink() and p.is_file()
                and p.stat().st_size == 0)
    except OSError:
        return False


REPRODUCED = "reproduced"
"""The folder of a cache where `report-builder reproduce` draws the figures it rebuilt (`Cache.reproduced`)."""
_REPRODUCED_NAME = re.compile(r"[a-z0-9][a-z0-9-]*-[0-9a-f]{12}")


def _rmdir_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass

