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
  history's charts (earlier ones carried by hard link, each with the SHA-256 its entry records).

The earlier site is read only through `citations.earlier_site`/`readback` (validated objects); every
file is written into the new site by temporary sibling and rename (`atomic.replace_inside`).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from report_builder import atomic
from report_builder.citations import earlier_site, figure_diff, history, permalinks, readback, recipe, version_page
from report_builder.citations import cite as prov_mod
from report_builder.site import svgsafe
from report_builder.site.write_pages import PAGES, page_html


class OutputMoved(Exception):
    """Another build published into the output after this one read it: this build's pages (the versions'
    pages, the history, the Changes page) no longer tell what the output holds; `site.build.render_site`
    renders again on top of it."""


def moved(versions: permalinks.Versions, past: earlier_site.History) -> bool:
    """Whether another build published into the output since this one read its versions index and history
    (asked under the site lock, right before `publish`, which then writes the history it read: ``past``)."""
    return versions.moved() or earlier_site.read_history(versions.out_dir) != past


def figure_record(spec: Any, result: Any, content_hash: str, display: Any, roles: Any, prov: dict[str, Any],
                  inline_limit: int, counts: dict | None, versions: permalinks.Versions | None,
                  fig_dir: Path | None = None) -> tuple[dict[str, Any], str, str, str]:
    """(record, provenance.json text, cite.bib text, permalink URL) of one figure's version. ``fig_dir``:
    the figure's files, whose SHA-256 a new version's recipe records (``files``: what the content hash
    does not cover, the charts and paper_vs_ours.csv, can then be verified from the folder alone). The
    citation and URL follow the site's current ``site_url`` (`cite.version_bibtex`)."""
    site_url = versions.site_url if versions else None
    url = permalinks.permalink_url(site_url, spec.id, content_hash)

    def make() -> dict[str, Any]:
        own = {**spec.params, **result.params}
        rec = prov_mod.figure_provenance(prov, display.raw, tuple(result.models), tuple(result.datasets),
                                         own, content_hash, tuple(spec.analysis), counts)
        rec.update(recipe.recipe_fields(spec, roles, prov, display.judged(), list(rec["models"]), inline_limit,
                                        list(rec["datasets"]), own))
        rec["figure"]["title"] = result.title or spec.title
        rec["permalink"] = url  # where it was first published (the citation follows site_url as it is now)
        if fig_dir is not None:
            rec["files"] = _digests(fig_dir)
        return rec

    if versions is None:
        rec = recipe.seal(make())
        return rec, recipe.dumps(rec), prov_mod.version_bibtex(rec, site_url), url
    rec, text, bib = versions.record_for(spec, content_hash, make, page_html(spec.paper))
    return rec, text, bib, url


def _digests(fig_dir: Path) -> dict[str, str]:
    """SHA-256 of each of `recipe.RECORDED_FILES` this build wrote for the figure (read bounded, no link)."""
    found = {name: earlier_site.file_sha256(fig_dir, name) for name in recipe.RECORDED_FILES}
    return {name: digest for name, digest in found.items() if digest is not None}


def _titles(versions: permalinks.Versions) -> dict[str, dict[str, str]]:
    out = {fid: {"title": v.title} for fid, h in versions.previous_current.items()
           for v in [versions.published(fid, h)] if v is not None}
    out.update(versions.titles)
    return out


def history_entry(versions: permalinks.Versions, past: list[dict[str, Any]], prov: dict[str, Any],
                  figures_dir: Path) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """This build's history entry (None when nothing changed) and its difference charts (site path -> SVG).

    ``past``: the earlier history's valid entries; ``figures_dir``: this build's generated ``figures/``
    (the new versions' files). The earlier versions are read through `permalinks.Versions` (validated)."""
    charts: dict[str, str] = {}

    def detail(fid: str, old: str, new: str) -> dict[str, Any]:
        old_rec = versions.old_record(fid, old)
        if old_rec is None:
            return {"inputs": [], "data": {"comparable": False, "reason": "the old version is not available"}}
        old_df = versions.old_data(fid, old)
        new_df = readback.read_data(figures_dir / fid)
        out: dict[str, Any] = {"inputs": figure_diff.inputs_diff(old_rec.data, versions.records.get(fid) or {}),
                               "data": figure_diff.data_summary(old_df, new_df), "chart": None}
        try:
            spec = readback.read_json(figures_dir / fid, "spec.json", readback.CAPS["file"])
        except (OSError, readback.BadRecord):
            spec = None
        dspec = figure_diff.difference_spec(old_df, new_df, spec, fid)
        if dspec is not None:
            import vl_convert as vlc

            path = history.chart_path(fid, old, new)
            charts[path] = vlc.vegalite_to_svg(dspec)
            out["chart"] = path
            out["chart_sha256"] = hashlib.sha256(charts[path].encode("utf-8")).hexdigest()
        return out

    entry = history.make_entry(prov, past, dict(versions.current), versions.previous_current, _titles(versions), detail)
    return entry, charts


def _kept_charts(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The earlier difference charts a new site carries: each one its entry names with the SHA-256 it
    records (`history.chart_path` of the entry's validated id and hashes) -> that SHA-256."""
    return {c["chart"]: c["chart_sha256"] for e in entries for c in e.get("changed") or []
            if c.get("chart") and c.get("chart_sha256")}


def present(versions: permalinks.Versions, past: Any = None, charts: dict[str, str] | None = None) -> set[str]:
    """The permalinks the new site will hold -- every earlier version still intact (each checked here,
    once; a damaged one is reported) and this build's new ones -- and its difference charts: this build's
    (``charts``) and the earlier ones that verify (``past``: the earlier `history.read`)."""
    new = {(fid, v["hash"]) for fid, v in versions.new.items()}
    out = {permalinks.permalink(fid, h) for fid, vs in versions.all_versions().items() for h in vs
           if (fid, h) in new or versions.intact(fid, h)}
    kept = _kept_charts(past.entries) if past is not None else {}
    out |= {rel for rel, digest in kept.items() if _chart_ok(versions.out_dir, rel, digest)}
    return out | set(charts or {})


def _chart_ok(site: Path, rel: str, digest: str) -> bool:
    """Whether the earlier difference chart ``rel`` is a regular file with its recorded SHA-256 holding only
    what a chart draws (`svgsafe.is_safe`: the site serves it)."""
    try:
        data = readback.read_bytes(site, rel, readback.CAPS["file"])
    except (OSError, readback.BadRecord):
        return False
    return hashlib.sha256(data).hexdigest() == digest and svgsafe.is_safe(data)


def page_entries(past: earlier_site.History, entry: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The history the Changes page shows: the earlier valid entries and this build's (not when the earlier
    history.json is kept as it was, unreadable: `publish` adds no entry to it)."""
    kept_as_is = past.damaged is not None and past.raw_bytes is not None
    return past.entries + ([entry] if entry and not kept_as_is else [])


def _write_page(versions: permalinks.Versions) -> Callable[..., str]:
    def write(fid: str, h: str, rec: dict[str, Any], bib: str, current: str | None, newer: bool) -> str:
        report_page = page_html(rec.get("figure", {}).get("paper")) if current is not None and \
            rec.get("figure", {}).get("paper") in PAGES else None
        url = permalinks.permalink_url(versions.site_url, fid, h)  # the current site_url, whenever published
        return version_page.page(fid, h, rec, bib, current, report_page, newer, url)
    return write


def publish(versions: permalinks.Versions, tmp_site: Path, past: earlier_site.History, entry: dict[str, Any] | None,
            charts: dict[str, str]) -> None:
    """Write the versions, their pages, the history and its charts into ``tmp_site`` (under the site lock, once
    the caller has found that no other build published since this one read the output: `moved`).

    The history's entries (``past``, read at the start) are written back as they were, this build's appended;
    an unreadable one is kept as it was (no entry added). Earlier charts are carried only with their recorded
    SHA-256 (`earlier_site.carry`)."""
    versions.publish(tmp_site, _write_page(versions))
    for rel, digest in _kept_charts(past.entries).items():
        if _chart_ok(versions.out_dir, rel, digest):
            earlier_site.carry(versions.out_dir, rel, tmp_site, sha256=digest)
    for rel, svg in charts.items():
        if not (tmp_site / rel).exists():
            atomic.replace_inside(tmp_site, tmp_site / rel, svg)
    if past.damaged is not None:
        if past.raw_bytes is not None:  # kept as it was: this build's entry is not added to it
            atomic.replace_inside(tmp_site, tmp_site / history.HISTORY, past.raw_bytes)
            return
        entries = [entry] if entry else []
    else:
        entries = past.raw + ([entry] if entry else [])
    if entries:
        atomic.replace_inside(tmp_site, tmp_site / history.HISTORY, history.dumps(entries))


def build_dates(date: str, entries: list[dict[str, Any]], versions: permalinks.Versions) -> tuple[str, ...]:
    """The dates a build's pages show that are build dates: its own, the history's and those of the
    versions it shows (`site.build` masks them all when it compares two renders)."""
    found = {date} | {str(e.get("date")) for e in entries if e.get("date")}
    found |= {str(r.get("date")) for r in versions.records.values() if r.get("date")}
    return tuple(sorted(d for d in found if d))
