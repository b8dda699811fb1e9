"""The citation side of a site build: each figure's version record, the history entry, and publishing
every version and the history into the new site (called by `site.build.render_site`).

- `figure_record`: the provenance record and citation of a figure's version — the published ones
  when its content hash was published before (`permalinks.Versions.record_for`), else this build's
  recipe (`citations.cite.figure_provenance` + `citations.recipe.recipe_fields`, sealed) and a
  ``cite.bib`` whose ``url`` is the version's permalink.
- `history_entry`: this build's entry (`citations.history.make_entry`) with, for each changed figure, the
  inputs that differ, the numeric change of its data and a difference chart (`citations.figure_diff`).
- `publish`: under the site lock, right before the swap: every earlier version (verified) and this
  build's new ones into the new site (`permalinks.Versions.publish`), their pages
  (`citations.version_page`), ``history.json`` (the output's latest history plus this entry) and the
  history's charts (earlier ones carried by hard link).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from report_builder.citations import figure_diff, history, permalinks, recipe, version_page
from report_builder.citations import cite as prov_mod
from report_builder.site.write_pages import PAGES, page_html


def figure_record(spec: Any, result: Any, content_hash: str, display: Any, roles: Any, prov: dict[str, Any],
                  inline_limit: int, counts: dict | None, versions: permalinks.Versions | None
                  ) -> tuple[dict[str, Any], str, str, str]:
    """(record, provenance.json text, cite.bib text, permalink URL) of one figure's version."""
    url = permalinks.permalink_url(versions.site_url if versions else None, spec.id, content_hash)

    def make() -> tuple[dict[str, Any], str]:
        own = {**spec.params, **result.params}
        rec = prov_mod.figure_provenance(prov, display.raw, tuple(result.models), tuple(result.datasets),
                                         own, content_hash, tuple(spec.analysis), counts)
        rec.update(recipe.recipe_fields(spec, roles, prov, display.judged(), list(rec["models"]), inline_limit,
                                        list(rec["datasets"]), own))
        rec["figure"]["title"] = result.title or spec.title
        rec["permalink"] = url
        bib = prov_mod.figure_bibtex(spec.id, result.title or spec.title, spec.paper, content_hash, prov,
                                     spec.reproduces, url=url)
        paper_bib = prov_mod.PAPER_BIBTEX.get(spec.paper)
        return rec, bib + ("\n\n" + paper_bib if paper_bib else "") + "\n"

    if versions is None:
        rec, bib = make()
        rec = recipe.seal(rec)
        return rec, recipe.dumps(rec), bib, url
    rec, text, bib = versions.record_for(spec, content_hash, make, page_html(spec.paper))
    return rec, text, bib, str(rec.get("permalink") or url)


def _titles(versions: permalinks.Versions) -> dict[str, dict[str, str]]:
    out = {fid: {"title": str((vs.get(h) or {}).get("title", ""))} for fid, vs in versions.index["figures"].items()
           for h in [versions.previous_current.get(fid)] if h}
    out.update(versions.titles)
    return out


def history_entry(versions: permalinks.Versions, past: list[dict[str, Any]], prov: dict[str, Any],
                  figures_dir: Path) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """This build's history entry (None when nothing changed) and its difference charts (site path -> SVG).

    ``figures_dir``: this build's generated ``figures/`` (the new versions' files)."""
    charts: dict[str, str] = {}

    def detail(fid: str, old: str, new: str) -> dict[str, Any]:
        folder = versions.old_folder(fid, old)
        if folder is None:
            return {"inputs": [], "data": {"comparable": False, "reason": "the old version is not available"}}
        try:
            old_rec = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old_rec = {}
        old_df = figure_diff.read_data(folder / "data.csv")
        new_df = figure_diff.read_data(figures_dir / fid / "data.csv")
        out: dict[str, Any] = {"inputs": figure_diff.inputs_diff(old_rec, versions.records.get(fid) or {}),
                               "data": figure_diff.data_summary(old_df, new_df), "chart": None}
        try:
            spec = json.loads((figures_dir / fid / "spec.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            spec = None
        dspec = figure_diff.difference_spec(old_df, new_df, spec, fid)
        if dspec is not None:
            import vl_convert as vlc

            path = history.chart_path(fid, old, new)
            charts[path] = vlc.vegalite_to_svg(dspec)
            out["chart"] = path
        return out

    entry = history.make_entry(prov, past, dict(versions.current), versions.previous_current, _titles(versions), detail)
    return entry, charts


def present(versions: permalinks.Versions) -> set[str]:
    """The permalinks the new site will hold: every earlier version still intact (each checked here,
    once; a damaged one is reported) and this build's new ones."""
    new = {(fid, v["hash"]) for fid, v in versions.new.items()}
    return {permalinks.permalink(fid, h) for fid, vs in versions.all_versions().items() for h in vs
            if (fid, h) in new or versions.intact(fid, h)}


def _write_page(versions: permalinks.Versions) -> Callable[..., str]:
    def write(fid: str, h: str, rec: dict[str, Any], bib: str, current: str | None, newer: bool) -> str:
        report_page = page_html(rec.get("figure", {}).get("paper")) if current is not None and \
            rec.get("figure", {}).get("paper") in PAGES else None
        url = str(rec.get("permalink") or permalinks.permalink_url(versions.site_url, fid, h))
        return version_page.page(fid, h, rec, bib, current, report_page, newer, url)
    return write


def publish(versions: permalinks.Versions, tmp_site: Path, past: list[dict[str, Any]], entry: dict[str, Any] | None,
            charts: dict[str, str], log: Callable[[str], Any]) -> None:
    """Write the versions, their pages, the history and its charts into ``tmp_site`` (under the site lock)."""
    versions.publish(tmp_site, _write_page(versions))
    latest = history.read(versions.out_dir)
    if latest[: len(past)] != past or len(latest) < len(past):
        log("warning: the output's history.json is not the one this build started from; the output's is kept")
    base = latest if len(latest) >= len(past) else past
    entries = base + ([entry] if entry else [])
    assets = versions.out_dir / history.ASSETS
    if assets.is_dir():
        for p in sorted(assets.rglob("*")):
            if p.is_file() and not p.is_symlink():
                permalinks.link_or_copy(p, tmp_site / p.relative_to(versions.out_dir))
    for rel, svg in charts.items():
        target = tmp_site / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(svg, encoding="utf-8")
    if entries:
        (tmp_site / history.HISTORY).write_text(history.dumps(entries), encoding="utf-8")


def build_dates(date: str, entries: list[dict[str, Any]], versions: permalinks.Versions) -> tuple[str, ...]:
    """The dates a build's pages show that are build dates: its own, the history's and those of the
    versions it shows (`site.build` masks them all when it compares two renders)."""
    found = {date} | {str(e.get("date")) for e in entries if e.get("date")}
    found |= {str(r.get("date")) for r in versions.records.values() if r.get("date")}
    return tuple(sorted(d for d in found if d))
