"""The public front: configure(), build(), analyze(), render(), plan(), check(), bench(), serve(), list_*(), clean().

A thin front that delegates: ``analyze`` plans (`analyses.planning`), runs the plan with an executor
(`executors`) and assembles the tables; ``render`` turns tables into the site (no torch); ``build``
does both (and is ``rb.build``). The thread policy lives in `config`, the checks before any work and
``clean`` in `housekeeping`, provenance in `provenance`, the last-build record in `last_build`, the
log's headline lines in `site.summary`. Pitfall: torch-using modules are imported inside functions,
never at module level; no lower stage imports this module.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from report_builder import caches, last_build
from report_builder.cache import Cache
from report_builder.cache_lock import using
from report_builder.config import Config, as_config, choose_threads  # noqa: F401 - api.choose_threads
from report_builder.extras import require
from report_builder.housekeeping import check_ids, checks, clean, preflight
from report_builder.last_build import tables_from_cache
from report_builder.models.quiet import no_widget_warning
from report_builder.listing import list_datasets, list_figures, list_models  # noqa: F401 - `list` answers
from report_builder.provenance import placements  # noqa: F401 - api.placements
from report_builder.citations.reproduce import diff, format_diff, reproduce  # noqa: F401 - api.diff, api.reproduce
from report_builder.citations.citing import cite  # noqa: F401 - api.cite (`report-builder cite`)
from report_builder.schema import ERROR_BOUND
from report_builder.site.configured import render_configured, roles_of  # noqa: F401 - api.roles_of
from report_builder.site.summary import summary_lines, summary_memo

__all__ = ["AnalyzeReport", "Config", "ERROR_BOUND", "analyze", "bench", "build", "check", "clean", "configure",
           "executor", "format_bench", "format_plan", "list_datasets", "list_figures", "list_models", "plan", "render",
           "serve", "summary_lines", "tables_from_cache"]


@dataclass(repr=False)
class AnalyzeReport:
    """What `analyze` produced: tables, provenance, which entries were reused or computed."""

    tables: dict[str, pd.DataFrame]
    provenance: dict[str, Any]
    reused: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)
    entries: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    table_hashes: dict[str, str] = field(default_factory=dict)  # `cache.frame_hash` of each table
    __repr__ = lambda self: f"<AnalyzeReport: {len(self.computed)} computed, {len(self.reused)} reused>"  # noqa: E731


def configure(path: str | None = None, *, preset: str | None = None, models=(), **changes) -> Config:
    """The build configuration: a YAML file or a preset (``default``), with ``changes`` applied.

    ``models`` (CLI ``--model``): ``NAME=SOURCE`` items swap a configured model's source and keep its name,
    role and figures; bare ``SOURCE`` items replace the configured models (a report of only those, each the
    primary encoder or primary causal model by its adapter's causality; later ones variants).
    """
    from report_builder import config as C

    cfg = C.load_config(path, preset=preset) if path else C.load_config(preset=preset or "default")
    if changes:
        cfg = C.replace(cfg, **changes)
    if models:
        from report_builder.models.loading import adapter_of

        from report_builder.overrides import with_model_items

        cfg = with_model_items(cfg, list(models), lambda src: adapter_of(src).causal)
    return check_ids(cfg)


def with_overrides(cfg: Config, items: list[str]) -> Config:
    """``cfg`` with ``--set KEY=VALUE`` items applied (dotted keys, list indexes) and validated again."""
    from report_builder.overrides import with_assignments

    return check_ids(with_assignments(cfg, list(items)))


def environment(cfg: Config | None = None) -> dict[str, Any]:
    """Versions, the torch device, the embedded models and the cache locations and sizes (`report-builder env`)."""
    from report_builder import envinfo

    return envinfo.collect(cache_dir=cfg.cache_dir if cfg else None, out_dir=cfg.out_dir if cfg else None)


def format_environment(info: dict[str, Any]) -> str:
    """The text form of `environment`'s result."""
    from report_builder import envinfo

    return envinfo.format_env(info)


def analyze(cfg: Config, *, log: Callable[[str], Any] = print, progress: bool = True,
            executor: Any = None) -> AnalyzeReport:
    """Run (or reuse from the cache) every analysis the configuration needs: plan, execute, assemble.

    Args:
        executor: an `executors.Executor` (default: `LocalExecutor` over ``cfg.cache_dir``;
            `executor("ray")` runs the tasks on a Ray cluster).
    Returns:
        The concatenated result tables, the build provenance and what was computed or reused.
    """
    from report_builder.analyses import assemble, inputs, planning
    from report_builder.executors.local import LocalExecutor
    from report_builder.executors.progress import overall
    from report_builder.provenance import build_provenance

    t_start = time.perf_counter()
    checks(cfg, site=False)
    with using(cfg.cache_dir, "analyze"):  # shared with other builds; `clean` waits (or they do)
        cache = preflight(cfg, site=False)
        caches.warn_legacy(cfg.cache_dir)  # an earlier version's ./.cache/report_builder is not read: said once
        executor = executor or LocalExecutor(cache, log=log, progress=progress)
        if isinstance(executor, LocalExecutor):  # (a distributed executor sets up its workers' CPU engine itself)
            executor.prepare(cfg)
        plan = planning.plan(cfg, cache)
        with overall(plan, cache, enabled=progress, log=log) as line:  # one line: tasks, elapsed, ETA
            results = list(line.track(inputs.say_cuts(executor.execute(plan))))  # reused: cuts said too
        final = planning.final_results(results)  # shards' partial tables are not tables of the build
        rep = AnalyzeReport(tables=assemble.concat_tables((r.entry.tables for r in final), cfg, plan.sets),
                            provenance=build_provenance(cfg, *assemble.provenance(plan, final)),
                            reused=[r.task.label for r in results if r.reused],
                            computed=[r.task.label for r in results if not r.reused],
                            entries=[(r.task.analysis, r.entry.meta["key"]) for r in final],
                            seconds=time.perf_counter() - t_start)
        for line in cache.log:
            log(line)
        rep.table_hashes = last_build.save(cfg, rep.entries, rep.provenance, rep.tables)
        caches.remember(cfg.cache_dir)  # so that `render` elsewhere can name it
    return rep


def plan(cfg: Config, *, gpu: str | None = None, gpu_flops: float | None = None, gpus: int = 1) -> dict[str, Any]:
    """The tasks a build of ``cfg`` runs, in run order, what each costs, and whether it is cached.

    Loads the evaluation sets, hashes the weights (memoised), reads each model's config and tokenizer;
    loads no weights, computes only a short calibration matmul (`costs`), writes nothing to the cache. Runs
    before anything is downloaded: what is not here is sized from recorded facts and flagged
    (`costs.sizing`; each task's ``estimated``).

    Args:
        gpu, gpu_flops: price a GPU that is not here: a name in `costs.GPUS`, or a matmul's TFLOP/s.
        gpus: also answer "how long on N GPUs" (tasks balanced greedily, never split).
    Returns:
        `costs.estimate`'s dict: ``tasks`` (one row per task: ``analysis``, ``model``, ``dataset``,
        ``shard``, ``reduces``, ``sequences``, ``tokens``, ``cached``, ``key``, ``flops``, ``seconds``,
        ``peak_bytes``, ``disk_bytes``, ...), ``totals``, ``device``, ``gpus``, ``notes``.
    """
    from report_builder import costs

    check_ids(cfg)
    cache = Cache.existing(cfg.cache_dir)  # read-only: creates, marks and locks nothing
    return costs.plan_costs(cfg, cache, gpu=gpu, gpu_flops=gpu_flops, gpus=gpus)


def format_plan(est: dict[str, Any]) -> str:
    """The text form of `plan`'s result: one table, a total line, the 1/N-GPU answer."""
    from report_builder import costs

    return costs.format_plan(est)


def render(config: Any = None, tables: dict[str, pd.DataFrame] | None = None, provenance: dict | None = None,
           *, log: Callable[[str], Any] | None = print, **overrides: Any):
    """Render the site from result tables (default: the last build's, read from the cache alone, from any
    directory: no torch, no data files) and return the ``RenderReport`` (what the site holds).

    Args:
        config: None (default): the configuration the cache's last build recorded. Or a ``Config``, a
            preset name, a YAML file or a mapping (as for `build`), which must agree with that record on
            every key that changes results (`last_build.RESULT_KEYS`; `ConfigError` names the keys that
            differ). **overrides: top-level keys, e.g. ``cache_dir=``, ``out_dir=``, ``site_url=``.
        log: Where messages go (``None``: silent).
    """
    log, cfg = log or (lambda *_: None), (as_config(config or "default", **overrides) if tables is not None
                                          else last_build.render_config(config, **overrides))
    with using(cfg.cache_dir, "render", create=False):  # it writes the output's state into the cache
        preflight(cfg, cache=False)
        if tables is None:
            tables, provenance = tables_from_cache(cfg)
        return render_configured(cfg, tables, provenance, log=log)


def executor(name: str | None = None, *, log: Callable[[str], Any] = print, progress: bool = True, **options: Any):
    """The executor ``name`` names for `analyze`/`build` (`executors.create`): None for ``local`` (the
    default in-process one), a `RayExecutor` for ``ray`` (``address``: the cluster to join, e.g. ``auto``;
    ``num_cpus``: CPUs of a local Ray). Raises `MissingDependency` when Ray is not installed."""
    from report_builder.executors import DEFAULT, create

    return create(name or DEFAULT, log=log, progress=progress, **options)


def build(config: Any = "default", *, log: Callable[[str], Any] | None = print, progress: bool = True,
          out: Callable[[str], Any] | None = None, executor: Any = None, **overrides: Any):
    """Run the analyses (cached) and render the site, as ``report-builder build`` does (also ``rb.build``).

    Logs what was reused/computed, the headline numbers to ``out`` (default ``log``; the CLI: stdout).

    Args:
        config: A ``Config``, a preset name (``"default"``, ``"smoke"``, ``"paper"``), a YAML file or a
            mapping as in the YAML file. **overrides: top-level configuration keys to replace, e.g.
            ``out_dir="my-site"``, ``cache_dir=...``, ``device="cuda"``.
        log: Where build messages go (``None``: silent). progress: progress bars (model loads' too). executor: `executor`.
    Returns:
        ``(AnalyzeReport, RenderReport)``: the result tables and provenance, and what the site holds.
    """
    cfg, log = as_config(config, **overrides), log or (lambda *_: None)
    out, t0 = out or log, time.perf_counter()
    checks(cfg)
    with using(cfg.cache_dir, "build"), no_widget_warning():  # the lock: from the checks to the site swap
        preflight(cfg)  # output and cache checked before any analysis runs
        rep = analyze(cfg, log=log, progress=progress, executor=executor)
        out(f"analyses: {len(rep.computed)} computed, {len(rep.reused)} reused ({rep.seconds:.1f}s)")
        for line in summary_memo(cfg, rep.tables, rep.table_hashes):
            out(line)
        site = render(cfg, rep.tables, rep.provenance, log=log)
    log(f"build finished in {time.perf_counter() - t0:.1f}s -> {cfg.out_dir}/")
    return rep, site


def check(source: str, texts: list[str] | None = None, *, device: str = "cpu", **kw) -> list[dict]:
    """Decompose a few sentences: the max relative error per layer (from 1) and check point (`check_model`)."""
    require("torch", "transformers", purpose="`check`")
    from report_builder.engine import check_model

    return check_model(source, texts, device=device, **kw)


def bench(**kwargs) -> dict:
    """Side-by-side speed and memory benchmark (`report_builder.bench.run_bench`'s arguments)."""
    from report_builder.bench import run_bench

    return run_bench(**kwargs)


def format_bench(result: dict) -> str:
    """A fixed-width text report of a `bench` result."""
    from report_builder.bench import format_bench as fmt

    return fmt(result)


def serve(site_dir: str | Path = "site", port: int = 8000, *, host: str = "127.0.0.1") -> None:
    """Preview a built site over HTTP on ``host:port`` (default 127.0.0.1:8000; blocks until interrupted)."""
    from report_builder.site.serve import serve as _serve

    _serve(Path(site_dir), port, host=host)
