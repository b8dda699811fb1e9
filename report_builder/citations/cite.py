"""Per-figure provenance (models, data, parameters, software, error bound) and citations (BibTeX).

The build-wide ``provenance`` dict is filtered to the models and datasets a figure used; its max
reconstruction error is read from ``recon_errors`` for those models (and datasets, when given).
Pitfall: a figure that names no models gets the build's full lists, not empty ones.
"""
from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from report_builder import papers
from report_builder.citations.version_files import permalink_url

#: Paper key -> BibTeX entry and short name, from the one table of paper facts.
PAPER_BIBTEX = {key: p.bibtex for key, p in papers.PAPERS.items()}
PAPER_NAMES = {key: p.short_name for key, p in papers.PAPERS.items()}


def max_recon_error(tables: dict[str, pd.DataFrame], models: tuple[str, ...] | list[str],
                    datasets: tuple[str, ...] | list[str] = ()) -> float | None:
    """Largest ``max_rel_error`` over the given models (and datasets, if any match); None if unknown."""
    rec = tables.get("recon_errors")
    if rec is None or rec.empty or "max_rel_error" not in rec:
        return None
    sel = rec
    if models:
        sel = sel[sel["model"].isin(list(models))]
    if datasets and "dataset" in sel and sel["dataset"].isin(list(datasets)).any():
        sel = sel[sel["dataset"].isin(list(datasets))]
    if sel.empty:
        return None
    value = float(sel["max_rel_error"].max())
    return None if math.isnan(value) else value


# K24 tables computed in one pass over the same sequences; k24_ctx records how many per layer.
_K24_PASS = ("k24_ctx", "k24_ffamp_pairs", "k24_ffamp_base", "k24_res_norms", "k24_ln_dims")
_EXAMPLE_TABLES = ("k21_maps", "k24_maps")


def sequences_used(tables: dict[str, pd.DataFrame], analysis: tuple[str, ...], models: tuple[str, ...],
                   dataset: str, memo: dict | None = None) -> dict[str, int]:
    """How many sequences of ``dataset`` each model's results in ``analysis`` were computed from.

    Counted from the result tables themselves (distinct ``seq``; for the K24 pass the largest
    ``n_seqs`` of ``k24_ctx``), never from the configuration, so a figure says what it used.
    ``memo`` (a dict kept for one set of tables, e.g. one site build) keeps the per-model counts of
    each (table, dataset) once counted.
    """
    out: dict[str, int] = {}
    for name in analysis:
        col, src = ("n_seqs", "k24_ctx") if name in _K24_PASS else ("seq", name)
        key = (src, col, dataset)
        per_model = memo.get(key) if memo is not None else None
        if per_model is None:
            per_model = _per_model_counts(tables.get(src), col, dataset)
            if memo is not None:
                memo[key] = per_model
        for model, n in per_model.items():
            if not models or model in models:
                out[model] = max(out.get(model, 0), n)
    return out


def _per_model_counts(t: pd.DataFrame | None, col: str, dataset: str) -> dict[str, int]:
    if t is None or t.empty or col not in t.columns or "dataset" not in t.columns:
        return {}
    sel = t[t["dataset"] == dataset]
    return {str(model): int(grp[col].max()) if col == "n_seqs" else int(grp["seq"].nunique())
            for model, grp in sel.groupby("model", sort=True)}


def _examples_used(tables: dict[str, pd.DataFrame], analysis: tuple[str, ...], models: tuple[str, ...]) -> int | None:
    counts = []
    for name in analysis:
        t = tables.get(name)
        if name in _EXAMPLE_TABLES and t is not None and not t.empty and "example" in t.columns:
            sel = t[t["model"].isin(list(models))] if models else t
            counts.append(int(sel["example"].nunique()))
    return max(counts) if counts else None


def figure_provenance(prov: dict[str, Any], tables: dict[str, pd.DataFrame], models: tuple[str, ...],
                      datasets: tuple[str, ...], params: dict[str, Any], content_hash: str,
                      analysis: tuple[str, ...] = (), memo: dict | None = None) -> dict[str, Any]:
    """The provenance record of one figure (also written as ``figures/<id>/provenance.json``).

    ``analysis`` names the result tables the figure reads; each dataset's ``n`` is then the number
    of sequences those results were computed from (`sequences_used`; one number, or one per model
    when they differ), and map figures record how many ``examples`` they show.
    """
    all_models = prov.get("models", {}) or {}
    all_data = prov.get("datasets", {}) or {}
    used_m = {m: all_models.get(m, {}) for m in (models or tuple(all_models))}
    examples = _examples_used(tables, analysis, tuple(used_m))
    default_d = () if examples is not None and not any(
        a not in _EXAMPLE_TABLES and a != "models" for a in analysis) else tuple(all_data)
    used_d = {}
    for d in (datasets or default_d):
        rec_d = dict(all_data.get(d, {}))
        counts = sequences_used(tables, analysis, tuple(used_m), d, memo)
        if counts:
            rec_d["n"] = next(iter(counts.values())) if len(set(counts.values())) == 1 else counts
        used_d[d] = rec_d
    merged = {**(prov.get("params") or {}), **params}
    return {
        "models": used_m,
        "datasets": used_d,
        **({"examples": examples} if examples is not None else {}),
        "params": merged,
        "report_builder_version": prov.get("report_builder_version"),
        "git_commit": prov.get("git_commit"),
        "torch_version": prov.get("torch_version"),
        "transformers_version": prov.get("transformers_version"),
        "device": prov.get("device"),
        "dtype": prov.get("dtype"),
        **({"error_bound": prov["error_bound"], "chunk_rule": prov.get("chunk_rule")} if "error_bound" in prov else {}),
        "max_reconstruction_error": max_recon_error(tables, tuple(used_m), tuple(used_d)),
        "date": prov.get("date"),
        "preset": prov.get("preset"),
        "content_hash": content_hash,
    }


def _code(value: Any) -> str:
    return f"<code>{html.escape(str(value))}</code>"


def provenance_html(rec: dict[str, Any]) -> str:
    """A collapsible ``<details class="rb-provenance">`` block (raw HTML, one table)."""
    rows: list[tuple[str, str]] = []
    for name, m in rec["models"].items():
        bits = [html.escape(str(name))]
        if m.get("class_name"):
            bits.append(html.escape(str(m["class_name"])))
        if m.get("source"):
            bits.append("from " + _code(m["source"]))
        if m.get("revision"):
            bits.append("revision " + _code(m["revision"]))
        if m.get("snapshot"):
            bits.append("hub snapshot " + _code(m["snapshot"]))
        if m.get("fingerprint"):
            bits.append("fingerprint " + _code(m["fingerprint"]))
        rows.append(("Model", ", ".join(bits)))
    for name, d in rec["datasets"].items():
        bits = [html.escape(str(name))]
        if d.get("hash"):
            bits.append("hash " + _code(d["hash"]))
        n = d.get("n")
        if isinstance(n, dict):
            bits.append(", ".join(f"{html.escape(str(v))} sequences ({html.escape(str(m))})" for m, v in n.items()))
        elif n is not None:  # a record read back may hold any text here: escaped like every other field
            bits.append(f"{html.escape(str(n))} sequences")
        rows.append(("Dataset", ", ".join(bits)))
    if rec.get("examples") is not None:
        rows.append(("Examples", f"{rec['examples']} example sequence(s) shown"))
    shown = {k: v for k, v in rec["params"].items() if v not in ([], {}, "", None)}  # an empty value says nothing
    if shown:
        rows.append(("Parameters", "; ".join(f"{html.escape(str(k))} = {_code(v)}" for k, v in shown.items())))
    err = rec["max_reconstruction_error"]
    bound = rec.get("error_bound", 1e-4)  # a record from before the precision modes: float32's
    rows.append(("Max reconstruction error", "not recorded" if err is None else
                 f"{err:.2e} (relative, bound {float(bound):.1e} of {html.escape(str(rec.get('dtype')))})"))
    rows.append(("report_builder", f"{html.escape(str(rec['report_builder_version']))}, commit {_code(rec['git_commit'])}"))
    rows.append(("torch / transformers", f"{html.escape(str(rec['torch_version']))} / {html.escape(str(rec['transformers_version']))}"))
    rows.append(("Device, dtype", f"{html.escape(str(rec['device']))}, {html.escape(str(rec['dtype']))}"
                 + (f" (pair GEMMs; chunk rule {html.escape(str(rec['chunk_rule']))})" if rec.get("chunk_rule") else "")))
    rows.append(("Preset, date", f"{html.escape(str(rec['preset']))}, {html.escape(str(rec['date']))}"))
    rows.append(("Content hash", _code(rec["content_hash"])))
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)
    return (f'<details class="info rb-provenance"><summary>Provenance</summary>'
            f'<div class="rb-table-wrap"><table class="rb-table rb-kv"><tbody>{body}</tbody></table></div></details>')


_BIB_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\textbraceleft{}", "}": r"\textbraceright{}", "&": r"\&",
                "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _bib_escape(text: str) -> str:
    """Text for a braced BibTeX field: every TeX special escaped, braces as commands (BibTeX counts
    even an escaped ``\\{``, so an unbalanced brace in the text could end the field early)."""
    return "".join(_BIB_SPECIAL.get(c, c) for c in str(text))


def bib_url(url: str) -> str:
    """A URL for a BibTeX ``url`` field and ``\\url{}``: characters that would end or break the braced
    field (braces, backslash, quotes, angle brackets, whitespace, control and non-ASCII characters)
    percent-encoded; the URL's own ``%``/``#`` kept (``url`` fields are read verbatim)."""
    from urllib.parse import quote

    return quote(str(url), safe="/:?#[]@!$&'()*+,;=-._~%")


def figure_bibtex(fig_id: str, title: str, paper: str, content_hash: str, prov: dict[str, Any],
                  reproduces: str = "", url: str | None = None) -> str:
    """BibTeX for one figure version: the id, the content hash, the report version and the version's
    permalink ``url`` (the published address when ``site_url`` is set, else the site-relative one)."""
    date = str(prov.get("date") or "")
    year = date[:4] if date[:4].isdigit() else "n.d."
    commit = _bib_escape(str(prov.get("git_commit") or "unknown")[:12])
    version, preset = _bib_escape(prov.get("report_builder_version")), _bib_escape(prov.get("preset"))
    fig_id, content_hash = _bib_escape(fig_id), _bib_escape(content_hash)
    link = bib_url(url) if url else None
    where = (f"\\url{{{link}}}" if link and "://" in link else
             f"report\\_builder report, figure {fig_id}" + (f", permalink {_bib_escape(url)}" if url else ""))
    return (
        f"@misc{{report_builder:{fig_id}:{content_hash},\n"
        f"  title        = {{{{report\\_builder}}: {_bib_escape(title)} ({fig_id})}},\n"
        f"  author       = {{{{report\\_builder contributors}}}},\n"
        f"  year         = {{{year}}},\n"
        f"  howpublished = {{{where}}},\n"
        + (f"  url          = {{{link}}},\n" if link else "")
        + f"  note         = {{Figure {fig_id}, version {content_hash} (content hash), report\\_builder "
        f"{version} (commit {commit}, preset {preset}); "
        f"{_relation(paper, reproduces)}; verify with report-builder reproduce}},\n"
        f"}}"
    )


def version_bibtex(rec: dict[str, Any], site_url: str | None = None) -> str:
    """A version's ``cite.bib``, made from its record (``provenance.json``: id, content hash, title, paper,
    date, code) and the site's *current* ``site_url``: the version's published address
    ``<site_url>figures/<id>/<hash>/`` when there is one (whenever the version was published), else its
    relative permalink; the paper's entry follows. Derived presentation, like the version's page: made
    again by every build and by ``report-builder cite``, never covered by the content hash (docs/cite.md).
    Every value from the record is escaped for BibTeX; ``rec`` must carry a registered id and a hash of
    its form (`readback.check_record`)."""
    fig = rec.get("figure") or {}
    fig_id, h = str(fig.get("id")), str(rec.get("content_hash"))
    paper = str(fig.get("paper") or "")
    url = permalink_url(site_url, fig_id, h)
    try:
        from report_builder.figures.registry import figure

        reproduces = figure(fig_id).reproduces
    except (ImportError, KeyError):
        reproduces = ""
    bib = figure_bibtex(fig_id, str(fig.get("title") or fig_id), paper, h, rec, reproduces, url=url)
    paper_bib = PAPER_BIBTEX.get(paper)
    return bib + ("\n\n" + paper_bib if paper_bib else "") + "\n"


def _relation(paper: str, reproduces: str) -> str:
    name = PAPER_NAMES.get(paper, paper)
    if not reproduces:
        return _bib_escape(f"reproduces {name}")
    from report_builder.figures.spec import FINDING

    if reproduces.startswith(FINDING):
        return _bib_escape(f"{reproduces} ({name})")
    return _bib_escape(f"reproduces {reproduces} of {name}")


def report_bibtex(prov: dict[str, Any], url: str | None = None) -> str:
    """BibTeX for the report as a whole; ``url``: the site's ``site_url`` (checked), its address when set."""
    date = str(prov.get("date") or "")
    year = date[:4] if date[:4].isdigit() else "n.d."
    where = (f"  howpublished = {{\\url{{{url}}}}},\n  url          = {{{url}}},\n") if url else ""
    return (
        "@misc{report_builder,\n"
        "  title        = {{report\\_builder}: Exact Token-to-Token Decomposition of Transformer Layers, "
        "a Reproduction of Kobayashi et al. (EMNLP 2021, ICLR 2024)},\n"
        "  author       = {{report\\_builder contributors}},\n"
        f"  year         = {{{year}}},\n"
        f"{where}"
        f"  note         = {{report\\_builder {prov.get('report_builder_version')}, commit "
        f"{str(prov.get('git_commit') or 'unknown')[:12]}, preset {prov.get('preset')}, built {date}}},\n"
        "}"
    )


def cite_html(bibtex: str, paper_bibtex: str | None, url: str | None = None, href: str | None = None) -> str:
    """The "Cite this figure" box: the version's permalink ``url`` (linked to ``href``, its page in this
    site), its BibTeX and the paper's, each with a copy button."""
    parts = ['<details class="quote rb-cite"><summary>Cite this figure</summary>']
    if url:
        href = html.escape(href or (url if "://" in url else url + "index.html"), quote=True)
        parts.append(f'<p>This version\'s permalink (it never changes; a later build adds a new version beside it): '
                     f'<a class="rb-permalink" href="{href}"><code>{html.escape(url)}</code></a></p>')
    parts += ["<p>This figure (the id and content hash pin the exact numbers; "
              "<code>report-builder reproduce</code> rebuilds it from its provenance and compares):</p>",
              f'<pre class="rb-bibtex"><code>{html.escape(bibtex)}</code></pre>']
    if paper_bibtex:
        parts += ["<p>The paper it reproduces:</p>",
                  f'<pre class="rb-bibtex"><code>{html.escape(paper_bibtex)}</code></pre>']
    parts.append("</details>")
    return "".join(parts)
