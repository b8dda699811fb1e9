"""The public surface: configure(), build(), analyze(), render(), check(), bench(), serve(), list_*(), clean().

``analyze`` runs the analyses (loading a model only when one of its results is not cached);
``render`` turns result tables into the site and needs no torch; ``build`` does both. Each build
records what it used in ``<cache>/last_build.json`` so ``render`` can rebuild the site from the
cache alone. Pitfall: torch-using modules are imported inside functions, never at module level.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from report_builder import __version__, guard
from report_builder.cache import Cache, frame_hash
from report_builder.config import Config
from report_builder.schema import ERROR_BOUND

__all__ = ["AnalyzeReport", "Config", "ERROR_BOUND", "analyze", "bench", "build", "check", "clean", "configure",
           "executor", "format_bench", "format_plan", "list_datasets", "list_figures", "list_models", "plan", "render",
           "serve", "summary_lines", "tables_from_cache"]

@dataclass
class AnalyzeReport:
    """What `analyze` produced: tables, provenance, which entries were reused or computed."""

    tables: dict[str, pd.DataFrame]
    provenance: dict[str, Any]
    reused: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)
    entries: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    table_hashes: dict[str, str] = field(default_factory=dict)  # `cache.frame_hash` of each table


def _git_commit() -> str:
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def configure(path: str | None = None, *, preset: str | None = None, models=(), **changes) -> Config:
    """The build configuration: a YAML file or a preset (``default``), with ``changes`` applied.

    ``models`` (CLI ``--model``) replaces the configured models; each becomes the primary encoder or
    primary causal model by its adapter's causality (later ones of the same kind are variants).
    """
    from report_builder import config as C

    cfg = C.load_config(path, preset=preset) if path else C.load_config(preset=preset or "default")
    if changes:
        cfg = C.replace(cfg, **changes)
    if models:
        from report_builder.models.loading import adapter_of

        roles, seen = [], set()
        for src in models:
            kind = "primary_causal" if adapter_of(src).causal else "primary_encoder"
            roles.append(kind if kind not in seen else "variant")
            seen.add(kind)
        cfg = C.with_models(cfg, list(models), roles)
    return cfg


def with_overrides(cfg: Config, items: list[str]) -> Config:
    """``cfg`` with ``--set KEY=VALUE`` items applied (dotted keys, list indexes) and validated again."""
    from report_builder.overrides import with_assignments

    return with_assignments(cfg, list(items))


def environment(cfg: Config | None = None) -> dict[str, Any]:
    """Versions, the torch device, the embedded models and the cache locations and sizes (`report-builder env`)."""
    from report_builder import envinfo

    return envinfo.collect(cache_dir=cfg.cache_dir if cfg else None, out_dir=cfg.out_dir if cfg else None)


def format_environment(info: dict[str, Any]) -> str:
    """The text form of `environment`'s result."""
    from report_builder import envinfo

    return envinfo.format_env(info)


def roles_of(cfg: Config):
    """`Roles` for the figures from the configured model roles and dataset order."""
    from report_builder.figures.spec import Roles

    by = lambda r: tuple(m.name for m in cfg.models if m.role == r)  # noqa: E731
    pe, pc = by("primary_encoder"), by("primary_causal")
    return Roles(primary_encoder=pe[0] if pe else None, primary_causal=pc[0] if pc else None,
                 encoders=tuple(m.name for m in cfg.models if m.role != "seed_group") + by("seed_group"),
                 variants=tuple(m.name for m in cfg.models if m.role == "variant" or m.role == "primary_causal"),
                 seed_group=by("seed_group"), datasets=tuple(d.id for d in cfg.datasets), preset=cfg.preset)


def choose_threads(requested: int | None) -> int:
    """CPU worker threads for a build (`engine.set_cpu_workers`): as configured, else all cores on an idle machine and one
    thread when other work keeps the cores busy (OpenMP barriers then stall each small op for a
    scheduler slice: measured 10x slower on 2 busy cores)."""
    cores = os.cpu_count() or 1
    if requested:
        return max(1, int(requested))
    try:
        busy = os.getloadavg()[0] >= max(1.0, cores - 0.5)
    except OSError:
        busy = False
    return 1 if busy else cores


def preflight(cfg: Config, *, cache: bool = True, site: bool = True) -> Cache | None:
    """Check, before any work, that the cache and the output can be written without touching
    foreign files; sweep temp dirs left by dead processes. Raises `guard.UnsafeOutput` with advice."""
    c = None
    if cache:
        c = Cache(cfg.cache_dir)
        guard.check_writable(c.base, "the cache directory", "--cache")
        c.sweep()
        from report_builder.guard import user_cache_dir

        guard.sweep([user_cache_dir() / "models"], legacy_age_s=None)
    if site:
        out = Path(cfg.out_dir)
        guard.check_replaceable(out, guard.SITE_MARKER, "the output directory", "--out")
        guard.check_writable(out.resolve().parent, "the output's parent directory", "--out")
    return c


def analyze(cfg: Config, *, log: Callable[[str], Any] = print, progress: bool = True,
            executor: Any = None) -> AnalyzeReport:
    """Run (or reuse from the cache) every analysis the configuration needs: plan, execute, assemble.

    Args:
        executor: an `analyses.runner.Executor` (default: `LocalExecutor` over ``cfg.cache_dir``;
            `executor("ray")` runs the tasks on a Ray cluster).
    Returns:
        The concatenated result tables, the build provenance and what was computed or reused.
    """
    cache = preflight(cfg, site=False)
    from report_builder.analyses import assemble, runner

    t_start = time.perf_counter()
    executor = executor or runner.LocalExecutor(cache, log=log, progress=progress)
    if cfg.device == "cpu" and isinstance(executor, runner.LocalExecutor) and executor.before_load is None:
        # (a distributed executor sets up its workers' CPU engine itself)
        # results do not depend on this number: torch runs single-threaded, sequences in parallel.
        # Set right before the first model load, so a build from the cache never imports torch.
        def cpu_engine() -> None:
            from report_builder.engine import set_cpu_workers

            log(f"CPU worker threads: {set_cpu_workers(choose_threads(cfg.threads))} "
                "(torch intra-op threads 1: results identical for any count)")

        executor.before_load = cpu_engine
    plan = runner.plan(cfg, cache)
    results = list(executor.execute(plan))
    final = runner.final_results(results)  # shards' partial tables are not tables of the build
    rep = AnalyzeReport(tables=assemble.concat_tables((r.entry.tables for r in final), cfg, plan.sets),
                        provenance=_provenance(cfg, *assemble.provenance(plan, final)),
                        reused=[r.task.label for r in results if r.reused],
                        computed=[r.task.label for r in results if not r.reused],
                        entries=[(r.task.analysis, r.entry.meta["key"]) for r in final],
                        seconds=time.perf_counter() - t_start)
    for line in cache.log:
        log(line)
    _save_last_build(cfg, rep)
    return rep


def plan(cfg: Config, *, gpu: str | None = None, gpu_flops: float | None = None, gpus: int = 1) -> dict[str, Any]:
    """The tasks a build of ``cfg`` runs, in run order, what each costs, and whether it is cached.

    Loads the evaluation sets, hashes the weights (memoised) and reads each model's config and
    tokenizer; loads no weights and computes nothing but a short calibration matmul (`costs`).

    Args:
        gpu, gpu_flops: price a GPU that is not here: a name in `costs.GPUS`, or a matmul's TFLOP/s.
        gpus: also answer "how long on N GPUs" (tasks balanced greedily, never split).
    Returns:
        `costs.estimate`'s dict: ``tasks`` (one row per task: ``analysis``, ``model``, ``dataset``
        (``None`` for weights-only analyses), ``shard`` (``[lo, hi)`` of a shard task, else None),
        ``reduces`` (how many shards a reduce task reduces, else 0), ``sequences``, ``tokens``,
        ``cached``, ``key``, ``flops``, ``seconds``, ``peak_bytes``, ``disk_bytes``, ...), ``totals``,
        ``device``, ``gpus``, ``notes``.
    """
    from report_builder import costs
    from report_builder.analyses import runner

    cache = Cache(cfg.cache_dir) if Path(cfg.cache_dir).is_dir() else None
    p = runner.plan(cfg, cache)
    return costs.estimate(p, cache, gpu=gpu, gpu_flops=gpu_flops, gpus=gpus)


def format_plan(est: dict[str, Any]) -> str:
    """The text form of `plan`'s result: one table, a total line, the 1/N-GPU answer."""
    from report_builder import costs

    return costs.format_plan(est)


def placements(cfg: Config, *, strict: bool = True) -> dict[str, dict[str, Any]]:
    """Where a build of ``cfg`` puts each model's layers with its ``device_map`` (empty without one):
    model name -> `Placement.to_dict` (mode, main device, ``layers`` as one line, the module map).

    Computed from each model's config on weightless copies (no weight is read), as the build's loader
    does. ``strict=False``: a model whose map cannot be made here (no GPU) is left out instead of raising.
    """
    if cfg.device_map == "none":
        return {}
    from report_builder.errors import ReportBuilderError
    from report_builder.models import device_plan

    out = {}
    for mc in cfg.models:
        try:
            p = device_plan.planned_placement(mc.source, cfg, mc.revision)
        except (ReportBuilderError, OSError, ValueError):
            if strict:
                raise
            continue
        if p is not None:
            out[mc.name] = p.to_dict()
    return out


def _provenance(cfg: Config, models: dict, datasets: dict) -> dict[str, Any]:
    """What a build used: versions, machine, date, configuration, models, datasets, parameters.

    Local paths (model sources, data files) never reach the site: `guard` publishes them by name.
    Library versions are read without importing transformers (a build from the cache never loads it)."""
    from report_builder.analyses.k24_scopes import ig_options

    cuda = str(cfg.device).startswith("cuda")
    if cuda:
        import torch
    return {
        "report_builder_version": __version__, "git_commit": _git_commit(),
        "torch_version": _lib_version("torch"), "transformers_version": _lib_version("transformers"),
        "python_version": platform.python_version(), "device": cfg.device, "dtype": cfg.dtype,
        "tf32": bool(cuda and torch.backends.cuda.matmul.allow_tf32),
        "device_map": {m: p["layers"] for m, p in placements(cfg, strict=False).items()},
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "preset": cfg.preset,
        "config": guard.public_config(cfg.to_dict()),
        "models": {m: {**p, "source": guard.public_path(p["source"])} for m, p in models.items()},
        "datasets": datasets,
        "params": {"ig": ig_options(cfg).describe(), "mask_rate": cfg.k21.mask_rate, "seed": cfg.k21.seed,
                   "top_k": cfg.k24.top_k, "include_special": cfg.k24.include_special,
                   "ffamp_normalise": cfg.k24.ffamp_normalise, "max_memory": cfg.max_memory},
    }


def _lib_version(name: str) -> str:
    """``name.__version__`` when it is imported, else its installed distribution's version."""
    import sys
    from importlib import metadata

    mod = sys.modules.get(name)
    return str(mod.__version__) if mod is not None else metadata.version(name)


def _save_last_build(cfg: Config, rep: AnalyzeReport) -> None:
    p = Path(cfg.cache_dir) / "last_build.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(f".tmp{os.getpid()}")
    rep.table_hashes = {k: frame_hash(v) for k, v in rep.tables.items()}
    tmp.write_text(json.dumps({"entries": rep.entries, "provenance": rep.provenance,
                               "table_hashes": rep.table_hashes}, default=str))
    os.replace(tmp, p)


def tables_from_cache(cfg: Config) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """The tables and provenance of the last build, read from the cache only (no torch needed)."""
    p = Path(cfg.cache_dir) / "last_build.json"
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


def render(cfg: Config, tables: dict[str, pd.DataFrame] | None = None, provenance: dict | None = None, *,
           log: Callable[[str], Any] = print):
    """Render the site from tables (default: the last build's, read from the cache)."""
    from report_builder.figures.reported import load_reported
    from report_builder.site.build import render_site

    import yaml

    preflight(cfg, cache=False)
    if tables is None:
        tables, provenance = tables_from_cache(cfg)
    if "models" in tables and "source" in tables["models"]:  # local paths never reach the site
        tables = {**tables, "models": tables["models"].assign(source=tables["models"]["source"].map(guard.public_path))}
    reported = load_reported()
    resolved = yaml.safe_dump(guard.public_config(cfg.to_dict()), sort_keys=False)
    figures = None
    if not isinstance(cfg.figures, str):  # the configured `figures:` ids only, in the registry's order
        from report_builder.figures.registry import all_figures

        figures = [f for f in all_figures() if f.id in set(cfg.figures)]
    return render_site(tables, roles_of(cfg), {**provenance, "reported": reported}, out_dir=Path(cfg.out_dir),
                       log=log, reported=reported, site_url=cfg.site_url, figures=figures,
                       extra_files={"config.resolved.yaml": resolved})


def summary_lines(tables: dict[str, pd.DataFrame], cfg: Config) -> list[str]:
    """The K21 and K24 headline numbers of a build, one line per model (printed in the build log);
    the numbers come from `report_builder.stats.headlines`, as on the site's pages."""
    from report_builder.stats import headlines

    lines = []
    prim = cfg.datasets[0].id
    names = [mc.name for mc in cfg.models]
    lines.append(f"K21 summary on {prim}:")
    lines.append(f"  {'model':<16} {'ATTNRESLN-N mean %':>18} {'ATTN-N mean %':>14} {'rho(freq) ATTNRESLN-N':>22} {'expansion mean':>15}")
    for s in headlines.k21_summary(tables, names, prim):
        lines.append(f"  {s.model:<16} {s.attnresln_mean:>18.2f} {s.attn_mean:>14.2f} {s.rho_freq:>22.3f} {s.expansion_mean:>15.3f}")
    ctx = tables.get("k24_ctx")
    if ctx is not None and len(ctx):
        lines.append("K24 summary (layer-mean contextualization change 1-rho, over datasets):")
        for name in names:
            c = headlines.cancellation(tables, name)
            ff, whole = (c.ff, c.whole) if c is not None else (float("nan"), float("nan"))
            lines.append(f"  {name:<16} through FF {ff:.3f}   through FF+RES+LN (whole layer from ATB) {whole:.3f}")
    return lines


def executor(name: str = "local", *, address: str | None = None, num_cpus: int | None = None,
             log: Callable[[str], Any] = print, progress: bool = True):
    """The executor ``name`` names for `analyze`/`build`: None for ``local`` (the default in-process
    `LocalExecutor`), a `distributed.RayExecutor` for ``ray`` (joining ``address``, e.g. ``auto``, or
    starting a local Ray with ``num_cpus``). Raises `MissingDependency` when Ray is not installed."""
    from report_builder.errors import UsageError

    if name == "local":
        if address is not None or num_cpus is not None:
            raise UsageError("--address and --ray-num-cpus need --executor ray")
        return None
    if name == "ray":
        from report_builder.distributed import RayExecutor

        if address is not None and num_cpus is not None:
            raise UsageError("--ray-num-cpus sizes a Ray started here; a cluster joined with --address has its own")

        return RayExecutor(address=address, num_cpus=num_cpus, log=log, progress=progress)
    raise UsageError(f"unknown executor {name!r}; choose local or ray")


def _summary_memo(cfg: Config, tables: dict[str, pd.DataFrame], hashes: dict[str, str]) -> list[str]:
    """`summary_lines`, reused from ``<cache>/summary_lines.json`` while the tables they read (recorded
    as they are computed: contents and dtypes), the models, the primary dataset and the package's
    code are unchanged (a build from the cache then needs no scipy)."""
    import hashlib

    from report_builder.site.figure_cache import ALL, ReadTracker, code_digest

    path = Path(cfg.cache_dir) / "summary_lines.json"

    def key(reads) -> str:
        names = sorted(tables) if reads == ALL else list(reads)
        parts = [code_digest(), cfg.datasets[0].id, [mc.name for mc in cfg.models], reads == ALL,
                 {n: [hashes.get(n) or (frame_hash(tables[n]) if n in tables else None),
                      [repr(t) for t in tables[n].dtypes] if n in tables else None] for n in names}]
        return hashlib.sha256(json.dumps(parts, default=repr).encode("utf-8")).hexdigest()

    try:
        memo = json.loads(path.read_text(encoding="utf-8"))
        if memo.get("key") == key(memo["reads"]) and all(isinstance(x, str) for x in memo["lines"]):
            return list(memo["lines"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    tracker = ReadTracker(tables)
    lines = summary_lines(tracker, cfg)
    reads = tracker.reads()
    tmp = path.with_name(f".{path.name}.tmp-{guard.tmp_tag()}")
    try:
        tmp.write_text(json.dumps({"key": key(reads), "reads": reads, "lines": lines}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a memo that cannot be written only costs time
        tmp.unlink(missing_ok=True)
    return lines


def build(cfg: Config, *, log: Callable[[str], Any] = print, progress: bool = True,
          out: Callable[[str], Any] | None = None, executor: Any = None):
    """analyze + render; logs what was reused/computed, and reports the headline numbers to ``out``
    (default: ``log``; the CLI sends them to stdout and the log to stderr). ``executor``: as for
    `analyze` (see `executor`)."""
    out = out or log
    t0 = time.perf_counter()
    preflight(cfg)  # output and cache checked before any analysis runs
    rep = analyze(cfg, log=log, progress=progress, executor=executor)
    out(f"analyses: {len(rep.computed)} computed, {len(rep.reused)} reused ({rep.seconds:.1f}s)")
    for line in _summary_memo(cfg, rep.tables, rep.table_hashes):
        out(line)
    site = render(cfg, rep.tables, rep.provenance, log=log)
    log(f"build finished in {time.perf_counter() - t0:.1f}s -> {cfg.out_dir}/")
    return rep, site


def check(source: str, texts: list[str] | None = None, *, device: str = "cpu", dtype: str = "float32") -> list[dict]:
    """Decompose a few sentences and return the max relative error per layer and check point."""
    from report_builder.engine import Tokens, decompose_sequences
    from report_builder.models import loading

    lm = loading.load(source, device=device, dtype=dtype)
    texts = texts or ["The man went to the store. He bought a gallon of milk.",
                      "Residual connections and layer normalisation shrink the mixing of tokens."]
    tok = lm.tokenizer
    seqs = []
    for t in texts:
        enc = tok(t)
        seqs.append(Tokens(enc["input_ids"], enc.get("token_type_ids")))
    rows: dict[tuple[int, str], float] = {}
    scopes = lm.layer_weights(0).scopes
    for _, layer, r in decompose_sequences(lm, seqs, maps=scopes, ratios=True, enforce=False):
        for s, e in r.errors.items():
            rows[(layer, s)] = max(rows.get((layer, s), 0.0), e)
    order = lm.layer_weights(0).checks
    return [dict(model=source, layer=l, scope=s, max_rel_error=rows[(l, s)])
            for l in range(lm.n_layers) for s in order if (l, s) in rows]


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
    import errno

    from report_builder.errors import UsageError
    from report_builder.site.serve import serve as _serve

    try:
        _serve(Path(site_dir), port, host=host)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is already in use (another server?); choose another with "
                             f"--port, or --port 0 for a free one") from None
        raise


def list_figures() -> list[dict]:
    from report_builder.figures.registry import all_figures

    return [dict(id=s.id, paper=s.paper, kind=s.kind, title=s.title) for s in all_figures()]


def list_models(cfg: Config) -> list[dict]:
    from report_builder.models.embedded import EMBEDDED

    rows = [dict(name=m.name, source=m.source, role=m.role) for m in cfg.models]
    rows += [dict(name=k, source=k, role="embedded default: " + e.description) for k, e in EMBEDDED.items()]
    return rows


def list_datasets() -> list[dict]:
    from report_builder.data import list_datasets as ld

    return ld()


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
