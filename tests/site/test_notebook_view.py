"""The notebook's inline view in headless Chromium: a `Decomposition`'s ``_repr_html_`` written to a
file and opened with every network request refused draws its map (SVG) from the inlined Vega, with no
console error; the layer slider and the scope selector change what is drawn; hostile texts stay text.

Chromium and Playwright as in tests/site/test_browser.py (fixtures in tests/site/conftest.py).
"""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


@pytest.fixture(scope="module")
def view_page(tmp_path_factory):
    import report_builder as rb
    from test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("nbview")
    model = rb.load_model(str(tiny_bert_dir(tmp / "tiny", 0)), name="tiny <b>bert</b>")
    res = rb.decompose(model, ["The man went to the store.", HOSTILE], progress=False)
    page = tmp / "view.html"
    # two views on one page: the bundle is unpacked once and both draw
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    + res._repr_html_() + res[1]._repr_html_() + "</body></html>", encoding="utf-8")
    return page


def _svg_text(page, k: int) -> str:
    return page.eval_on_selector_all(".rb-view", f"els => els[{k}].querySelector('svg.marks').textContent")


def test_inline_view_draws_offline_and_reacts(browser, view_page):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))

    def route(r):
        u = r.request.url
        if u.startswith(("file:", "data:", "blob:", "about:")):
            r.continue_()
        else:
            problems.append(f"request: {u}")
            r.abort()

    page.route("**/*", route)
    page.goto(view_page.as_uri(), wait_until="load")
    page.wait_for_function("document.querySelectorAll('.rb-view svg.marks').length === 2", timeout=60_000)
    assert problems == []
    assert page.evaluate("window.pwned === undefined")
    texts = page.eval_on_selector_all(".rb-view", "els => els.map(e => e.textContent)")
    assert not any("has not run" in t for t in texts), texts  # the line for viewers without script is replaced
    first = _svg_text(page, 0)
    assert "tiny <b>bert</b> — scope ATBFFRESLN, layer 1, example 1" in first  # the middle layer of 2, whole layer
    assert "the" in first and "[CLS]" in first  # token labels drawn
    assert "1:<2:/3:script4:>" in _svg_text(page, 1)  # the hostile text is token labels, not markup
    options = page.eval_on_selector_all(".rb-view select option", "els => els.map(e => e.textContent)")
    assert any(o.startswith("2: " + HOSTILE.split()[0]) for o in options), options  # text, not markup

    slider = page.query_selector_all(".rb-view input[type=range]")[0]
    slider.evaluate("el => { el.value = '2'; el.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_function("document.querySelector('.rb-view svg.marks').textContent.includes('layer 2,')")
    page.query_selector_all(".rb-view select")[0].select_option("ATTN-N")
    page.wait_for_function("document.querySelector('.rb-view svg.marks').textContent.includes('scope ATTN-N, layer 2')")
    assert problems == []
    ctx.close()
