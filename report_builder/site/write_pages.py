"""The generated Markdown pages of a build: one page per paper, Home, Methods, Models & data, Changes,
API and Cite and reproduce (templates under ``templates/pages/``; `site.build.render_site` calls `write_pages`).

Pitfall: every value reaches the templates through Jinja's autoescape; HTML made by our own code
(the history, tables, cards) is escaped where it is made and passed as trusted markup.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from report_builder import papers, precision
from report_builder.site import assets, htmltable, manifest, pages, setting
from report_builder.citations import cite as prov_mod
from report_builder.site.paths import guide_pages

#: Paper key -> its generated page (from `report_builder.papers`).
PAGES = {key: p.page for key, p in papers.PAPERS.items()}


def page_html(paper: str) -> str:
    """The built page (``k21.html``) of a paper's generated Markdown page (``use_directory_urls: false``)."""
    return Path(PAGES[paper]).with_suffix(".html").as_posix()


def write_pages(docs: Path, specs: list, sections: dict, tables: dict[str, pd.DataFrame], roles: Any,
                prov: dict[str, Any], changes: manifest.Changes, inline_limit: int, history_html: str = "",
                permalinks: dict[str, tuple[str, str]] | None = None, site_url: str | None = None) -> None:
    """Render every generated page into ``docs``.

    Args:
        specs, sections: the figures and their `site.build.Section`s. changes: this build vs the
            last build whose figures differed (the Home page's counts and the Changes page's table).
        history_html: the report history (`citations.history.history_html`), newest first.
        permalinks: figure id -> the current version's (site-relative permalink, published address).
        site_url: the site's checked address (the report's own citation names it), or None.
    """
    env = pages.environment()
    env.globals["slug"] = pages._slug
    permalinks = permalinks or {}
    by_paper: dict[str, list] = {p: [] for p in PAGES}
    for s in specs:
        if s.paper not in PAGES:
            raise ValueError(f"figure {s.id}: unknown paper {s.paper!r} (expected one of {list(PAGES)})")
        by_paper[s.paper].append(s)

    def write(name: str, text: str) -> None:
        (docs / name).write_text(text, encoding="utf-8")

    for paper, page in PAGES.items():
        groups: list[dict[str, Any]] = []
        for s in by_paper[paper]:
            if not groups or groups[-1]["section"] != s.section:
                groups.append({"section": s.section, "items": []})
            tmpl_name = s.template if (Path(env.loader.searchpath[0]) / s.template).is_file() else "figure.md.j2"
            groups[-1]["items"].append(env.get_template(tmpl_name).render(
                fig=s, s=sections[s.id], h="###" if s.section else "##", roles=roles))
        setting_rows = setting.setting_rows(paper, tables, roles, prov)
        setting_html = Markup(htmltable.to_html(pd.DataFrame(setting_rows, columns=list(setting.HEAD)))) if setting_rows else ""
        write(page, env.get_template("pages/paper.md.j2").render(
            paper=paper, paper_name=prov_mod.PAPER_NAMES[paper], paper_title=papers.PAPERS[paper].title,
            intro=papers.PAPERS[paper].intro_doc, groups=groups, setting=setting_html))

    figure_index = {p: [{"id": s.id, "title": s.title, "page": PAGES[p],
                         "built": sections[s.id].not_configured is None} for s in by_paper[p]]
                    for p in PAGES if by_paper[p]}
    n_nc = sum(1 for s in specs if sections[s.id].not_configured is not None)
    write("index.md", env.get_template("pages/index.md.j2").render(
        prov=prov, mixing=pages.headline_mixing(tables, roles), cancellation=pages.headline_cancellation(tables, roles),
        figure_index=figure_index, n_built=len(specs) - n_nc, n_not_configured=n_nc, changes=changes))
    write("methods.md", env.get_template("pages/methods.md.j2").render(
        prov=prov, recon_table=pages.recon_table(tables), recon_summary=pages.recon_summary(tables),
        js=assets.versions(), inline_kb=inline_limit // 1000, precision=precision))
    write("models.md", env.get_template("pages/models.md.j2").render(
        model_cards=pages.model_cards(tables, prov), dataset_cards=pages.dataset_cards(tables, prov)))

    status = {**{i: "new" for i in changes.new}, **{i: "changed" for i in changes.changed},
              **{i: "unchanged" for i in changes.unchanged}}
    prev_figs = (changes.previous or {}).get("figures", {})
    rows = [{"id": s.id, "page": PAGES[s.paper], "title": s.title,
             "status": status.get(s.id, "not configured"),
             "hash": sections[s.id].content_hash or "–",
             "previous": prev_figs.get(s.id, {}).get("hash") or "–",
             "permalink": permalinks.get(s.id, ("", ""))[0], "url": permalinks.get(s.id, ("", ""))[1]}
            for s in specs]
    write("changes.md", env.get_template("pages/changes.md.j2").render(
        changes=changes, rows=rows, history=Markup(history_html)))
    write("api.md", env.get_template("pages/api.md.j2").render(version=prov.get("report_builder_version") or ""))
    write("cite.md", env.get_template("pages/cite.md.j2").render(
        report_bib=prov_mod.report_bibtex(prov, site_url), paper_bib=prov_mod.PAPER_BIBTEX,
        rows=[r for r in rows if r["hash"] != "–"]))
    for name in guide_pages():  # standalone hand-written pages (the Guide section of the nav)
        (docs / "guide").mkdir(exist_ok=True)
        write(f"guide/{name}", pages.handwritten(f"guide/{name}"))
