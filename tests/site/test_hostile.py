"""A build whose dataset text, dataset name and model name are hostile, opened in headless Chromium:
no dialog fires, no injected script, link or image exists, and the text is shown literally.

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
LINES = [
    "<script>alert(3)</script> the film is good .",
    "<img src=x onerror=alert(4)> a fine cast and a long ending .",
    "[x](javascript:alert(5)) the plot is dull but the music is great .",
    "{{ 7*7 }} a great ending ]]> indeed , said the critic .",
    "an { unbalanced brace and a } closing one in a review .",
    "a plain sentence about the same film and the same cast .",
]


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    from tests.test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("hostile")
    model = tiny_bert_dir(tmp / "models" / "tiny-evil", 0)
    data = tmp / "hostile.txt"
    data.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    cfg = {
        "models": [{"name": MODEL_NAME, "source": str(model), "role": "primary_encoder"}],
        "datasets": [{"id": "hostile", "path": str(data), "name": DATA_NAME, "n": 6, "k24_n": 3, "max_length": 32}],
        "k24": {"top_k": 5, "examples": 2},
        "cache_dir": str(tmp / "cache"), "out_dir": str(tmp / "site"),
    }
    p = tmp / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "report_builder", "build", "--config", str(p), "--no-progress",
                        "--threads", "1"], capture_output=True, text=True, env=env, timeout=900, cwd=tmp)
    assert r.returncode == 0, r.stderr[-4000:]
    return tmp / "site"


def test_hostile_text_is_inert_and_shown_literally(hostile_site, browser):
    from report_builder.site.serve import make_server

    server = make_server(hostile_site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    failures, texts = [], {}
    try:
        for name in sorted(p.name for p in hostile_site.glob("*.html")):
            ctx = browser.new_context()
            page = ctx.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{base}/{name}", wait_until="load")
            page.wait_for_function("document.documentElement.getAttribute('data-rb-charts') === 'ready'",
                                   timeout=60_000)
            # hover every chart so tooltips render too
            for el in page.query_selector_all(".rb-chart svg.marks path, .rb-chart svg.marks rect")[:40]:
                try:
                    el.hover(timeout=500)
                except Exception:  # noqa: BLE001 - a mark hidden behind another: not a failure
                    pass
            bad = page.evaluate("""() => ({
                js_links: [...document.querySelectorAll('a[href]')].filter(a => a.href.trim().toLowerCase().startsWith('javascript:')).length,
                injected_img: document.querySelectorAll('img[src="x"], img[src="y"]').length,
                injected_script: [...document.querySelectorAll('script')].filter(s => s.textContent.includes('alert(')).length,
                tooltip_img: document.querySelectorAll('#vg-tooltip-element img, #vg-tooltip-element script').length,
            })""")
            if dialogs:
                failures.append(f"{name}: dialog(s) {dialogs}")
            failures += [f"{name}: {k} = {v}" for k, v in bad.items() if v]
            texts[name] = page.inner_text("body")
            ctx.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not failures, "\n".join(failures)
    assert MODEL_NAME in texts["models.html"]  # the model card shows the name literally
    assert MODEL_NAME in texts["index.html"]  # so does the Home page's Models row
    assert DATA_NAME in texts["models.html"] and DATA_NAME in texts["k21.html"]
    assert "{{ 7*7 }}" in texts["models.html"] and "49" not in MODEL_NAME


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
    from report_builder.site.provenance import _bib_escape

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

    from report_builder.site.serve import make_server

    site = hostile_rebuilt
    entries = json.loads((site / "history.json").read_text(encoding="utf-8"))["entries"]
    assert len(entries) == 2 and entries[1]["changed"]
    assert MODEL_NAME in entries[1]["models"]  # kept exactly, as data
    pages = sorted(p.relative_to(site).as_posix() for p in site.glob("figures/*/*/index.html"))
    old = [p for p in pages if "A newer version exists" in (site / p).read_text(encoding="utf-8")]
    assert old and len(pages) > len(old)
    server = make_server(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    failures, texts = [], {}
    try:
        for name in ["changes.html", *pages]:
            ctx = browser.new_context()
            page = ctx.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{base}/{name}", wait_until="load")
            bad = page.evaluate("""() => ({
                js_links: [...document.querySelectorAll('a[href]')].filter(a => a.href.trim().toLowerCase().startsWith('javascript:')).length,
                injected_img: document.querySelectorAll('img[src="x"], img[src="y"]').length,
                injected_script: [...document.querySelectorAll('script')].filter(s => s.textContent.includes('alert(')).length,
            })""")
            if dialogs:
                failures.append(f"{name}: dialog(s) {dialogs}")
            failures += [f"{name}: {k} = {v}" for k, v in bad.items() if v]
            texts[name] = page.inner_text("body")
            ctx.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not failures, "\n".join(failures)
    assert MODEL_NAME in texts["changes.html"]  # where the largest change is: the model, shown literally
    shown = [p for p in pages if MODEL_NAME in texts[p]]
    assert len(shown) == len(pages), sorted(set(pages) - set(shown))[:3]  # every version's provenance names it
    for p in pages:
        bib = (site / p).parent / "cite.bib"
        depth = 0
        for c in bib.read_text(encoding="utf-8").replace("\\{", "").replace("\\}", ""):
            depth += (c == "{") - (c == "}")
            assert depth >= 0, bib
        assert depth == 0, bib
