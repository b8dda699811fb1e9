"""``report-builder reproduce PATH``: verify a figure version folder, then rebuild it from its recipe and
compare (SPEC §8 "Verification verdicts").

PATH is a version folder (``figures/<id>/<hash>/``, from a site or downloaded) or its
``provenance.json`` (`citations.recipe`). The recipe names everything the figure's numbers depend on; this
module, from any directory:

0. verifies the folder's own files against the recipe that names them (`citations.verify.check_folder`:
   the recipe's seal, the folder's name, the content hash recomputed from the bytes of ``spec.json`` and
   ``data.csv``, every file's SHA-256 the recipe records): a forged or damaged folder stops here,
   ``altered`` (its own exit code), before anything is computed;
1. the models the figure used, by source, each checked against its recorded weights fingerprint
   (``--model NAME=SOURCE`` points at a copy elsewhere, e.g. a local folder of the original build);
   the datasets it used (and the first configured one, which the K24 examples come from), each
   checked against its recorded hash (``--data ID=PATH`` for a user's own file);
2. only the analyses whose tables the figure reads (and ``architecture``, whose ``models`` table
   decides layouts), on those models and datasets, with every recorded parameter, into ``--cache``
   (default ``<user cache>/reproduce``);
3. the figure drawn from those tables with the recorded roles, token display judgement and inline
   limit into ``<cache>/reproduced/<id>-<rebuilt hash>/`` (a name derived here, never read from the
   recipe) and compared with the folder (`verify.compare`): ``identical`` (the same content hash);
   ``within`` (other bytes, equal within the published precision's tolerance: another device, dtype,
   chunk rule or library version moves the last bits; the line names what differs and the largest
   difference); ``different`` (what differs and where).

A difference is explained by comparing the recipe with this run: the code (report_builder version or
commit, the figure's or an analysis' version), the libraries, the device/dtype/TF32/chunk rule — else
it is "unexplained". A model that is not here, other weights at the recorded source, or other data
stop before anything is computed, in one line each.

Exit codes (`EXIT`): 0 identical or equal within tolerance; 6 the rebuilt figure differs; 7 the folder
or its recipe was altered (it is not the figure its recipe names); 4 a model is missing or has other
weights; 3 a dataset is missing or differs (and every usual error code of the CLI).
"""
from __future__ import annotations

import copy
import dataclasses
import errno
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from report_builder import atomic, guard
from report_builder.errors import EXIT_CODES, ConfigError, DataError, ModelError, UsageError, for_terminal, option, shown
from report_builder import precision
from report_builder.overrides import split_named
from report_builder.citations import figure_diff, readback, recipe, verify
from report_builder.citations.version_diff import diff, format_diff  # noqa: F401 - `report-builder diff` (api.diff)

EXIT = {"identical": 0, "within": 0, "different": EXIT_CODES["differs"], "altered": EXIT_CODES["altered"],
        "model": EXIT_CODES["model"], "weights": EXIT_CODES["model"], "data": EXIT_CODES["config"]}
"""Exit code of each `Reproduction.status`."""


@dataclass
class Reproduction:
    """What `reproduce` found (every field goes to ``--json``)."""

    figure: str
    recorded: str
    status: str  # identical | within | different | altered | model (not available) | weights (other weights) | data
    reproduced: str | None = None
    reasons: list[str] = field(default_factory=list)
    folder_files: list[str] = field(default_factory=list)  # the folder's files checked against the recipe
    data: dict[str, Any] | None = None  # the numeric change from the folder's data.csv (`figure_diff.data_summary`)
    parts: list[str] = field(default_factory=list)  # the files that differ beyond the precision
    tolerance: float = precision.TOLERANCE_STEPS  # steps of the rule: the recipe's (`precision.recorded_tolerance`)
    differences: list[dict[str, Any]] = field(default_factory=list)
    recipe_intact: bool | None = None
    path: str = ""
    cache: str = ""
    files: str | None = None
    device: str | None = None
    models: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, Any] = field(default_factory=dict)
    analyses: list[str] = field(default_factory=list)
    drawings: list[str] = field(default_factory=list)  # the folder's drawings that are not the ones drawn here
    computed: int = 0
    reused: int = 0
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    def line(self) -> str:
        """The one-line answer: ``reproduced k21-fig3 3b9d428b72e8: identical`` or why not (values from
        the recipe with terminal control characters escaped: `errors.for_terminal`). A verdict drawn from
        analysis results the cache already held says how many (they were not recomputed: a cache handed over
        with a forged folder could hold matching forged results)."""
        p = for_terminal
        reused = (f"{self.reused} of {self.reused + self.computed} analysis results reused from the cache "
                  f"{p(self.cache)}, not recomputed: checked only against the hashes that cache records; an empty "
                  f"{option('cache_dir')} recomputes them") if self.reused else ""
        drawn = (f"the folder's {' and '.join(self.drawings)} {'is' if len(self.drawings) == 1 else 'are'} not "
                 f"the bytes drawn here from the same spec.json (in {p(self.files)}): other fonts draw other bytes, "
                 f"and so does an edited drawing; compare them") if self.drawings else ""
        if self.status == "identical":
            bare = not {"spec.json", "data.csv"} <= set(self.folder_files)
            notes = [n for n in ("the rebuild gives the recorded content hash; the folder holds no spec.json and "
                                 "data.csv, so only the recorded hash was compared" if bare else "", reused, drawn) if n]
            return f"reproduced {p(self.figure)} {p(self.recorded)}: identical" + (
                f" ({'; '.join(notes)})" if notes else "")
        if self.status == "within":
            return (f"reproduced {p(self.figure)} {p(self.recorded)}: equal within tolerance ({self.tolerance:g} "
                    f"steps of the published precision, {precision.SIGNIFICANT} significant digits; rebuilt as "
                    f"{p(self.reproduced)}" + "".join(f"; {n}" for n in (reused, drawn) if n) + "): "
                    + p("; ".join(self.reasons)))
        if self.status == "different":
            return (f"reproduced {p(self.figure)} {p(self.recorded)}: differs (rebuilt as {p(self.reproduced)}"
                    + "".join(f"; {n}" for n in (reused, drawn) if n) + "): " + p("; ".join(self.reasons)))
        if self.status == "altered":
            return f"cannot verify {p(self.figure)} {p(self.recorded)}: " + p("; ".join(self.reasons))
        return f"cannot reproduce {p(self.figure)} {p(self.recorded)}: " + p("; ".join(self.reasons))

    def to_dict(self) -> dict[str, Any]:
        return {"identical": self.status == "identical", "verified": self.status in ("identical", "within"),
                "exit_code": self.exit_code, **dataclasses.asdict(self)}


def load_recipe(path: str | Path) -> tuple[dict[str, Any], Path]:
    """(the recipe, its provenance.json path) of a version folder or provenance file, read and validated by
    `readback.read_recipe` (bounded, no link followed, every field it uses of its type, the figure id
    registered, the content hash of its form); `readback.BadRecord` (a `UsageError`) naming what is wrong."""
    rec, prov = readback.read_recipe(path)
    return rec.data, prov


def _pairs(items: list[str] | None, what: str, names: Any = ()) -> dict[str, str]:
    """``NAME=VALUE`` items as a dict; a recorded name holding ``=`` itself (a model named ``a=b``) is
    matched whole (the longest of ``names`` the item starts with), else the item splits at its first ``=``."""
    out = {}
    for item in items or []:
        name, sep, value = split_named(str(item), names)
        if not sep or not name or not value:
            raise UsageError(f"--{what} {item!r}: expected NAME=VALUE, e.g. --{what} tiny=/path/to/model")
        out[name] = value
    return out


def _config(rec: dict[str, Any], cache_dir: Path, models: dict[str, str], data: dict[str, str], device: str | None,
            chunk_rule: str | None = None):
    """The configuration that rebuilds the recipe's figure: its models and datasets only."""
    from report_builder.config import from_dict

    conf = copy.deepcopy(rec["config"])
    used_m = set(rec.get("models") or {})
    ms = [m for m in conf["models"] if m.get("name") in used_m] or conf["models"]
    for name, source in models.items():
        if name not in {m["name"] for m in ms}:
            raise UsageError(f"{option('models', f'{name}=...')}: the recipe has no model {name!r} (its models: "
                             f"{', '.join(m['name'] for m in ms)})")
    conf["models"] = [{**m, "source": models.get(m["name"], m["source"])} for m in ms]
    used_d = set(rec.get("datasets") or {})
    first = conf["datasets"][0]["id"] if conf.get("datasets") else None
    ds = [d for d in conf.get("datasets") or [] if d["id"] in used_d or d["id"] == first]
    for did in data:
        if did not in {d["id"] for d in ds}:
            raise UsageError(f"{option('data', f'{did}=...')}: the recipe has no dataset {did!r}")
    conf["datasets"] = [{**d, "path": data.get(d["id"], d.get("path"))} for d in ds]
    conf.update(preset="custom", cache_dir=str(cache_dir), figures=[rec["figure"]["id"]])
    if device:
        conf["device"] = device
    elif isinstance(conf.get("device"), str) and conf["device"].startswith("cuda"):
        from report_builder.models.device_plan import device_problem

        why = device_problem(conf["device"])
        if why is not None:
            raise UsageError(f"the recipe ran on {shown(conf['device'])}, which this machine cannot run ({why}): add "
                             f"{option('device', 'cpu')} (a result from another device is compared within the published precision)")
    if chunk_rule:
        conf["chunk_rule"] = chunk_rule
    try:
        return from_dict(conf, source="the recipe")
    except ConfigError as e:
        raise ConfigError(f"the recipe's configuration is not valid here: {e}") from None


def _check_inputs(rec: dict[str, Any], cfg, out: Reproduction) -> bool:
    """Models by fingerprint and datasets by hash; False (with ``out`` filled) when one is missing or differs.
    Every input is checked, so the line names each missing or different one at once; ``out.status`` is the
    first problem's."""
    from report_builder.data import load_entry
    from report_builder.models import loading
    from report_builder.models.sources import ModelRefused

    def problem(status: str, reason: str) -> None:
        out.status = out.status if out.reasons else status
        out.reasons.append(reason)

    for mc in cfg.models:
        want = (rec.get("models") or {}).get(mc.name, {}).get("fingerprint")
        try:
            have = loading.fingerprint(mc.source, mc.revision)
        except ModelRefused:  # there, and refused (its own code, quantised weights): one line, exit 4
            raise
        except (ModelError, OSError) as e:
            problem("model", f"model {mc.name!r} is not available here: source {mc.source}, weights fingerprint "
                             f"{want}; pass {option('models', f'{mc.name}=PATH')} to a copy with these weights"
                    + ("" if isinstance(e, ModelError) else f" ({_first_line(e)})"))
            continue
        out.models[mc.name] = {"source": mc.source, "fingerprint": have, "recorded": want}
        if want and have != want:
            problem("weights", f"different weights at that source: model {mc.name!r} ({mc.source}) has weights "
                               f"fingerprint {have} here, the recipe records {want}")
    for dc in cfg.datasets:
        want = (rec.get("datasets") or {}).get(dc.id, {}).get("hash")
        try:
            have = load_entry(dc, cfg.data_dir).hash
        except (DataError, OSError) as e:
            problem("data", f"dataset {dc.id!r} is not available here (hash {want}): {_first_line(e)}; pass "
                            f"{option('data', f'{dc.id}=PATH')} to a copy")
            continue
        out.datasets[dc.id] = {"hash": have, "recorded": want}
        if want and have != want:
            problem("data", f"different data: dataset {dc.id!r} has hash {have} here, the recipe records {want}")
    return not out.reasons


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _needed(rec: dict[str, Any], plan) -> list:
    """The plan's tasks the figure needs: analyses making its tables (and ``architecture``), on the
    datasets it used, with every task they need."""
    from report_builder.analyses import registry

    tables = set((rec.get("figure") or {}).get("tables") or []) | {"models"}
    if "datasets" in tables:
        tables.add(recipe.DATASET_TABLE_FROM)
    wanted = {a.id for a in registry.ANALYSES if set(a.tables) & tables}
    used_d = set(rec.get("datasets") or {})
    keep = []
    for t in plan.tasks:
        a = registry.get(t.base)
        ds = t.subject.dataset
        if a.id in wanted and (ds is None or a.scope == "first_dataset" or not used_d or ds.id in used_d):
            keep.append(t)
    need = {n for t in keep for n in t.needs}
    extra = [t for t in plan.tasks if (t.analysis, t.key) in need and t not in keep]
    return [t for t in plan.tasks if t in keep or t in extra]


def _tables(rec: dict[str, Any], cfg, plan, final) -> dict:
    """The result tables as the original build showed them to the figure (public model sources, dataset names)."""
    import pandas as pd

    from report_builder.analyses.assemble import concat_tables

    tables = concat_tables((r.entry.tables for r in final), cfg, plan.sets)
    models = tables.get("models")
    if models is not None and "source" in models:
        recorded = {m: r.get("source") for m, r in (rec.get("models") or {}).items()}
        tables["models"] = models.assign(source=[recorded.get(m, guard.public_path(s))
                                                 for m, s in zip(models["model"], models["source"])])
    if tables.get("datasets") is None or tables["datasets"].empty:
        tables["datasets"] = pd.DataFrame({"dataset": list(plan.sets), "name": [s.name for s in plan.sets.values()]})
    return tables


def _explain(rec: dict[str, Any], spec: Any, cfg) -> list[dict[str, Any]]:
    """What differs between the recipe and this run besides the inputs already checked: code, libraries, device."""
    from report_builder import __version__, provenance
    from report_builder.analyses import registry

    here = {"report_builder_version": __version__, "git_commit": provenance.git_commit(),
            "figure": {"version": spec.version,
                       "analyses": {a: registry.versions().get(a) for a in (rec.get("figure") or {}).get("analyses", {})}},
            "libraries": recipe.render_libraries(), "analysis_libraries": provenance.libraries(),
            "device": cfg.device, "dtype": cfg.dtype,
            "chunk_rule": provenance.chunk_class(cfg.chunk_rule, str(cfg.device).split(":")[0], cfg.dtype)}
    there = {k: rec.get(k) for k in here}  # chunk_rule: the device class the build ran (recorded since it had one)
    there["figure"] = {"version": (rec.get("figure") or {}).get("version"),
                       "analyses": (rec.get("figure") or {}).get("analyses", {})}
    return figure_diff.inputs_diff(there, here)


def reproduce(path: str | Path, *, cache_dir: str | Path | None = None, models: list[str] | None = None,
              data: list[str] | None = None, device: str | None = None, chunk_rule: str | None = None,
              log: Callable[[str], Any] = print, progress: bool = True) -> Reproduction:
    """Verify the figure version at ``path``, rebuild it and compare (see the module docstring).

    Args:
        cache_dir: the results cache to compute into (default ``<user cache>/reproduce``).
        models: ``NAME=SOURCE`` items: where a recorded model is here. data: ``ID=PATH`` items.
        device: run on this device instead of the recorded one. chunk_rule: with this chunk rule.
    """
    t0 = time.perf_counter()
    rec, prov_file = load_recipe(path)
    fig = rec["figure"]
    out = Reproduction(figure=str(fig.get("id")), recorded=str(rec.get("content_hash")), status="different",
                       recipe_intact=recipe.sealed(rec), path=str(prov_file))
    from report_builder.figures.registry import figure

    try:
        spec = figure(out.figure)
    except KeyError as e:
        raise UsageError(f"{prov_file}: {e.args[0]}") from None
    check = verify.check_folder(prov_file.parent, rec)  # first the folder's own files (SPEC §8)
    out.folder_files = check.given
    if check.altered:
        out.status, out.reasons = "altered", check.mismatches
        out.seconds = time.perf_counter() - t0
        return out
    from report_builder.housekeeping import REPRODUCE_CACHE

    cache = Path(cache_dir).expanduser() if cache_dir else guard.user_cache_dir() / REPRODUCE_CACHE
    conf = rec["config"]
    cfg = _config(rec, cache, _pairs(models, "model", [m.get("name") for m in conf["models"]]),
                  _pairs(data, "data", [d.get("id") for d in conf.get("datasets") or []]), device, chunk_rule)
    out.cache, out.device = str(cache), cfg.device
    if not _check_inputs(rec, cfg, out):
        out.seconds = time.perf_counter() - t0
        return out
    from report_builder.cache_lock import using

    with using(cfg.cache_dir, "reproduce"):  # shared with builds; `clean` of that cache waits (or this does)
        out.reproduced, texts = _rebuild(rec, spec, cfg, out, log, progress)
    out.tolerance = precision.recorded_tolerance(rec)
    cmp = verify.compare(out.recorded, out.reproduced, check, texts, out.tolerance)
    out.data, out.parts = cmp.data, cmp.parts
    if out.files is not None:  # the drawings people look at: the hash covers them only for a diagram
        out.drawings = verify.redrawn(check, Path(out.files))
    out.status = {"identical": "identical", "within": "within"}.get(cmp.verdict, "different")
    if out.status != "identical":
        _reasons(rec, spec, cfg, out, check)
    out.seconds = time.perf_counter() - t0
    return out


def _rebuild(rec: dict[str, Any], spec: Any, cfg, out: Reproduction, log: Callable[[str], Any], progress: bool
             ) -> tuple[str, dict[str, str]]:
    """Run the figure's analyses, draw it into ``<cache>/reproduced/<id>-<rebuilt hash>/`` and return its
    content hash and the texts the hash covers (spec.json, data.csv and a diagram's chart.svg)."""
    from report_builder.analyses import planning
    from report_builder.cache import Cache
    from report_builder.executors.local import LocalExecutor
    from report_builder.figures.display import DisplayTables
    from report_builder.figures.reported import load_reported
    from report_builder.figures.spec import FigureContext, NotConfigured, Roles
    from report_builder.site.build import figure_files

    cache = Cache(cfg.cache_dir)
    guard.check_writable(cache.base, "the cache directory", option("cache_dir"))
    with atomic.opened_dir(cache.base, (cache.reproduced.name,), create=True):
        pass  # reproduced/ is a real folder of the cache, not a link: refused before any work
    cache.sweep()  # what killed runs left (a drawing renamed aside put back), as a build's preflight does
    plan = planning.plan(cfg, cache)
    plan = dataclasses.replace(plan, tasks=_needed(rec, plan))
    executor = LocalExecutor(cache, log=log, progress=progress)
    executor.prepare(cfg)
    results = list(executor.execute(plan))
    out.analyses = [r.task.label for r in results]
    out.computed = sum(1 for r in results if not r.reused)
    out.reused = len(results) - out.computed
    final = planning.final_results(results)
    tables = _tables(rec, cfg, plan, final)
    display = rec.get("display") or {}
    judged = ({m: d.get("style") for m, d in display.items()}, {m: bool(d.get("causal")) for m, d in display.items()})
    roles = Roles(**{k: tuple(v) if isinstance(v, list) else v for k, v in (rec.get("roles") or {}).items()})
    ctx = FigureContext(tables=DisplayTables(tables, judged if display else None), roles=roles,
                        reported=load_reported())
    try:
        result = spec.build(ctx)
    except NotConfigured as e:
        out.reasons.append(f"the figure is not configured from this recipe ({_first_line(e)})")
        return "not-configured", {}
    tmp = guard.make_tmp_dir(cache.reproduced / spec.id)
    with guard.removing(tmp):
        ff = figure_files(spec, result, ctx.tables, tmp, int(rec.get("inline_limit") or 200_000))
        names = ("spec.json", "data.csv") + (("chart.svg",) if result.svg is not None else ())  # a diagram's drawing
        texts = {n: readback.read_text(tmp / spec.id, n, readback.CAPS["file"]) for n in names}  # is in its hash
        drawn = _drawn_record(rec, spec, result, ctx, cfg, plan, final, ff.content_hash, tmp / spec.id)
        atomic.replace_inside(cache.base, tmp / spec.id / "provenance.json", recipe.dumps(drawn))
        # a name made here: the registry's id and the hash just computed (nothing read from the recipe)
        target = cache.reproduced / f"{spec.id}-{ff.content_hash}"
        _publish(cache, tmp / spec.id, target)
    out.files = str(target)
    return ff.content_hash, texts


def _drawn_record(rec: dict[str, Any], spec: Any, result: Any, ctx: Any, cfg, plan, final, content_hash: str,
                  folder: Path) -> dict[str, Any]:
    """The provenance.json of the figure drawn in ``folder``: the recipe of THAT drawing, made as a build makes
    a new version's (`site.publish.figure_record`, from this run's `provenance.build_provenance`): its content
    hash, the SHA-256 of the files drawn (``files``), this run's device, chunk rule, library versions, date and
    reconstruction error, and its configuration (so `reproduce` of the folder rebuilds it: identical); plus
    ``reproduces``, the version it reproduces (figure id, content hash, permalink), and no ``permalink`` (it
    was published nowhere). The models and datasets keep the sources and paths the recipe names (the tables
    show them; their fingerprints and hashes were checked equal), not a ``--model``/``--data`` copy's. Sealed."""
    from report_builder.analyses import assemble
    from report_builder.provenance import build_provenance
    from report_builder.site import publish

    prov = build_provenance(cfg, *assemble.provenance(plan, final))
    named = {m.get("name"): m.get("source") for m in rec["config"]["models"]}
    paths = {d.get("id"): d.get("path") for d in rec["config"].get("datasets") or []}
    for name, m in prov["models"].items():
        m["source"] = ((rec.get("models") or {}).get(name) or {}).get("source") or named.get(name, m["source"])
    prov["config"]["models"] = [{**m, "source": named.get(m["name"], m["source"])} for m in prov["config"]["models"]]
    prov["config"]["datasets"] = [{**d, "path": paths.get(d["id"], d.get("path"))}
                                  for d in prov["config"].get("datasets") or []]
    made, _, _, _ = publish.figure_record(spec, result, content_hash, ctx.tables, ctx.roles, prov,
                                          int(rec.get("inline_limit") or 200_000), None, None, folder)
    made.pop("permalink", None)
    made["reproduces"] = {"figure": rec["figure"]["id"], "content_hash": rec.get("content_hash"),
                          "permalink": rec.get("permalink")}
    return recipe.seal(made)


def _publish(cache, folder: Path, target: Path) -> None:
    """Put the drawn ``folder`` at ``target`` (``<cache>/reproduced/<id>-<hash>/``), replacing an earlier run's.

    By renames (`atomic.replace_dir`): the earlier drawing is renamed aside, the new one in, then the old one
    deleted under a temporary name, so a run killed between the renames leaves the earlier drawing whole
    (the cache's sweep puts it back: `Cache.restore_reproduced`) and a deletion cut short is swept. This runs
    under the lock of ``reproduced/`` (`guard.site_lock`: a ``flock`` of the folder, nothing written), so two
    runs of one figure into one cache at once take turns: the later one replaces the earlier one's drawing.
    Where folders cannot be locked (some network filesystems) a rename that finds the target back keeps that
    other run's finished drawing: the same figure, by its content hash."""
    with guard.site_lock(target, timeout=guard.LOCK_TIMEOUT_S, **cache.reproduced_lock()):
        try:
            atomic.replace_dir(folder, target)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not target.is_dir() or target.is_symlink():
                raise


def _reasons(rec: dict[str, Any], spec: Any, cfg, out: Reproduction, check: verify.FolderCheck) -> None:
    """What differs (and, for a rebuild that differs, why), from the recipe compared with this run and the
    folder's data compared with the rebuilt data."""
    if out.parts:
        out.reasons.append("beyond the precision: " + ", ".join(out.parts) + (
            " (the numbers are within it: the chart's text or code differs)" if "data.csv" not in out.parts else ""))
    if out.data is not None and out.data.get("comparable"):
        out.reasons.append(figure_diff.describe_data(out.data))
    elif not check.complete:
        out.reasons.append("the folder's spec.json and data.csv are not here: only the recorded hash was compared")
    out.differences = _explain(rec, spec, cfg)
    kinds = {d["kind"] for d in out.differences}
    if "code" in kinds:
        out.reasons.append("different code: " + ", ".join(_what(d) for d in out.differences if d["kind"] == "code"))
    if "library" in kinds:
        out.reasons.append("different library versions: " + ", ".join(
            _what(d) for d in out.differences if d["kind"] == "library"))
    if "device" in kinds:
        out.reasons.append("different device/dtype/chunk rule: " + ", ".join(
            _what(d) for d in out.differences if d["kind"] == "device")
            + " (results of another device class, dtype or chunk rule differ in the last bits)")
    if not kinds:
        out.reasons.append("no recorded input differs (the recipe, the code, the libraries and the device all match)"
                           if out.status == "within" else
                           "unexplained difference: the recipe, the code, the libraries and the device all match")


def _what(d: dict[str, Any]) -> str:
    return f"{d['what']} {figure_diff._short(d['old'], 30)} recorded, {figure_diff._short(d['new'], 30)} here"

