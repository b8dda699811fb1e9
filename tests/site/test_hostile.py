"""A build whose configured strings are hostile — dataset text, dataset name, domain and licence, model
names, the K21 example sentences and a `site_url` full of legal-but-odd URL characters — opened in
headless Chromium: no dialog fires, no injected script, link or image exists, the text is shown
literally, every canonical link is the configured address; the build's terminal output shows a
bidirectional override escaped.

Chromium and Playwright as in tests/site/test_browser.py (never skipped under CI=true)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml


pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MODEL_NAME = '<script>alert("m")</script><img src=x onerror=alert(1)>[x](javascript:alert(1)){{ 7*7 }}]]>{bib'
DATA_NAME = '<img src=y onerror=alert(2)>[d](javascript:alert(2)) {{ 7*7 }} ]]> {unbalanced'
RTL_NAME = "rtl\u202egnirts\u2066-model"
"""A second model named with a right-to-left override: shown text on the site, escaped on the terminal."""
SITE_URL = "https://example.org/r%22%3E%3Cscript%3Ealert%289%29%3C/script%3E/(x)!$*+,;=:@~/"
"""Legal URL characters only (`config.check_site_url`); what would be markup is percent-encoded."""
DOMAIN = '<img src=z onerror=alert(6)>{{ 7*7 }} [d](javascript:alert(6))'
LICENCE = '</td><script>alert(10)</script> "quoted" & {unbalanced'
EXAMPLE = ["<script>alert(7)</script> the man went to the store .",
           "[x](javascript:alert(8)) he bought <b>milk</b> ."]
LINES = [
    "<script>alert(3)</script> the film is good .",
    "<img src=x onerror=alert(4)> a fine cast and a long ending .",
    "[x](javascript:alert(5)) the plot is dull but the music is great .",
    "{{ 7*7 }} a great ending ]]> indeed , said the critic .",
    "an { unbalanced brace and a } closing one in a review .",
    "a plain sentence about the same film and the same cast .",
]


INJECTED = """() => ({
    js_links: [...document.querySelectorAll('a[href]')].filter(a => a.href.trim().toLowerCase().startsWith('javascript:')).length,
    injected_img: document.querySelectorAll('img[src="x"], img[src="y"]').length,
    injected_script: [...document.querySelectorAll('script')].filter(s => s.textContent.includes('alert(')).length,
    tooltip_img: document.querySelectorAll('#vg-tooltip-element img, #vg-tooltip-element script').length,
})"""
"""What a page would show if hostile text had become markup: javascript: links, the payloads' images and
scripts, markup inside a chart's tooltip (each count must be 0)."""

@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    from tests.test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("hostile")
    model = tiny_bert_dir(tmp / "models" / "tiny-evil", 0)
    data = tmp / "hostile.txt"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    cfg = {
        "models": [{"name": MODEL_NAME, "source": str(model), "role": "primary_encoder"},
                   {"name": RTL_NAME, "source": str(model), "role": "variant"}],
        "datasets": [{"id": "hostile", "path": str(data), "name": DATA_NAME, "n": 6, "k24_n": 3, "max_length": 32,
                      "domain": DOMAIN, "licence": LICENCE}],
        "k21": {"example": EXAMPLE},
        "k24": {"top_k": 5, "examples": 2},
        "site_url": SITE_URL,
        "cache_dir": str(tmp / "cache"), "out_dir": str(tmp / "site"),
    }
    p = tmp / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "report_builder", "build", "--config", str(p), "--no-progress",
                        "--threads", "1"], capture_output=True, text=True, env=env, timeout=900, cwd=tmp)
    assert r.returncode == 0, r.stderr[-4000:]
    (tmp / "terminal.txt").write_text(r.stdout + "\n" + r.stderr, encoding="utf-8")
    return tmp / "site"


def _visit(browser, site: Path, names: list[str], on_page=None) -> tuple[list[str], dict[str, str]]:
    """Serve ``site`` on 127.0.0.1 and open each page in a fresh browser context: (what went wrong, each
    page's body text). Wrong: a dialog opened, a count of `INJECTED` above 0, and what ``on_page(name,
    page)`` (run first, after the page loaded) returns."""
    from report_builder.site.serve import make_server

    server = make_server(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    failures, texts = [], {}
    try:
        for name in names:
            ctx = browser.new_context()
            page = ctx.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{base}/{name}", wait_until="load")
            if on_page is not None:
                failures += on_page(name, page)
            bad = page.evaluate(INJECTED)
            if dialogs:
                failures.append(f"{name}: dialog(s) {dialogs}")
            failures += [f"{name}: {k} = {v}" for k, v in bad.items() if v]
            texts[name] = page.inner_text("body")
            ctx.close()
    finally:
        server.shutdown()
        server.server_close()
    return failures, texts


@pytest.fixture(scope="module")
def visited(hostile_site, browser) -> dict:
    """Every page of the first build opened once (before `hostile_rebuilt` replaces the site), for the two
    tests below: {"failures": what went wrong on any page (`_visit`) and each page's canonical links,
    "actions": what is wrong with the charts' actions on the chart pages, "texts": each page's body text}.
    One visit for both tests (the chart pages, each drawing every chart, were opened twice before)."""
    actions: list[str] = []

    def on_page(name, page) -> list[str]:
        if name != "404.html":  # its links are absolute under site_url's path: no charts load here
            page.wait_for_function("document.documentElement.getAttribute('data-rb-charts') === 'ready'",
                                   timeout=60_000)
        if name in ("k21.html", "k24.html"):  # read before any hover, as a visitor sees them first
            links = page.evaluate(
                "() => [...document.querySelectorAll('.rb-chart .vega-actions a')].map(a => a.textContent)")
            actions.extend([f"{name}: chart action {a!r}" for a in sorted(set(links)) if not a.startswith("Save as")]
                           if links else [f"{name}: no chart actions found"])
        # hover three marks of every chart so each chart's tooltips render too
        marks = [el for chart in page.query_selector_all(".rb-chart")
                 for el in chart.query_selector_all("svg.marks path, svg.marks rect")[:3]]
        for el in marks:
            try:
                el.hover(timeout=300)
            except Exception:  # noqa: BLE001 - a mark hidden behind another: not a failure
                pass
        canonical = page.evaluate(
            "() => [...document.querySelectorAll('link[rel=canonical]')].map(l => l.getAttribute('href'))")
        if canonical != [SITE_URL + name] and not (name == "404.html" and canonical == []):
            return [f"{name}: canonical links {canonical}"]
        return []

    names = sorted(p.name for p in hostile_site.glob("*.html"))
    assert {"k21.html", "k24.html"} <= set(names), names
    failures, texts = _visit(browser, hostile_site, names, on_page)
    return {"failures": failures, "actions": actions, "texts": texts}


def test_hostile_text_is_inert_and_shown_literally(visited):
    failures, texts = visited["failures"], visited["texts"]
    assert not failures, "\n".join(failures)
    assert MODEL_NAME in texts["models.html"]  # the model card shows the name literally
    assert MODEL_NAME in texts["index.html"]  # so does the Home page's Models row
    assert DATA_NAME in texts["models.html"] and DATA_NAME in texts["k21.html"]
    assert "{{ 7*7 }}" in texts["models.html"] and "49" not in MODEL_NAME
    assert DOMAIN in texts["models.html"] and LICENCE in texts["models.html"]  # the dataset card
    assert RTL_NAME in texts["models.html"]


def test_no_chart_action_writes_the_spec_into_a_page(visited):
    """vega-embed's "View Source" action writes the spec's JSON, unescaped, into a new window of the site's
    origin (``document.write``): the model name's ``<script>``/``onerror`` ran there on a click. The charts
    offer the downloads only (the spec is ``spec.json``). Read on the `visited` pages k21.html and k24.html."""
    assert not visited["actions"], "\n".join(visited["actions"])


def test_site_url_reaches_sitemap_and_404_as_configured(hostile_site):
    """`site_url` (legal characters only) is the prefix of every sitemap entry, in well-formed XML,
    and of the 404 page's links, which hold no markup of it."""
    locs = [e.text for e in ET.parse(hostile_site / "sitemap.xml").getroot().iter()
            if e.tag.endswith("loc")]
    assert locs and all(loc.startswith(SITE_URL) for loc in locs), locs[:3]
    page = (hostile_site / "404.html").read_text(encoding="utf-8")
    path = SITE_URL.split("example.org", 1)[1]
    assert f'href="{path}assets/' in page and "<script>alert" not in page


def test_the_build_log_escapes_control_characters(hostile_site):
    """The build summary and log print model names: a right-to-left override appears as `\\u202e`."""
    text = (hostile_site.parent / "terminal.txt").read_text(encoding="utf-8")
    assert "\u202e" not in text and "\u2066" not in text
    assert "rtl\\u202egnirts\\u2066-model" in text


def test_hostile_files_are_well_formed(hostile_site):
    svgs = sorted(hostile_site.glob("figures/*/chart.svg"))
    assert svgs
    for svg in svgs:
        ET.parse(svg)  # model name and dataset text in labels: still well-formed XML
    text = "".join(s.read_text(encoding="utf-8") for s in svgs)
    assert "<script" not in text.replace("&lt;script", "")
    for bib in hostile_site.glob("figures/*/cite.bib"):
        b = bib.read_text(encoding="utf-8")
        depth = 0
        for c in b.replace("\\{", "").replace("\\}", ""):
            depth += (c == "{") - (c == "}")
            assert depth >= 0, bib
        assert depth == 0, bib
    resolved = yaml.safe_load((hostile_site / "config.resolved.yaml").read_text(encoding="utf-8"))
    assert resolved["models"][0]["name"] == MODEL_NAME  # a YAML round trip keeps the text exactly


def test_bibtex_and_markdown_escapers():
    from report_builder.site.pages import md_escape
    from report_builder.citations.cite import _bib_escape

    b = _bib_escape("a {b} c{ d}} \\x 50% & $ # _")
    assert b.count("{") == b.count("}") and "\\textbraceleft{}" in b and "\\%" in b
    m = md_escape("[x](javascript:alert(1)) <b>\n# h")
    assert "](" not in m and "<b>" not in m and "\n" not in m and "&lt;b&gt;" in m


# ---------------------------------------------------------------- figure versions and the history (#24)


@pytest.fixture(scope="module")
def hostile_rebuilt(hostile_site):
    """The hostile site built again with one sequence fewer: changed figures, a history entry whose
    numbers name the hostile model, version pages showing hostile provenance (runs after the tests above)."""
    tmp = hostile_site.parent
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "report_builder", "build", "--config", str(tmp / "cfg.yaml"),
                        "--no-progress", "--threads", "1", "--set", "datasets.0.n=5"],
                       capture_output=True, text=True, env=env, timeout=900, cwd=tmp)
    assert r.returncode == 0, r.stderr[-4000:]
    return hostile_site


def test_hostile_text_is_inert_on_version_pages_and_the_history(hostile_rebuilt, browser):
    import json

    site = hostile_rebuilt
    entries = json.loads((site / "history.json").read_text(encoding="utf-8"))["entries"]
    assert len(entries) == 2 and entries[1]["changed"]
    assert MODEL_NAME in entries[1]["models"]  # kept exactly, as data
    pages = sorted(p.relative_to(site).as_posix() for p in site.glob("figures/*/*/index.html"))
    old = [p for p in pages if "A newer version exists" in (site / p).read_text(encoding="utf-8")]
    assert old and len(pages) > len(old)
    failures, texts = _visit(browser, site, ["changes.html", *pages])
    assert not failures, "\n".join(failures)
    assert MODEL_NAME in texts["changes.html"]  # where the largest change is: the model, shown literally
    # every version's provenance names its model(s), shown literally: the hostile one, or the right-to-left
    # variant alone for the per-variant figures (k21-fig5, k21-tab5)
    shown = [p for p in pages if MODEL_NAME in texts[p] or RTL_NAME in texts[p]]
    assert len(shown) == len(pages), sorted(set(pages) - set(shown))[:3]
    assert sum(MODEL_NAME in texts[p] for p in pages) > len(pages) // 2
    for p in pages:
        bib = (site / p).parent / "cite.bib"
        depth = 0
        for c in bib.read_text(encoding="utf-8").replace("\\{", "").replace("\\}", ""):
            depth += (c == "{") - (c == "}")
            assert depth >= 0, bib
        assert depth == 0, bib


def test_published_site_and_versions_have_no_local_paths(hostile_rebuilt):
    """No local path (the build's folder, the home folder, this checkout) in any text file of a site built
    from a local model folder and data file: every figure's files, the version pages, the history. (The
    same check on tests/test_safety.py's three-figure site, beside its other points on local sources.)"""
    from tests import site_helpers as h

    site = hostile_rebuilt
    assert len(list(site.glob("figures/*/provenance.json"))) > 20 and (site / "history.json").is_file()
    assert h.private_text(site, [str(site.parent), str(Path.home()), str(ROOT)]) == []
