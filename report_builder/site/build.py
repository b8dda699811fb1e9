"""Render the report site: figures -> files + Markdown pages -> ``mkdocs build --strict`` -> ``site/``.

Atomic: pages and assets are rendered into a temporary docs folder and built into a temporary site
folder next to the output (the build's own directory, never the working directory); only after mkdocs
succeeded is the site replaced by renames, under the output's lock (`guard.site_lock`: two builds of one output swap in
turn). The output is replaced only when it is missing, empty or carries the ``.report_builder-site``
marker every built site has (`report_builder.guard`). An error, KeyboardInterrupt or SIGTERM leaves
the previous site untouched and removes the temporary folders.

No-op rebuilds are cheap: a figure whose inputs are unchanged (the tables it read, the display
judgement, roles, reported numbers, its declaration and version, the package's code) is neither built
nor drawn: its files and page section come from the figure cache (`figure_cache`, in the output's own
state folder: ``<cache>/site/<out id>/``, `site_state`); one whose inputs changed but whose content hash did not reuses its
drawn ``chart.svg``/``chart.png`` (`figure_files.RenderCache`); figures read their tables through
`figures.display.DisplayTables`, so tokens are put in display form only for figures that are built.
When the generated pages and files, the site resources, the extra files, the site URL and the
versions equal the previous build's (build date masked) and the existing site is byte for byte what
that build left (digest in the state's ``build.json``), mkdocs is skipped and the site
kept. A site edited or deleted by the user, or any changed page, is built again.

Figure versions (`citations.permalinks`, `site.publish`): each figure's provenance and citation are its
version's (a version published before keeps its own); the history entry (`citations.history`) is made
before the pages; right before the swap, under the lock, every earlier version (verified) and this
build's new ones are published into the new site with their pages, ``history.json`` and its charts.

Pitfall: a builder that raises anything but `NotConfigured` fails the render
loudly — a figure is never skipped silently.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from report_builder import guard, site_marker
from report_builder.atomic import replace_dir, restore_swapped, write_text
from report_builder.errors import option
from report_builder.values import check_site_url
from report_builder.figures.spec import FigureContext, FigureResult, FigureSpec, NotConfigured, Roles
from report_builder.figures import compare
from report_builder.figures.display import DisplayTables
from report_builder.citations import cite as prov_mod
from report_builder.citations import earlier_site, history, permalinks, readback
from report_builder.citations.version_files import write_csv
from report_builder.site import assets, htmltable, manifest, pages
from report_builder.site import figure_cache as fcache
from report_builder.site import publish, svgsafe
from report_builder.site.digests import can_keep as _can_keep, inputs_digest as _inputs_digest, tree_digest as _tree_digest
from report_builder.site.figure_cache import FigureCache, ReadTracker, json_safe
from report_builder.site.site_state import site_state
from report_builder.site.figure_files import (DEFAULT_INLINE_LIMIT, FigureFiles, Previous, RenderCache, export_title,
                                             write_figure_files)
from report_builder.site.paths import MKDOCS_YML
from report_builder.site.write_pages import PAGES, write_pages  # noqa: F401 - build.PAGES


@dataclass(repr=False)
class RenderReport:
    """What `render_site` did.

    Attributes:
        figures_built: ids whose figure files were written, in paper order.
        not_configured: id -> the YAML config entry that would produce it.
        changed: ids new or changed relative to the previous build's manifest.
        site_dir: the final site folder.
        hashes: id -> content hash of every built figure.
        kept: no page changed since the previous build: mkdocs did not run and the existing site
            (checked unmodified) was kept as it is.
        rebuilt: ids whose builder ran in this build (inputs new or changed); every other figure
            was reused whole from the figure cache (`figure_cache`).
        drawn: ids whose chart was drawn (SVG/PNG) in this build.
    """

    figures_built: list[str]
    not_configured: dict[str, str]
    changed: list[str]
    site_dir: Path
    hashes: dict[str, str] = field(default_factory=dict)
    kept: bool = False
    rebuilt: list[str] = field(default_factory=list)
    drawn: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # one line as a notebook cell's result
        return (f"<RenderReport: {len(self.figures_built)} figures, {len(self.changed)} new or changed, "
                f"{len(self.not_configured)} not configured -> {self.site_dir}>")


@dataclass
class _NotConfigured:
    message: str
    config_entry: str


@dataclass
class Section:
    """Everything the figure template needs for one figure."""

    result: FigureResult | None = None
    files: dict[str, str] = field(default_factory=dict)
    content_hash: str | None = None
    page_spec: dict[str, Any] | None = None
    spec_attr: str = ""
    table_html: str = ""
    paper_html: str = ""
    paper_name: str = ""
    show_paper: bool = False
    provenance_html: str = ""
    cite_html: str = ""
    not_configured: _NotConfigured | None = None
    svg_html: str = ""
    compare_html: str = ""
    compare_note: str = ""
    compare_same: bool = False
    reused: bool = False  # files (or at least the drawing) taken from the render cache
    built: bool = False  # the builder ran in this build (inputs new or changed)


def _render_once(tables: dict[str, pd.DataFrame], roles: Roles, provenance: dict[str, Any], *,
                out_dir: Path = Path("site"), docs_dir: Path | None = None,
                log: Callable[[str], Any] = print, figures: Iterable[FigureSpec] | None = None,
                inline_limit: int = DEFAULT_INLINE_LIMIT, reported: dict[str, Any] | None = None,
                site_url: str | None = None, extra_files: dict[str, str] | None = None,
                cache_dir: Path | None = None) -> RenderReport:
    """Build the whole site from result tables. When another build of the same output publishes while
    this one renders (its versions or history would be hidden by this build's pages), the render starts
    again on top of what it published, at most `RENDER_TRIES` times (then `UnsafeOutput`: run it again).

    Args:
        tables: result tables by name (see ARCHITECTURE.md), concatenated over models and datasets.
        roles: which model/dataset plays which part.
        provenance: build-wide provenance (versions, commit, device, dtype, date, preset, config,
            models {name: {source, fingerprint, class_name}}, datasets {id: {hash, n}}, params).
        out_dir: the final site folder (replaced atomically).
        docs_dir: keep the generated Markdown here (replaced after a successful build; must be missing,
            empty or a previous one); default: only in a temporary folder next to ``out_dir``.
        log: progress messages.
        figures: the figure declarations (default: every registered figure).
        inline_limit: datasets with more JSON bytes than this are loaded from files, not inlined.
        reported: the papers' reported numbers, passed to the builders (default: ``provenance["reported"]``).
        extra_files: site-relative path -> text, written into the site before it is swapped in.
        cache_dir: the results cache: the figure renders, build record and manifest copy of this output
            live in it (`site_state`); None or not a cache: inside the output, carried by the swap.
    Raises:
        UnsafeOutput: ``out_dir`` (or ``docs_dir``) holds files the tool did not create.
    """
    out_dir = Path(out_dir).resolve()
    docs_dir = Path(docs_dir).resolve() if docs_dir is not None else None
    site_url = check_site_url(site_url) if site_url is not None else None  # reaches every page: parsed, not trusted
    site_marker.check_replaceable(out_dir, "the output directory", option("out_dir"))
    if docs_dir is not None:
        site_marker.check_replaceable(docs_dir, "the generated docs directory", "docs_dir")
    if figures is None:
        from report_builder.figures.registry import all_figures

        figures = all_figures()
    specs = list(figures)
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate figure ids: {sorted({i for i in ids if ids.count(i) > 1})}")

    tag = guard.tmp_tag()
    tmp_docs = out_dir.parent / f".{out_dir.name}-docs.tmp-{tag}"
    tmp_site = out_dir.parent / f".{out_dir.name}.tmp-{tag}"
    state = site_state(out_dir, cache_dir)
    cache_manifest, build_record = state.manifest, state.record
    kept = False
    if (back := restore_swapped(out_dir, state.lock_file)) is not None:  # before the sweep, which would remove it
        log(f"site: put back {out_dir} from {back.name}: a build was killed while it swapped the site in")
    guard.sweep([out_dir.parent], guard.site_temp_prefixes(out_dir), legacy_age_s=None)
    if docs_dir is not None:  # its swap is the site's (`replace_dir`, under the site's lock): the same repair
        if (back := restore_swapped(docs_dir, state.lock_file, lock_of=out_dir)) is not None:
            log(f"site: put back {docs_dir} from {back.name}: a build was killed while it swapped the pages in")
        guard.sweep([docs_dir.parent], (f".{docs_dir.name}.tmp-", f".{docs_dir.name}.old-"), legacy_age_s=None)
    declared = readback.DECLARED.set(frozenset(ids))  # this build's figures are known ids of what it reads back
    try:
        versions = permalinks.Versions(out_dir, site_url, log, svgsafe.is_safe)  # earlier versions, carried (verified)
        past = history.read(out_dir, log)  # validated; a damaged one kept as it was (`citations.earlier_site`)
        tmp_docs.mkdir(parents=True)
        tmp_site.mkdir()  # before anything is written: its files inherit the output's group and default ACL
        if out_dir.is_dir() and not out_dir.is_symlink():
            guard.copy_dir_attrs(out_dir, tmp_site, keep_writable=True)
        secret = state.key()
        render_cache = RenderCache(state.working(tmp_site) / "figure-renders", secret)
        previous = earlier_site.read_manifest(out_dir, cache_manifest)
        assets.write_assets(tmp_docs)
        reported = reported if reported is not None else provenance.get("reported", {}) or {}
        display = DisplayTables(tables)  # tokens in display form, each table converted when first read
        figure_cache = FigureCache(render_cache.root, tables, judged=display.judged, secret=secret, context={
            "roles": dataclasses.asdict(roles), "reported": reported, "inline_limit": inline_limit})
        sections: dict[str, Section] = {}
        counts: dict = {}  # sequence counts of the provenance records, counted once per table and dataset
        for spec in specs:
            sections[spec.id] = _render_figure(spec, display, roles, reported, provenance, tmp_docs / "figures",
                                               inline_limit, log, render_cache, figure_cache, counts, versions)
        current = {
            "date": provenance.get("date"), "git_commit": provenance.get("git_commit"),
            "report_builder_version": provenance.get("report_builder_version"), "preset": provenance.get("preset"),
            "figures": {s.id: {"hash": sections[s.id].content_hash, "title": s.title, "paper": s.paper}
                        for s in specs},
        }
        changes = manifest.compare(current, previous)
        base = manifest.baseline(current, previous)
        current["base"] = base
        (tmp_docs / "figures").mkdir(parents=True, exist_ok=True)
        (tmp_docs / "figures" / "manifest.json").write_text(json.dumps(current, indent=1), encoding="utf-8")
        entry, charts = publish.history_entry(versions, past.entries, provenance, tmp_docs / "figures")
        entries = publish.page_entries(past, entry)
        write_pages(tmp_docs, specs, sections, tables, roles, provenance, manifest.compare(current, base),
                    inline_limit, history.history_html(entries, publish.present(versions, past, charts)),
                    {i: (permalinks.permalink(i, h), permalinks.permalink_url(site_url, i, h))
                     for i, h in versions.current.items()}, site_url)
        n_drawn = sum(1 for s in sections.values() if s.result is not None and not s.reused)
        n_built = sum(1 for s in sections.values() if s.built and s.not_configured is None)
        log(f"site: {n_built} figures rebuilt ({n_drawn} drawn, {n_built - n_drawn} drawings reused), "
            f"{figure_cache.hits} unchanged (inputs unchanged: not rebuilt)")
        date = str(provenance.get("date") or "")
        dates = publish.build_dates(date, entries, versions)  # this build's and the dates its pages carry over
        known = {f"figures/{k}": v for k, v in figure_cache.known.items()}
        inputs = _inputs_digest(tmp_docs, dates, extra_files or {}, site_url, known)
        kept = _can_keep(out_dir, docs_dir, build_record, inputs)
        if kept:
            log(f"site: no page changed since the build of {kept}; mkdocs skipped, {out_dir} kept as it is")
            render_cache.prune()
            figure_cache.prune()
            return _report(specs, sections, changes, out_dir, log, kept=True)
        log(f"site: mkdocs build --strict ({len(specs)} figures)")
        _mkdocs_build(tmp_docs, tmp_site, site_url=site_url)
        for rel, text in (extra_files or {}).items():
            (tmp_site / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_site / rel).write_text(text, encoding="utf-8")
        render_cache.prune()  # before the swap: in the fallback the renders are carried inside the new site
        figure_cache.prune()
        with guard.site_lock(out_dir, state.lock_file):
            site_marker.check_replaceable(out_dir, "the output directory", option("out_dir"))
            if publish.moved(versions, past):  # this build's pages would hide what the other one published
                raise publish.OutputMoved(str(out_dir))
            publish.publish(versions, tmp_site, past, entry, charts)
            site_marker.write(tmp_site)  # last: it lists every entry the new site holds
            replace_dir(tmp_site, out_dir)
            if docs_dir is not None:
                (tmp_docs / guard.SITE_MARKER).write_text("generated pages of report_builder\n", encoding="utf-8")
                site_marker.check_replaceable(docs_dir, "the generated docs directory", "docs_dir")
                replace_dir(tmp_docs, docs_dir)
            write_text(cache_manifest, json.dumps(current, indent=1))
            record = {"date": date, "dates": list(dates), "inputs": inputs, "site": _tree_digest(out_dir),
                      "docs": _tree_digest(docs_dir, dates) if docs_dir is not None else None}
            write_text(build_record, json.dumps(record, indent=1))
    finally:
        readback.DECLARED.reset(declared)
        for tmp in (tmp_docs, tmp_site):
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return _report(specs, sections, changes, out_dir, log)


RENDER_TRIES = 3
"""How many times `render_site` renders on top of another build's publication before it gives up."""


@functools.wraps(_render_once)
def render_site(*args: Any, **kw: Any) -> RenderReport:
    for _ in range(RENDER_TRIES):
        try:
            return _render_once(*args, **kw)
        except publish.OutputMoved as e:
            kw.get("log", print)(f"site: another build published into {e} while this one rendered; rendering again "
                                 "on top of it")
    raise guard.UnsafeOutput(f"other builds published into {kw.get('out_dir', Path('site'))} {RENDER_TRIES} times "
                             "while this one rendered; run it again when they have finished")


def _report(specs: list[FigureSpec], sections: dict[str, Section], changes: manifest.Changes, out_dir: Path,
            log: Callable[[str], Any], kept: bool = False) -> RenderReport:
    built = [s.id for s in specs if sections[s.id].not_configured is None]
    nc = {s.id: sections[s.id].not_configured.config_entry for s in specs if sections[s.id].not_configured}
    log(f"site: {len(built)} figures on the site, {len(nc)} not configured; "
        f"{len(changes.changed) + len(changes.new)} new or changed -> {out_dir}")
    return RenderReport(figures_built=built, not_configured=nc, changed=changes.new + changes.changed,
                        site_dir=out_dir, hashes={i: sections[i].content_hash for i in built}, kept=kept,
                        rebuilt=[s.id for s in specs if sections[s.id].built],
                        drawn=[s.id for s in specs if sections[s.id].result is not None and not sections[s.id].reused])


def figure_title(spec: FigureSpec, result: FigureResult, tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """The title of one figure's static exports (models and datasets with their names)."""
    ds = tables.get("datasets")
    names = {}
    if ds is not None and not ds.empty and {"dataset", "name"} <= set(ds.columns):
        names = dict(zip(ds["dataset"].astype(str), ds["name"].astype(str)))
    return export_title(result.title or spec.title, spec.id, tuple(result.models), tuple(result.datasets), names)


def shown_table(result: FigureResult) -> pd.DataFrame | None:
    """The frame a figure shows as a table (a table's own, or its data when it has no chart or drawing)."""
    if result.table is not None:
        return result.table
    return result.data if result.chart is None and result.svg is None else None


def figure_files(spec: FigureSpec, result: FigureResult, tables: Any, figures_dir: Path, inline_limit: int,
                 render_cache: RenderCache | None = None, previous: Previous | None = None) -> FigureFiles:
    """Write one built figure's files under ``figures_dir/<id>/`` (also `report_builder.citations.reproduce`'s way);
    ``previous``: the figure's current published version, kept when equal within the precision."""
    table = shown_table(result)
    return write_figure_files(spec.id, result.data, result.chart, table if table is not None else result.data,
                              figures_dir, inline_limit, title=figure_title(spec, result, tables), svg=result.svg,
                              render_cache=render_cache, units=spec.units, previous=previous)


def _render_figure(spec: FigureSpec, display: DisplayTables, roles: Roles, reported: dict[str, Any],
                   prov: dict[str, Any], figures_dir: Path, inline_limit: int, log: Callable[[str], Any],
                   render_cache: RenderCache | None = None, figure_cache: FigureCache | None = None,
                   counts: dict | None = None, versions: permalinks.Versions | None = None) -> Section:
    """One figure's files and page section: reused from ``figure_cache`` when its inputs are unchanged
    (not built, not drawn), else built (its reads recorded) and stored; provenance and BibTeX are those
    of the figure's version (`permalinks`): a version published before keeps its own, a new one gets
    this build's recipe (`citations.recipe`)."""
    fig_dir = figures_dir / spec.id
    hit = figure_cache.get(spec) if figure_cache is not None else None
    if hit is not None and (hit.meta.get("not_configured") is not None or figure_cache.restore(hit, fig_dir)):
        sec = _section_from_meta(hit.meta, fig_dir, spec)
        if sec.not_configured is not None:
            figure_cache.used.add(hit.path.name)
            log(f"site: {spec.id} not configured")
            return sec
        if render_cache is not None:
            render_cache.keep(sec.content_hash)
        log(f"site: {spec.id} reused, inputs unchanged ({sec.content_hash})")
    else:
        tracker = ReadTracker(display)
        ctx = FigureContext(tables=tracker, roles=roles, reported=reported)
        previous = _previous(versions, spec.id)
        sec, meta = _build_section(spec, ctx, fig_dir, inline_limit, log, render_cache, previous)
        if figure_cache is not None and meta is not None:
            figure_cache.put(spec, tracker.reads(), fig_dir if sec.not_configured is None else None, meta)
        if sec.not_configured is not None:
            return sec
    rec, prov_text, bib_text, url = publish.figure_record(spec, sec.result, sec.content_hash, display, roles, prov,
                                                          inline_limit, counts, versions, fig_dir)
    (fig_dir / "provenance.json").write_text(prov_text, encoding="utf-8")
    (fig_dir / "cite.bib").write_text(bib_text, encoding="utf-8")
    sec.files = {**sec.files, "provenance": f"figures/{spec.id}/provenance.json", "bib": f"figures/{spec.id}/cite.bib",
                 "permalink": permalinks.permalink(spec.id, sec.content_hash) + "index.html"}
    sec.provenance_html = prov_mod.provenance_html(rec)
    sec.cite_html = prov_mod.cite_html(bib_text.split("\n\n")[0], prov_mod.PAPER_BIBTEX.get(spec.paper), url,
                                       sec.files["permalink"])
    return sec


def _previous(versions: permalinks.Versions | None, fig_id: str) -> Previous | None:
    """The figure's current version in the earlier site when it is intact (its record verified), else None:
    a rebuild equal to it within the published precision keeps it (`figure_files.write_figure_files`)."""
    h = versions.previous_current.get(fig_id) if versions is not None else None
    if h is None or versions.old_record(fig_id, h) is None:
        return None
    v = versions.published(fig_id, h)
    return Previous(versions.out_dir, v.permalink, dict(v.files)) if v is not None else None


def _section_from_meta(meta: dict[str, Any], fig_dir: Path, spec: FigureSpec) -> Section:
    """A figure's section as `figure_cache` stored it (`figure_cache.section_fields`: HTML made again
    from the stored data; provenance and citation still to be written)."""
    nc = meta.get("not_configured")
    if nc is not None:
        return Section(not_configured=_NotConfigured(nc["message"], nc["config_entry"]))
    r = meta["result"]
    result = FigureResult(data=pd.DataFrame(), reading=r["reading"], title=r["title"], models=tuple(r["models"]),
                          datasets=tuple(r["datasets"]), params=r["params"])
    return Section(result=result, reused=True, paper_name=prov_mod.PAPER_NAMES.get(spec.paper, spec.paper),
                   **fcache.section_fields(meta["section"], fig_dir))


def _build_section(spec: FigureSpec, ctx: FigureContext, fig_dir: Path, inline_limit: int,
                   log: Callable[[str], Any], render_cache: RenderCache | None, previous: Previous | None = None
                   ) -> tuple[Section, dict[str, Any] | None]:
    """Build one figure and write its files; the section and what `figure_cache` stores of it (None
    when its parameters would not come back from JSON as they are)."""
    try:
        result = spec.build(ctx)
    except NotConfigured as exc:
        log(f"site: {spec.id} not configured")
        return (Section(not_configured=_NotConfigured(str(exc), exc.config_entry), built=True),
                {"not_configured": {"message": str(exc), "config_entry": exc.config_entry}})
    except Exception as exc:
        raise RuntimeError(f"figure {spec.id}: builder failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, FigureResult):
        raise TypeError(f"figure {spec.id}: builder returned {type(result).__name__}, not FigureResult")
    drawn = result.svg is not None
    table = shown_table(result)
    try:
        ff = figure_files(spec, result, ctx.tables, fig_dir.parent, inline_limit, render_cache, previous)
    except Exception as exc:
        raise RuntimeError(f"figure {spec.id}: could not write its files: {type(exc).__name__}: {exc}") from exc
    files = dict(ff.files)
    cmp = compare.comparison(spec.id, result.data, ctx.tables, ctx.roles, ctx.reported or None, units=spec.units)
    if cmp is not None:
        write_csv(cmp.table, fig_dir / "paper_vs_ours.csv")  # spreadsheet-safe, as data.csv
        if ff.kept and "paper_vs_ours.csv" in previous.files:  # the kept version's own (same precision)
            previous.carry_into(fig_dir, ("paper_vs_ours.csv",))
        files["paper_vs_ours"] = f"figures/{spec.id}/paper_vs_ours.csv"
    show_paper = (cmp is None and ctx.roles.preset == "paper" and result.paper is not None
                  and not result.paper.empty)
    log(f"site: {spec.id} " + (f"kept ({ff.content_hash}: equal within the published precision)" if ff.kept else
                               f"{'reused' if ff.reused else 'built'} ({ff.content_hash})"))
    sec = Section(
        result=result, files=files, content_hash=ff.content_hash, page_spec=ff.page_spec,
        spec_attr=pages.spec_attr(ff.page_spec) if ff.page_spec is not None else "",
        table_html=htmltable.to_html(table) if table is not None else "",
        svg_html=pages.inline_svg(result.svg) if drawn else "",
        paper_html=htmltable.to_html(result.paper) if show_paper else "",
        compare_html=htmltable.to_html(cmp.table) if cmp is not None else "",
        compare_note=cmp.note if cmp is not None else "", compare_same=bool(cmp and cmp.same_model),
        paper_name=prov_mod.PAPER_NAMES.get(spec.paper, spec.paper), show_paper=show_paper,
        reused=ff.reused, built=True,
    )
    stored = {"title": result.title, "reading": result.reading, "models": list(result.models),
              "datasets": list(result.datasets), "params": result.params}
    keep = fcache.section_record(sec, {"table": table, "paper": result.paper if show_paper else None,
                                       "compare": cmp.table if cmp is not None else None}, fig_dir)
    if not (keep is not None and json_safe(stored["params"]) and all(isinstance(x, str) for x in
                                                                     stored["models"] + stored["datasets"])):
        return sec, None
    return sec, {"section": keep, "result": stored}


def _mkdocs_build(docs: Path, site: Path, site_url: str | None = None) -> None:
    """``mkdocs build --strict`` of the root mkdocs.yml with docs and site folders redirected (and the
    configured ``site_url``: canonical links and the sitemap)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    extra = {"site_url": site_url} if site_url else {}
    cfg = load_config(config_file=str(MKDOCS_YML), docs_dir=str(docs), site_dir=str(site), strict=True, **extra)
    cfg.plugins.on_startup(command="build", dirty=False)
    try:
        build(cfg)
    finally:
        cfg.plugins.on_shutdown()
