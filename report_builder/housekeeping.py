"""Before and after a build: the checks the front runs before any work, and ``report-builder clean``.

`check_ids` checks the configured dataset and figure ids against their registries (`config.validate`
checks every other value; the registries sit above the configuration, so the ids are checked here).
`preflight` checks that the cache and the output can be written without touching foreign files and
sweeps temporary folders and files of dead processes (the cache's, the output's state folder's, the
user cache's: `sweep_user_cache`). `clean` removes what the tool made, and only that, and
says what it removed and what it left.

Pitfall: nothing here may remove or overwrite a directory that lacks the tool's marker (`guard`): a
misconfigured ``--out`` or ``--cache`` must fail with advice, never delete someone's files.
"""
from __future__ import annotations

import os
from pathlib import Path

from report_builder import guard, site_marker
from report_builder.atomic import restore_swapped
from report_builder.cache import Cache
from report_builder.cache_lock import remove_if_empty, using
from report_builder.config import Config
from report_builder.errors import ConfigError, UsageError, option, shown


def check_ids(cfg: Config) -> Config:
    """``cfg`` once its dataset ids (built in, or a user's own data with ``path:``/``hub:``) and its
    ``figures:`` ids (when listed) are known; `ConfigError` naming the key and the known ids otherwise."""
    from report_builder.data.registry import DATASETS

    for k, d in enumerate(cfg.datasets):
        if not (d.id in DATASETS or d.path or d.hub):
            raise ConfigError(f"datasets[{k}].id: {shown(d.id)} is not a built-in dataset ({', '.join(DATASETS)}); for "
                              f"your own data give `path:` (a .txt/.jsonl/.csv/.tsv file) or `hub:`")
    if not isinstance(cfg.figures, str):
        try:
            from report_builder.figures.registry import all_figures

            known = [f.id for f in all_figures()]
        except ImportError:  # a compute-only install (no altair): `render` checks the ids
            known = list(cfg.figures)
        for k, f in enumerate(cfg.figures):
            if f not in known:
                raise ConfigError(f"figures[{k}]: unknown figure id {shown(f)}; `report-builder list figures` shows the "
                                  f"{len(known)} ids (e.g. {', '.join(known[:3])})")
    return cfg


def checks(cfg: Config, *, site: bool = True) -> None:
    """The checks `preflight` runs before it creates or writes anything: the configured ids, the
    output (``site``), that no data file or folder or local model lies inside it (the swap would delete
    it) and that the cache and the output do not nest. The front runs them before it
    takes the cache's lock (`cache_lock.using`, which creates the cache), then `preflight` under it."""
    check_ids(cfg)
    out = Path(cfg.out_dir)
    if site:
        site_marker.check_replaceable(out, "the output directory", option("out_dir"))
        from report_builder.citations.earlier_site import check_known_versions

        check_known_versions(out)  # before any work: a build would have to drop them
        inputs = [("data_dir", cfg.data_dir), *((f"datasets[{k}].path", d.path) for k, d in enumerate(cfg.datasets)),
                  *((f"models[{k}].source", m.source) for k, m in enumerate(cfg.models)
                    if os.path.exists(os.path.expanduser(str(m.source))))]  # a local folder, not a hub id
        for what, path in inputs:
            if path:
                guard.check_input_outside(out, path, what)
    guard.check_not_nested(out, Path(cfg.cache_dir))  # before the cache is created


def preflight(cfg: Config, *, cache: bool = True, site: bool = True) -> Cache | None:
    """Check, before any work, the configured ids (`check_ids`), that the cache and the output do not
    nest, and that both can be written without touching foreign files — the cache (created with its
    marker when missing or empty), the output, its state folder in the cache and its lock (a blocked
    one is found now, not after the analyses); sweep temp dirs left by dead processes. Raises
    `guard.UnsafeOutput` (exit 3) with advice."""
    from report_builder.site.site_state import check as check_state, site_state

    checks(cfg, site=site)
    out = Path(cfg.out_dir)
    c = None
    if not cache:
        Cache.existing(cfg.cache_dir)  # read from (render), not created: refused when it is not the tool's
    if cache:
        c = Cache(cfg.cache_dir)
        guard.check_writable(c.base, "the cache directory", guard.cache_option(c.base))
        c.sweep()
        sweep_user_cache()
    if site:
        guard.check_writable(Path(os.path.abspath(out)).parent, "the output's parent directory", option("out_dir"))
        state = site_state(out, Path(cfg.cache_dir))
        check_state(state)  # no link or special file in it: nothing below is written through one
        if not state.in_out:
            state.ensure()  # no link on the way from the cache (refused, never written through)
            guard.check_writable(state.root, "the output's state folder in the cache",
                                option("cache_dir"))
        guard.check_site_lock(out, state.lock_file)
        # the temporary files of its records (manifest, build record, the render key)
        guard.sweep([state.root] if state.in_out else [state.root.parent, state.root], legacy_age_s=None)
    return c


def sweep_user_cache() -> list[Path]:
    """Remove what dead processes of this machine left in the user cache (`guard.user_cache_dir`): the
    ``.<name>.tmp-<pid>@<host>-…`` folders and files of its top level (memos) and of each folder in it
    (converted models, evaluation sets, frequency tables, the Vega bundle, `reproduce`'s cache); a name
    without the pid and host is never judged."""
    root = guard.user_cache_dir()
    if not root.is_dir() or root.is_symlink():
        return []
    return guard.sweep([root, *(d for d in sorted(root.iterdir()) if d.is_dir() and not d.is_symlink())],
                       legacy_age_s=None)


OWN_FILES = ("last_build.json", "summary_lines.json")
"""Files the tool writes at the top of a results cache (`last_build`, `site.summary`)."""


def clean(cfg: Config, *, all: bool = False, versions_older_than: str | None = None,  # noqa: A002
          log=None) -> str:
    """Remove what the tool wrote, and only that: the results cache's entries (`Cache.clean`), the
    outputs' state folders in it (figure renders, build records: `site_state.clean`), its records, and
    the site — a directory carrying the site marker. Creates nothing: a missing cache stays missing
    and no lock file is left. The line says what was removed and what was left (not provably the tool's).

    The site's published figure versions and its history stay (`citations.site_clean.clean_site`: a
    damaged versions index keeps every version folder) unless ``versions_older_than`` (``30d`` or a date)
    removes those created before it but the current ones (``all``: every version, and the site folder
    with them); each one removed is named.

    ``all`` also removes the converted models, the cached evaluation sets and `reproduce`'s default
    cache (``<user cache>/reproduce``, when it carries the cache marker) in the user cache, and stale
    temporary folders.
    Raises `guard.UnsafeOutput` (nothing removed) when the site or cache directory holds foreign files,
    when ``--out`` or the cache's ``results`` is a symbolic link, or when the two nest.
    """
    import shutil

    from report_builder.site import site_state
    from report_builder.citations.site_clean import clean_site, parse_age

    try:
        cutoff = parse_age(versions_older_than) if versions_older_than is not None else None
    except ValueError as e:
        raise UsageError(str(e)) from None

    out, cache_dir = Path(cfg.out_dir), Path(cfg.cache_dir)
    guard.check_no_symlink(out, "the output directory")
    site_marker.check_replaceable(out, "the output directory", option("out_dir"), "clean")
    guard.check_not_nested(out, cache_dir)
    cache = Cache.existing(cache_dir)  # refuses a foreign directory, creates nothing
    repro = _reproduce_cache(cache_dir) if all else None
    for c in (cache, repro):  # every link is refused before anything is removed
        if c is not None:
            guard.check_no_symlink(c.root, "the results folder")
            guard.check_no_symlink(c.base / site_state.SITE_DIR, "the site state folder")
            guard.check_no_symlink(c.reproduced, "the reproduced figures folder")
    done, left = [], []
    if cache is None:
        done.append(f"nothing from the cache (no cache at {cache_dir})")
    else:
        with using(cache_dir, "clean", exclusive=True, create=False):  # no build of it runs meanwhile
            _clean_cache(cache, done, left)
    lock_file = site_state.site_state(out, cache_dir).lock_file
    restore_swapped(out, lock_file)  # a build killed mid-swap: its site (and versions) back, not swept
    if out.exists():
        with guard.site_lock(out, lock_file):
            site_marker.check_replaceable(out, "the output directory", option("out_dir"), "clean")
            kept, gone = clean_site(out, cutoff, current_too=str(versions_older_than).strip() == "all",
                                    log=log or _warn)
        done.append(f"the site {out}/" + (f" (kept its {kept} published figure versions and the history)"
                                          if kept else "") + (f", {len(gone)} figure versions ({', '.join(gone)})"
                                                              if gone else ""))
    swept = guard.sweep([Path(os.path.abspath(out)).parent], guard.site_temp_prefixes(out), legacy_age_s=None)
    if all:
        from report_builder.models.convert import models_dir
        from report_builder.models.embedded import CACHE_PREFIXES

        models = models_dir()
        k = 0
        if models.is_dir():
            for d in models.iterdir():
                if not (d.is_dir() and not d.is_symlink() and d.name.startswith(CACHE_PREFIXES)):
                    continue
                if not _converted_copy(d):  # `smollm2-my-finetune/`: named like ours, not ours
                    left.append(d)
                    continue
                with guard.removing_locked(d):
                    shutil.rmtree(d, ignore_errors=True)
                k += 1
        swept += guard.sweep([models])
        if models.is_dir():  # lock files of models that are gone
            from report_builder.cache import _is_lock_file

            for f in models.iterdir():
                if _is_lock_file(f) and not (models / f.name[1:-5]).exists():
                    f.unlink()
        done.append(f"{k} converted models from {models}")
        from report_builder.models import fetch

        done.append(f"{fetch.clean()} fetched model wheels")
        from report_builder.data import setcache

        done.append(f"{setcache.clean()} cached evaluation sets")
        d = guard.user_cache_dir() / REPRODUCE_CACHE
        if repro is not None:
            with using(repro.base, "clean", exclusive=True, create=False):
                _clean_cache(repro, sub := [], left)
            done.append(f"from reproduce's cache {d}: " + ", ".join(sub))
        elif d.exists() and os.path.abspath(d) != os.path.abspath(cache_dir):
            left.append(d)  # not the tool's cache (no marker): named, never touched
    if swept:
        done.append(f"{len(swept)} stale temporary folders")
    msg = "removed " + ", ".join(done)
    if left:
        shown = ", ".join(str(p) for p in left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        msg += f"; left {len(left)} it cannot prove it wrote: {shown}"
    return msg


def _converted_copy(d: Path) -> bool:
    """Whether ``d`` (in ``<user cache>/models/``) is a converted copy the tool made: it carries the model
    marker, or (a copy from before the marker) its name is exactly a prefix and a 16-hex fingerprint."""
    import re

    from report_builder.models.embedded import CACHE_PREFIXES

    return (d / guard.MODEL_MARKER).is_file() or any(
        re.fullmatch(re.escape(p) + "[0-9a-f]{16}", d.name) for p in CACHE_PREFIXES)


def _clean_cache(cache: Cache, done: list[str], left: list[Path]) -> None:
    """Empty the results cache ``cache`` of what the tool wrote (entries, the outputs' state folders,
    `reproduce`'s figures, its records) and remove it when only its marker is left; appends to ``done``
    what was removed and to ``left`` what it cannot prove it wrote."""
    from report_builder.site import site_state

    cache_dir = cache.base
    n, rest = cache.clean()
    done.append(f"{n} cache entries from {cache.root}")
    left += rest
    states, rest = site_state.clean(cache_dir)
    left += rest
    if states:
        done.append(f"the figure renders and build records of {len(states)} output(s) from "
                    f"{cache_dir / site_state.SITE_DIR}")
    n, rest = cache.clean_reproduced()
    left += rest
    if n:
        done.append(f"{n} reproduced figures from {cache.reproduced}")
    from report_builder.last_build import INPUTS, clean_inputs

    kept, rest = clean_inputs(cache_dir)  # the data copies a build kept (`last_build`)
    left += rest
    if kept:
        done.append(f"{kept} kept data files from {cache_dir / INPUTS}")
    for name in OWN_FILES:
        f = cache_dir / name
        if f.is_file() and not f.is_symlink():
            f.unlink()
            done.append(str(f))
    if remove_if_empty(cache_dir):  # nothing else: the cache goes too, its marker last
        done.append(f"the empty cache {cache_dir}/")
    else:
        left += [c for c in sorted(cache_dir.iterdir()) if c.name != guard.CACHE_MARKER and c not in
                 (cache.root, cache_dir / site_state.SITE_DIR, cache.reproduced, cache_dir / INPUTS)]


def _warn(line: str) -> None:
    import logging

    logging.getLogger("report_builder").warning(line.removeprefix("warning: "))


REPRODUCE_CACHE = "reproduce"
"""`report-builder reproduce`'s default results cache, under the user cache (`guard.user_cache_dir`)."""


def _reproduce_cache(cache_dir: Path) -> Cache | None:
    """`reproduce`'s default cache when it is the tool's (carries the cache marker) and not ``cache_dir``."""
    d = guard.user_cache_dir() / REPRODUCE_CACHE
    if os.path.abspath(d) == os.path.abspath(cache_dir) or d.is_symlink() or not guard.is_cache(d):
        return None
    return Cache(d, create=False)
