"""The last build's record, ``<cache>/last_build.json``: a results cache that describes itself.

It holds what `render` and `notebook.load_results` need to rebuild the build's tables and site from
the cache alone, from any directory, without the original configuration file or data files:

- ``config``: the resolved configuration (`Config.to_dict`), local paths as given;
- ``entries``: the ``(analysis, key)`` cache entries whose tables make the build's tables;
- ``provenance`` and ``table_hashes`` (`cache.frame_hash` of every table);
- ``datasets``: the ``datasets`` table itself (datasheets and sizes: the one table not read from an
  entry, so no data file or data library is needed to rebuild it), verified by its hash;
- ``inputs``: per dataset, what it was read from: a built-in set (rebuilt from its id, checked by its
  hash), a hub dataset (id, subset, split), or a local file (name, sha256, size) with a copy kept in
  ``<cache>/inputs/<sha256[:16]>/<name>`` when it is at most `KEEP_LIMIT` bytes.

`render_config` is the configuration a render from the cache uses: the recorded one, with the
render-time keys (`RENDER_KEYS`) given; a given configuration must agree with the record on every key
that changes results (`RESULT_KEYS`), else one line names the keys that differ (never a mixed site).
`recorded_config` is the recorded configuration with each missing or changed data file replaced by
its kept copy (to rebuild the results elsewhere).

Pitfalls: the record names entries, never tables, so it is only as good as the cache it points into
(missing entries are one clear `FileNotFoundError`, never a partial table); it is replaced atomically,
so a concurrent reader sees the old record or the new one; a record written before this format
(no ``config``/``datasets``) still renders where its data files are.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from report_builder.atomic import write_text
from report_builder.cache import Cache, frame_hash
from report_builder.config import Config, as_config, from_dict, replace
from report_builder import atomic, guard
from report_builder.errors import ConfigError, DataError, NotBuilt, option

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

RECORD = "last_build.json"
FORMAT = 2
INPUTS = "inputs"
RECORD_MAX = 256 << 20
"""The largest record that is read (a larger one, or a link or FIFO in its place, is no record)."""
KEEP_LIMIT = 8 << 20
"""A local data file up to this size (8 MiB) is copied into the cache; a larger one is named and hashed only."""
_KEPT = re.compile(r"inputs/[0-9a-f]{16}/(?!\.\.?$)[^/\\\0]{1,255}")
"""The form of a kept copy's path in the record (`_keep_inputs`): anything else is no copy."""
RESULT_KEYS = ("preset", "models", "datasets", "ig", "k21", "k24", "dtype", "device")
"""Configuration keys that change results or what the figures show: a render's configuration must agree
with the record on each."""
RENDER_KEYS = ("out_dir", "cache_dir", "site_url", "figures")
"""Configuration keys a render may set (where the site goes, its address, which figures); every other key
is the recorded build's."""


def record_path(cache_dir: str | os.PathLike) -> Path:
    return Path(cache_dir) / RECORD


def read(cache_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The record of the last build in ``cache_dir``, or None when there is none (or it is unreadable)."""
    try:
        base = Path(cache_dir).resolve()  # (the cache may be a link the user gave; nothing inside it is followed)
    except (OSError, ValueError, RecursionError):
        return None
    rec = atomic.read_json_inside(base, base / RECORD, RECORD_MAX)  # None: a link, a FIFO, too large, too deep
    return rec if isinstance(rec, dict) and "entries" in rec else None


# ----------------------------------------------------------------------------------------------- writing


def save(cfg: Config, entries: list[tuple[str, str]], provenance: dict[str, Any],
         tables: "dict[str, pd.DataFrame]") -> dict[str, str]:
    """Record a build: its configuration, ``(analysis, key)`` entries, provenance, table hashes, the
    ``datasets`` table and the data it read (copies of small local files). Returns each table's
    `cache.frame_hash` (recorded too)."""
    p = record_path(cfg.cache_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    hashes = {k: frame_hash(v) for k, v in tables.items()}
    record = {"format": FORMAT, "config": cfg.to_dict(), "entries": entries, "provenance": provenance,
              "table_hashes": hashes, "inputs": _keep_inputs(cfg, provenance),
              "datasets": _frame_to_json(tables["datasets"]) if "datasets" in tables else None}
    write_text(p, json.dumps(record, default=str))
    return hashes


def _data_file(dc, data_dir: str | None) -> str | None:
    """The local file a dataset entry reads (its ``path``, or its standard file under ``data_dir``), or None."""
    from report_builder.data.layout import DATA_DIR_LAYOUT, data_dir_path

    if dc.path:
        path = os.path.expanduser(dc.path)
        if os.path.isdir(path) and dc.id in DATA_DIR_LAYOUT:
            path = os.path.join(path, DATA_DIR_LAYOUT[dc.id][1])
        return path if os.path.isfile(path) else None
    folder = data_dir_path(dc.id, data_dir) if dc.hub is None else None
    if folder is not None and os.path.isfile(os.path.join(folder, DATA_DIR_LAYOUT[dc.id][1])):
        return os.path.join(folder, DATA_DIR_LAYOUT[dc.id][1])
    return None


def _keep_inputs(cfg: Config, provenance: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per dataset id: where its texts came from; a local file's copy is kept in ``<cache>/inputs``."""
    from report_builder.filehash import sha256_of_file

    hashes = provenance.get("datasets", {}) if isinstance(provenance, dict) else {}
    out: dict[str, dict[str, Any]] = {}
    for dc in cfg.datasets:
        info: dict[str, Any] = {"hash": (hashes.get(dc.id) or {}).get("hash")}
        path = _data_file(dc, cfg.data_dir)
        if dc.hub is not None:
            info.update(kind="hub", hub=dc.hub, subset=dc.subset, split=dc.split)
        elif path is None:
            info.update(kind="built-in")  # rebuilt from its id; its hash says whether it is the same set
        else:
            size, sha = os.path.getsize(path), sha256_of_file(path)
            info.update(kind="file", file=os.path.basename(path), sha256=sha, bytes=size, kept=None)
            if size <= KEEP_LIMIT:
                rel = f"{INPUTS}/{sha[:16]}/{os.path.basename(path)}"
                _copy_once(path, Path(cfg.cache_dir) / rel, sha)
                info["kept"] = rel
        out[dc.id] = info
    return out


def _copy_once(src: str, dst: Path, sha: str) -> None:
    """Copy ``src`` to ``dst`` atomically unless an intact copy is there (content-addressed by ``sha``)."""
    from report_builder.atomic import copy_file
    from report_builder.filehash import sha256_of_file

    if dst.is_file() and sha256_of_file(dst) == sha:
        return
    copy_file(src, dst)


def _frame_to_json(df: "pd.DataFrame") -> dict[str, Any]:
    """A small table as JSON that rebuilds it exactly (values as Python scalars, dtypes named)."""
    rows = [[v.item() if hasattr(v, "item") else v for v in row] for row in df.itertuples(index=False, name=None)]
    return {"columns": [str(c) for c in df.columns], "dtypes": [str(t) for t in df.dtypes], "rows": rows}


def _frame_from_json(d: dict[str, Any]) -> "pd.DataFrame":
    import pandas as pd

    df = pd.DataFrame(d["rows"], columns=d["columns"])
    return df.astype(dict(zip(d["columns"], d["dtypes"]))) if len(d["columns"]) else df


# ----------------------------------------------------------------------------------------------- reading


def tables_from_cache(cfg: "Config | str | os.PathLike") -> "tuple[dict[str, pd.DataFrame], dict[str, Any]]":
    """The tables and provenance of the last build, read from the cache only (no torch, no data files,
    no data library). ``cfg``: a `Config` (its ``cache_dir``) or the cache folder itself.

    Raises:
        NotBuilt: no build is recorded there, or entries it names are missing (one line each).
    """
    cache_dir = cfg.cache_dir if isinstance(cfg, Config) else str(cfg)
    p = record_path(cache_dir)
    meta = read(cache_dir)
    if meta is None and os.path.lexists(p):  # there, but not a record read back: a link, FIFO, damaged JSON
        raise DataError(f"the build record {p} cannot be read back (a symbolic link, not a regular file, larger "
                        f"than {RECORD_MAX:,} bytes, or not the JSON object a build writes); run `report-builder "
                        "build` again, or copy the whole cache folder again")
    if meta is None:
        from report_builder.caches import where_builds_are

        raise NotBuilt(f"no previous build recorded in {p}; {where_builds_are(cache_dir)}")
    from report_builder.analyses.assemble import concat_tables

    entries = meta.get("entries")
    if not (isinstance(entries, list) and all(isinstance(e, (list, tuple)) and len(e) == 2
                                              and all(isinstance(x, str) for x in e) for e in entries)
            and isinstance(meta.get("provenance"), dict)):  # read back: its form is checked before use
        raise DataError(f"the build record {p} is damaged (its entries or provenance are not as a build writes "
                        "them); run `report-builder build` again")
    cache = Cache(cache_dir)
    parts, missing = [], []
    for analysis, key in entries:
        e = cache.get(analysis, key)
        if e is None:
            missing.append(f"{analysis}/{key}")
        else:
            parts.append(e.tables)
    if missing:
        raise NotBuilt(
            f"the cache {cache_dir} lacks {len(missing)} of the {len(meta['entries'])} results its last build "
            f"recorded ({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}); copy the whole cache folder, "
            "or run `report-builder build` again")
    recorded = meta.get("datasets")
    want = (meta.get("table_hashes") or {}).get("datasets")
    if recorded is not None:  # no data is read: the recorded table is the build's own
        ds = _frame_from_json(recorded)
        if want is None or frame_hash(ds) == want:
            tables = concat_tables(({k: v for k, v in t.items() if k != "dataset_stats"} for t in parts), None)
            return {**tables, "datasets": ds}, meta["provenance"]
    try:  # an older record (no datasets table): the datasheets are rebuilt from the data files
        return concat_tables(parts, _config_of(meta, cfg)), meta["provenance"]
    except DataError as e:
        raise DataError(f"{e} — the build recorded in {p} predates records that keep their data; render from the "
                        "build's directory, or run `report-builder build` again") from None


def _config_of(meta: dict[str, Any], cfg: "Config | str | os.PathLike") -> Config:
    if isinstance(cfg, Config):
        return cfg
    recorded = meta.get("config") or (meta.get("provenance") or {}).get("config") or {}
    return replace(from_dict(recorded), cache_dir=str(cfg))


def _differences(a: Any, b: Any, where: str, out: list[str]) -> None:
    """Dotted keys whose values differ between two configuration mappings (lists item by item)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            _differences(a.get(k), b.get(k), f"{where}.{k}" if where else str(k), out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            out.append(f"{where} ({len(a)} entries, the build had {len(b)})")
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                _differences(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(where)


def disagreement(cfg: Config, meta: dict[str, Any]) -> list[str]:
    """The `RESULT_KEYS` (dotted, item by item) on which ``cfg`` differs from a recorded build."""
    recorded = meta.get("config")
    if not isinstance(recorded, dict):
        return []
    mine = cfg.to_dict()
    out: list[str] = []
    for k in RESULT_KEYS:
        if k in recorded:
            _differences(mine.get(k), recorded.get(k), k, out)
    return out


def render_config(config: Any = None, *, overrides: list[str] | tuple = (), **changes: Any) -> Config:
    """The configuration a render from the cache uses.

    Args:
        config: None: the configuration recorded by the last build in the cache (``changes['cache_dir']``
            or the default cache), with ``changes`` and ``overrides`` applied, writing ``site`` unless
            ``changes['out_dir']`` says otherwise (never the recorded build's own output, which is only
            mentioned in the log); without a record, the ``default`` preset. Otherwise a `Config`, preset name, YAML file or mapping (`config.as_config`),
            which must agree with the record on every `RESULT_KEYS` key.
        overrides: ``--set KEY=VALUE`` items. **changes: top-level keys (``out_dir``, ``cache_dir``, ...).
    Raises:
        ConfigError: the configuration disagrees with the recorded build (one line naming the keys).
    """
    from report_builder.overrides import with_assignments

    if config is None:
        cache_dir = changes.get("cache_dir") or Config().cache_dir  # the default results cache
        meta = read(cache_dir)
        recorded = (meta or {}).get("config")
        if isinstance(recorded, dict):
            base = from_dict(recorded)  # where the build wrote its site is only mentioned: ./site unless --out
            cfg = replace(base, **{"cache_dir": str(cache_dir), "out_dir": Config.out_dir, **changes})
            if "out_dir" not in changes and os.path.abspath(base.out_dir) != os.path.abspath(cfg.out_dir):
                import logging

                from report_builder.errors import for_terminal

                logging.getLogger("report_builder").info(
                    f"render: writing {for_terminal(cfg.out_dir)}/ (the recorded build wrote "
                    f"{for_terminal(base.out_dir)}/; {option('out_dir')} chooses the folder)")
        else:
            cfg = as_config("default", **changes)
    else:
        cfg = as_config(config, **changes)
    cfg = with_assignments(cfg, list(overrides))
    meta = read(cfg.cache_dir)
    if meta is None or not isinstance(meta.get("config"), dict):
        return cfg
    diff = disagreement(cfg, meta)
    if diff:
        shown = ", ".join(diff[:6]) + (f" and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise ConfigError(f"render: the configuration differs from the build recorded in {record_path(cfg.cache_dir)} "
                          f"on {shown}; render without {option('config', flag='--config/--preset/--set')} to use "
                          "the recorded configuration, "
                          "or run `report-builder build` with this one")
    recorded = from_dict(meta["config"])  # every key but the render-time ones is the build's own
    return replace(recorded, **{k: getattr(cfg, k) for k in RENDER_KEYS})


def recorded_config(cache_dir: str | os.PathLike) -> Config:
    """The recorded build's configuration, each local data file that is missing (or changed since the
    build) replaced by the copy kept in the cache, so the build can run again elsewhere.

    Raises:
        NotBuilt: no build recorded. DataError: a data file is missing and no copy was kept.
    """
    import dataclasses

    from report_builder.filehash import sha256_of_file

    meta = read(cache_dir)
    if meta is None or not isinstance(meta.get("config"), dict):
        raise NotBuilt(f"no build recorded in {record_path(cache_dir)} with its configuration; run "
                                "`report-builder build` first")
    cfg = replace(from_dict(meta["config"]), cache_dir=str(cache_dir))
    inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
    datasets = []
    for dc in cfg.datasets:
        info = inputs.get(dc.id) if isinstance(inputs.get(dc.id), dict) else {}
        if info.get("kind") == "file":
            path = _data_file(dc, cfg.data_dir)
            if path is None or sha256_of_file(path) != info.get("sha256"):
                if not (isinstance(info.get("kept"), str) and _KEPT.fullmatch(info["kept"])):  # read back: no traversal
                    raise DataError(f"dataset {dc.id!r}: its file {info.get('file')} (sha256 "
                                    f"{str(info.get('sha256'))[:16]}…, {info.get('bytes')} bytes) is not here and the "
                                    f"cache keeps no copy (larger than {KEEP_LIMIT >> 20} MiB); put it back")
                dc = dataclasses.replace(dc, path=str((Path(cache_dir) / info["kept"]).resolve()))
        datasets.append(dc)
    return replace(cfg, datasets=tuple(datasets))


def clean_inputs(cache_dir: str | os.PathLike) -> tuple[int, list[Path]]:
    """Remove the kept data copies, ``<cache>/inputs/<sha256[:16]>/<name>``: each one whose content's sha256
    starts with its folder's name (provably the tool's copy), and a folder left empty or holding a dead
    process's temporary copy (a build or clean killed midway); anything else is left and returned. Symbolic
    links are never followed."""
    from report_builder.filehash import sha256_of_file

    root = Path(cache_dir) / INPUTS
    if root.is_symlink() or not root.is_dir():
        return 0, [root] if root.is_symlink() else []
    n, left = 0, []
    for d in sorted(root.iterdir()):
        if d.is_dir() and not d.is_symlink():
            guard.sweep([d], legacy_age_s=None)  # a copy killed midway (`atomic.copy_file`'s temporary name)
        files = list(d.iterdir()) if d.is_dir() and not d.is_symlink() else []
        if not files and d.is_dir() and not d.is_symlink() and re.fullmatch("[0-9a-f]{16}", d.name):
            d.rmdir()  # emptied by a clean killed before it removed the folder, or by the sweep
            continue
        if len(files) == 1 and files[0].is_file() and not files[0].is_symlink() \
                and sha256_of_file(files[0]).startswith(d.name) and len(d.name) == 16:
            files[0].unlink()
            d.rmdir()
            n += 1
        else:
            left.append(d)
    if not any(root.iterdir()):
        root.rmdir()
    return n, left
