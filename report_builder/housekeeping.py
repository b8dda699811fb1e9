"""Before and after a build: the checks the front runs before any work, and ``report-builder clean``.

`check_ids` checks the configured dataset and figure ids against their registries (`config.validate`
checks every other value; the registries sit above the configuration, so the ids are checked here).
`preflight` checks that the cache and the output can be written without touching foreign files and
sweeps temporary folders of dead processes. `clean` removes what the tool made, and only that.

Pitfall: nothing here may remove or overwrite a directory that lacks the tool's marker (`guard`): a
misconfigured ``--out`` or ``--cache`` must fail with advice, never delete someone's files.
"""
from __future__ import annotations

from pathlib import Path

from report_builder import guard
from report_builder.cache import Cache
from report_builder.config import Config
from report_builder.errors import ConfigError, shown


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


def preflight(cfg: Config, *, cache: bool = True, site: bool = True) -> Cache | None:
    """Check, before any work, the configured ids (`check_ids`) and that the cache and the output can
    be written without touching foreign files; sweep temp dirs left by dead processes. Raises
    `guard.UnsafeOutput` with advice."""
    check_ids(cfg)
    c = None
    if cache:
        c = Cache(cfg.cache_dir)
        guard.check_writable(c.base, "the cache directory", "--cache")
        c.sweep()
        guard.sweep([guard.user_cache_dir() / "models"], legacy_age_s=None)
    if site:
        out = Path(cfg.out_dir)
        guard.check_replaceable(out, guard.SITE_MARKER, "the output directory", "--out")
        guard.check_writable(out.resolve().parent, "the output's parent directory", "--out")
    return c


def clean(cfg: Config, *, all: bool = False) -> str:  # noqa: A002
    """Remove the results cache and the site — only what carries the tool's marker — and what the
    site's builds keep beside it (figure renders, the build record: `site.figure_cache.clean`).

    ``all`` also removes the converted models and the cached evaluation sets in the user cache and
    stale temporary folders.
    Raises `guard.UnsafeOutput` (nothing removed) when the site or cache directory holds foreign files.
    """
    import shutil

    out = Path(cfg.out_dir)
    guard.check_replaceable(out, guard.SITE_MARKER, "the output directory", "--out")
    cache = Cache(cfg.cache_dir)  # refuses a foreign directory
    n = cache.clean()
    done = [f"{n} cache entries"]
    if out.exists():
        with guard.lock_for(out):
            shutil.rmtree(out)
        done.append(f"{cfg.out_dir}/")
    from report_builder.site import figure_cache

    renders = figure_cache.clean(out)
    if renders:
        done.append(f"{renders} figure renders and build records")
    swept = guard.sweep([out.resolve().parent], guard.site_temp_prefixes(out), legacy_age_s=None)
    if all:
        from report_builder.models.convert import models_dir
        from report_builder.models.embedded import CACHE_PREFIXES

        models = models_dir()
        k = 0
        if models.is_dir():
            for d in models.iterdir():
                if d.is_dir() and d.name.startswith(CACHE_PREFIXES):
                    with guard.lock_for(d):
                        shutil.rmtree(d, ignore_errors=True)
                    k += 1
        swept += guard.sweep([models])
        done.append(f"{k} converted models")
        from report_builder.data import setcache

        done.append(f"{setcache.clean()} cached evaluation sets")
    if swept:
        done.append(f"{len(swept)} stale temporary folders")
    return "removed " + ", ".join(done)
