"""The report history: one entry per build that changed anything, kept in the site as ``history.json``.

Append-only: a build reads the previous site's history, appends its entry (`make_entry`; none when no
figure was added, changed or removed and no model or dataset changed) and the new site carries the
whole list, with each entry's difference charts under ``history/<entry id>/`` (never rewritten). An
entry holds the date, the report_builder version and commit, the models (source, fingerprint, hub
snapshot), the datasets (hash, size), the library versions, device and dtype, and the figures added,
changed and removed with their old and new permalinks; a changed figure also has the inputs that
differ between its two recipes (`figure_diff.inputs_diff`), the numeric change of its data
(`figure_diff.data_summary`) and, for line and heatmap figures, a difference chart. The Changes page
(`history_html`) shows it newest first.

The previous history is read back through `earlier_site.read_history` (bounded, every entry checked:
its figure ids registered, hashes of their form, permalinks and chart paths the ones they give): a
malformed entry is left out of the Changes page with one warning and kept in the file; an unreadable
file is kept as it was, and this build adds no entry to it. A difference chart is carried into the next
site only with the SHA-256 its entry records (``chart_sha256``).

Pitfall: every string here may come from a model, dataset or config name: `history_html` escapes
everything it prints (it is inserted as trusted HTML).
"""
from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any, Callable

from report_builder.citations import earlier_site, figure_diff
from report_builder.citations.recipe import canonical
from report_builder.citations.version_files import HISTORY_ASSETS as ASSETS
from report_builder.citations.version_files import chart_path, permalink  # noqa: F401 - history.chart_path

HISTORY = earlier_site.HISTORY
FORMAT = "report_builder report history 1"


def read(site: Path, log: Callable[[str], Any] = print) -> earlier_site.History:
    """A site's history (`earlier_site.History`: its valid entries oldest first, every entry as read);
    one warning line when the file cannot be read (kept as it was, or -- a link, a special or an
    oversized file -- replaced) or entries are malformed (left out of the Changes page)."""
    past = earlier_site.read_history(Path(site))
    where = Path(site) / HISTORY
    if past.damaged is not None:
        log(f"warning: {where} cannot be read ({past.damaged}): " + (
            "it is kept as it is and this build adds no entry to it (repair or remove it to resume the history)"
            if past.raw_bytes is not None else "it cannot be kept; the history starts again with this build"))
    elif past.skipped:
        log(f"warning: {where}: " + "; ".join(f"entry {k} {why}" for k, why in past.skipped.items())
            + ": left out of the Changes page, kept in the file")
    return past


def _models(prov: dict[str, Any]) -> dict[str, Any]:
    return {str(m): {k: r.get(k) for k in ("source", "fingerprint", "snapshot", "revision")}
            for m, r in (prov.get("models") or {}).items()}


def _datasets(prov: dict[str, Any]) -> dict[str, Any]:
    return {str(d): {k: r.get(k) for k in ("hash", "n")} for d, r in (prov.get("datasets") or {}).items()}


def make_entry(prov: dict[str, Any], previous: list[dict[str, Any]], current: dict[str, str],
               before: dict[str, str], titles: dict[str, dict[str, str]],
               changed_detail: Callable[[str, str, str], dict[str, Any]]) -> dict[str, Any] | None:
    """This build's history entry, or None when it changed nothing.

    Args:
        prov: the build provenance. previous: the previous entries.
        current: this build's figure id -> content hash; before: the previous site's.
        titles: id -> {"title", "paper", "page"} of this build's figures (and the previous site's).
        changed_detail: ``(id, old hash, new hash)`` -> ``inputs``, ``data`` and ``chart`` of a changed figure.
    """
    models, datasets = _models(prov), _datasets(prov)
    last = previous[-1] if previous else {}
    build_inputs = figure_diff.inputs_diff({"models": last.get("models") or {}, "datasets": last.get("datasets") or {}},
                                           {"models": models, "datasets": datasets}) if previous else []
    added = [_fig(fid, h, titles) for fid, h in current.items() if fid not in before]
    removed = [_fig(fid, h, titles) for fid, h in before.items() if fid not in current]
    changed = []
    for fid, h in current.items():
        old = before.get(fid)
        if old is not None and old != h:
            changed.append({**_fig(fid, h, titles), "old": old, "new": h, "old_permalink": permalink(fid, old),
                            "new_permalink": permalink(fid, h), **changed_detail(fid, old, h)})
            del changed[-1]["hash"], changed[-1]["permalink"]
    if not (added or removed or changed or build_inputs):
        return None
    libs = {**(prov.get("libraries") or {}), "report_builder": prov.get("report_builder_version")}
    entry = {"date": prov.get("date"), "report_builder_version": prov.get("report_builder_version"),
             "git_commit": prov.get("git_commit"), "preset": prov.get("preset"), "device": prov.get("device"),
             "dtype": prov.get("dtype"), "models": models, "datasets": datasets,
             "libraries": {k: v for k, v in sorted(libs.items()) if v}, "inputs_changed": build_inputs,
             "added": added, "changed": changed, "removed": removed}
    entry = json.loads(canonical(entry))
    entry["id"] = hashlib.sha256(canonical(entry).encode("utf-8")).hexdigest()[:12]
    return entry


def _fig(fid: str, h: str, titles: dict[str, dict[str, str]]) -> dict[str, Any]:
    t = titles.get(fid) or {}
    return {"id": fid, "title": t.get("title", ""), "hash": h, "permalink": permalink(fid, h)}


def dumps(entries: list[dict[str, Any]]) -> str:
    return json.dumps({"format": FORMAT, "entries": entries}, indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the Changes page


def _e(value: Any) -> str:
    return html.escape("–" if value is None else str(value), quote=True)


def _code(value: Any) -> str:
    return f"<code>{_e(value)}</code>"


def _link(path: str, text: str, present: bool) -> str:
    """A link to a version page (``path`` is a permalink), or the plain text when the version is gone."""
    if not present:
        return f'{_code(text)} <span class="rb-muted">(removed)</span>'
    return f'<a href="{_e(path + "index.html")}">{_code(text)}</a>'


def _inputs_list(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>No recorded input differs (the difference comes from the code or the data it computes).</p>"
    items = "".join(f"<li><strong>{_e(r['kind'])}</strong>: {_code(figure_diff.input_name(r))} {_code(figure_diff._short(r['old']))}"
                    f" → {_code(figure_diff._short(r['new']))}</li>" for r in rows)
    return f"<ul class=\"rb-inputs\">{items}</ul>"


def _changed_html(c: dict[str, Any], present: set[str]) -> str:
    old_p, new_p = c["old_permalink"], c["new_permalink"]
    head = (f'<h4 id="{_e(c["id"])}-{_e(c["new"])}">{_code(c["id"])} {_e(c["title"])}: '
            f'{_link(old_p, c["old"], old_p in present)} → {_link(new_p, c["new"], new_p in present)}</h4>')
    data = c.get("data") or {}
    imgs = ""
    if old_p in present and new_p in present:
        imgs = (f'<div class="rb-side-by-side"><figure><img src="{_e(old_p)}chart.png" alt="old version {_e(c["old"])}" '
                f'loading="lazy"><figcaption>old {_code(c["old"])}</figcaption></figure><figure><img src="{_e(new_p)}'
                f'chart.png" alt="new version {_e(c["new"])}" loading="lazy"><figcaption>new {_code(c["new"])}'
                f'</figcaption></figure></div>')
    chart = (f'<figure class="rb-difference"><img src="{_e(c["chart"])}" alt="difference chart of {_e(c["id"])}" '
             f'loading="lazy"><figcaption>Difference chart (new − old)</figcaption></figure>') \
        if c.get("chart") and c["chart"] in present else ""
    return (f"{head}<p><strong>Inputs that differ</strong></p>{_inputs_list(c.get('inputs') or [])}"
            f"<p><strong>Data</strong>: {_e(figure_diff.describe_data(data)) if data else 'not compared'}</p>{imgs}{chart}")


def _list(items: list[dict[str, Any]], present: set[str]) -> str:
    return "<ul>" + "".join(f"<li>{_code(f['id'])} {_e(f['title'])}: {_link(f['permalink'], f['hash'], f['permalink'] in present)}"
                            f"</li>" for f in items) + "</ul>"


def entry_html(entry: dict[str, Any], number: int, present: set[str]) -> str:
    """One history entry as an HTML block (no blank lines: one raw-HTML block of the Markdown page)."""
    models = "".join(f"<li>{_code(m)}: source {_code(r.get('source'))}, fingerprint {_code(r.get('fingerprint'))}"
                     + (f", hub snapshot {_code(r.get('snapshot'))}" if r.get("snapshot") else "") + "</li>"
                     for m, r in (entry.get("models") or {}).items())
    data = "".join(f"<li>{_code(d)}: hash {_code(r.get('hash'))}, {_e(r.get('n'))} sequences</li>"
                   for d, r in (entry.get("datasets") or {}).items())
    libs = ", ".join(f"{_e(k)} {_e(v)}" for k, v in (entry.get("libraries") or {}).items())
    parts = [f'<section class="rb-history-entry" id="build-{_e(entry.get("id"))}">',
             f"<h3>Build {number}: {_e(entry.get('date'))}</h3>",
             f"<p>report_builder {_e(entry.get('report_builder_version'))}, commit {_code(entry.get('git_commit'))}, "
             f"preset {_e(entry.get('preset'))}, {_e(entry.get('device'))} / {_e(entry.get('dtype'))}. "
             f"{len(entry.get('added') or [])} added, {len(entry.get('changed') or [])} changed, "
             f"{len(entry.get('removed') or [])} removed.</p>",
             f"<details><summary>Models, datasets and libraries of this build</summary><ul>{models}</ul><ul>{data}</ul>"
             f"<p>{libs}</p></details>"]
    if entry.get("inputs_changed"):
        parts.append(f"<p><strong>Inputs changed since the previous build</strong></p>{_inputs_list(entry['inputs_changed'])}")
    if entry.get("changed"):
        parts.append("".join(_changed_html(c, present) for c in entry["changed"]))
    if entry.get("added"):
        parts.append(f"<p><strong>Added</strong></p>{_list(entry['added'], present)}")
    if entry.get("removed"):
        parts.append(f"<p><strong>Removed</strong> (their versions stay at their permalinks)</p>"
                     f"{_list(entry['removed'], present)}")
    parts.append("</section>")
    return "".join(parts)


def history_html(entries: list[dict[str, Any]], present: set[str]) -> str:
    """The whole history, newest first (``present``: the permalinks and difference charts the new site
    holds)."""
    if not entries:
        return "<p>No build has been recorded yet.</p>"
    return "\n\n".join(entry_html(e, k + 1, present) for k, e in reversed(list(enumerate(entries))))
