"""The small standalone page of one figure version (``figures/<id>/<hash>/index.html``).

It shows the version's chart (``chart.svg`` through ``<img>``: no script of the drawing can run),
its downloads, its provenance, its citation, the command that verifies it, and how it relates to the
report: the current version, a newer version exists, or the figure is no longer in the report. No
script, no external resource, inline CSS: it works from ``file://`` and stands alone when the
folder is downloaded. Every value from the recipe is escaped (model and dataset names are untrusted).
"""
from __future__ import annotations

import html
from typing import Any

from report_builder.citations.cite import provenance_html

EARLIER = "earlier"
"""`page`'s ``newer`` when the current version was created before this one (a rebuild went back to it)."""

ROOT = "../../../"
"""From ``figures/<id>/<hash>/`` to the site root."""

_CSS = ("body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;max-width:60rem;margin:2rem auto;"
        "padding:0 1rem;color:#222;line-height:1.5}code,pre{font-family:ui-monospace,monospace;font-size:.9em}"
        "pre{background:#f5f5f5;padding:.8rem;overflow-x:auto;white-space:pre-wrap}"
        ".rb-status{padding:.6rem 1rem;border-left:4px solid #3f51b5;background:#eef}"
        ".rb-status.rb-old{border-color:#e65100;background:#fff3e0}img.rb-chart{max-width:100%;height:auto;"
        "border:1px solid #ddd;background:#fff}table{border-collapse:collapse}td{border-top:1px solid #ddd;"
        "padding:.25rem .6rem;vertical-align:top}@media (prefers-color-scheme:dark){body{background:#1e1e1e;"
        "color:#ddd}pre{background:#2a2a2a}.rb-status{background:#223}.rb-status.rb-old{background:#3a2a1a}"
        "a{color:#8ab4f8}}")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def page(fig_id: str, content_hash: str, rec: dict[str, Any], bib: str, current: str | None,
         report_page: str | None, newer: bool, url: str) -> str:
    """The version page. ``current``: this build's hash of the figure (None: not in the report);
    ``report_page``: the page file showing the figure (``k21.html``); ``newer``: another version is
    current (True: created after this one; `EARLIER`: created before it, as when a model swapped back
    made an earlier version current again); ``url``: the version's permalink (published address or
    relative)."""
    fig = rec.get("figure") or {}
    title = fig.get("title") or fig_id
    here = f"{ROOT}{report_page}#{fig_id}" if report_page else None
    if current == content_hash:
        status = (f'<p class="rb-status">This is the current version of <code>{_e(fig_id)}</code> in this report'
                  + (f' (<a href="{_e(here)}">see it in the report</a>)' if here else "") + ".</p>")
    elif newer == EARLIER:
        status = (f'<p class="rb-status rb-old"><strong>An earlier version is current</strong>: '
                  f'<a href="../{_e(current)}/index.html"><code>{_e(current)}</code></a>, created before this one'
                  + (f' (<a href="{_e(here)}">the current figure in the report</a>)' if here else "")
                  + f'. This version stays here unchanged; <a href="{ROOT}changes.html">Changes</a> says what changed.</p>')
    elif newer:
        status = (f'<p class="rb-status rb-old"><strong>A newer version exists</strong>: '
                  f'<a href="../{_e(current)}/index.html"><code>{_e(current)}</code></a>'
                  + (f' (<a href="{_e(here)}">the current figure in the report</a>)' if here else "")
                  + f'. This version stays here unchanged; <a href="{ROOT}changes.html">Changes</a> says what changed.</p>')
    else:
        status = (f'<p class="rb-status rb-old">This figure is not part of the current report; this version stays '
                  f'here unchanged (<a href="{ROOT}changes.html">Changes</a>).</p>')
    downloads = " ".join(f'<a href="{n}" download>{label}</a>' for n, label in (
        ("chart.svg", "SVG"), ("chart.png", "PNG"), ("data.csv", "data (CSV)"), ("spec.json", "Vega-Lite spec (JSON)"),
        ("provenance.json", "provenance (JSON)"), ("cite.bib", "BibTeX")))
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<link rel=\"icon\" href=\"data:,\">"  # no icon: a browser asks the host for no favicon.ico (a 404)
        f"<title>{_e(fig_id)} {_e(content_hash)}: {_e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<p><a href=\"{ROOT}index.html\">report_builder report</a> › figure <code>{_e(fig_id)}</code> › version "
        f"<code>{_e(content_hash)}</code></p>\n"
        f"<h1>{_e(title)}</h1>\n{status}\n"
        f"<p>Permalink: <code>{_e(url)}</code>. Content hash <code>{_e(content_hash)}</code> (SHA-256 of the "
        f"spec and the data); the chart, data, spec and provenance files never change (this page and "
        f"<code>cite.bib</code> follow the site's address).</p>\n"
        f"<p><a href=\"chart.svg\" title=\"the chart at full size\"><img class=\"rb-chart\" src=\"chart.svg\" "
        f"alt=\"{_e(title)} ({_e(fig_id)}, version {_e(content_hash)})\"></a><br><small>Shrunk to the window: "
        f"<a href=\"chart.svg\">open the chart at full size</a>.</small></p>\n"
        f"<p>Download: {downloads}</p>\n"
        "<h2>Cite this version</h2>\n"
        f"<pre><code>{_e(bib.strip())}</code></pre>\n"
        "<h2>Verify it</h2>\n"
        "<p>Check this folder's files against its recipe, then rebuild the figure from the recipe "
        "(<code>provenance.json</code>: the models by source and weights fingerprint, the datasets by hash, every "
        "parameter) and compare: identical, or equal within the published precision (another device or library "
        "version), else the difference; from a copy of the site or with this folder downloaded:</p>\n"
        f"<pre><code>report-builder reproduce {_e(f'figures/{fig_id}/{content_hash}/')}</code></pre>\n"
        "<h2>Provenance</h2>\n"
        f"{provenance_html(rec).replace('<details class=', '<details open class=', 1)}\n"
        "</body></html>\n")
