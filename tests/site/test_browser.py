"""Headless Chromium opens every page of the fixture site: charts render as SVG, no console errors,
no request to another host; screenshots of one K21 and one K24 page (laptop and phone width).

Chromium comes from Debian (``apt-get install chromium``, done here when missing and running as
root); Playwright for Python drives it (no ``playwright install``). Under ``CI=true`` this test never
skips: a missing browser or driver is a failure.
"""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests import site_helpers as h

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


# the `chromium` and `browser` session fixtures live in tests/site/conftest.py (shared with test_hostile)


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    from report_builder.site.serve import make_server

    root, report, figures = h.full_fixture_site(tmp_path_factory)
    server = make_server(root / "site", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root / "site", report, figures
    server.shutdown()
    server.server_close()


def _open(browser, url: str, allowed: str, viewport=LAPTOP, scheme: str = "light"):
    """Open ``url`` and return (page, context, problems); requests outside ``allowed`` are aborted."""
    ctx = browser.new_context(viewport=viewport, color_scheme=scheme)
    page = ctx.new_page()
    problems: list[str] = []

    def console(m):
        # errors fail; so does Vega's warning for a chart whose data came out empty
        if m.type == "error" or "Infinite extent" in m.text:
            problems.append(f"console {m.type}: {m.text}")

    page.on("console", console)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def route(r):
        u = r.request.url
        if u.startswith(allowed) or u.startswith(("data:", "blob:", "about:")):
            r.continue_()
        else:
            problems.append(f"request to another host: {u}")
            r.abort()

    page.route("**/*", route)
    page.goto(url, wait_until="load")
    page.wait_for_function("document.documentElement.getAttribute('data-rb-charts') === 'ready'", timeout=60_000)
    missing = page.eval_on_selector_all(
        ".rb-chart", "els => els.filter(e => !e.querySelector('svg.marks, img.rb-static')).map(e => e.id)")
    problems += [f"chart without SVG: {m}" for m in missing]
    return page, ctx, problems


def _first_chart_shot(page, path: Path) -> None:
    el = page.query_selector(".rb-chart")
    if el is not None:
        el.scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, -120)")
    page.screenshot(path=str(path))


def test_every_page_renders_offline(browser, served):
    base, site, report, figures = served
    pages = sorted(p.name for p in site.glob("*.html"))
    assert {"index.html", "k21.html", "k24.html", "methods.html", "models.html", "changes.html", "cite.html"} <= set(pages)
    failures = []
    n_charts = 0
    for name in pages:
        page, ctx, problems = _open(browser, f"{base}/{name}", base)
        n_charts += page.eval_on_selector_all(".rb-chart svg.marks", "els => els.length")
        failures += [f"{name}: {p}" for p in problems]
        ctx.close()
    assert not failures, "\n".join(failures)
    assert n_charts >= 1


def test_screenshots_laptop_and_phone(browser, served):
    base, _, _, _ = served
    SCREENSHOTS.mkdir(exist_ok=True)
    failures = []
    for paper in ("k21", "k24"):
        for label, vp, scheme in (("laptop", LAPTOP, "light"), ("phone", PHONE, "light"), ("laptop-dark", LAPTOP, "dark")):
            page, ctx, problems = _open(browser, f"{base}/{paper}.html", base, viewport=vp, scheme=scheme)
            failures += problems
            page.screenshot(path=str(SCREENSHOTS / f"{paper}-{label}-top.png"))
            _first_chart_shot(page, SCREENSHOTS / f"{paper}-{label}-chart.png")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > vp["width"] + 1:
                failures.append(f"{paper} {label}: page wider than the window ({width}px)")
            ctx.close()
    assert not failures, "\n".join(failures)
    assert (SCREENSHOTS / "k21-laptop-top.png").is_file() and (SCREENSHOTS / "k24-phone-chart.png").is_file()


def test_search_finds_a_figure(browser, served):
    base, _, _, figures = served
    page, ctx, problems = _open(browser, f"{base}/index.html", base)
    page.keyboard.press("/")  # material's search shortcut
    page.keyboard.type("provenance", delay=20)
    page.wait_for_selector(".md-search-result__item", timeout=20_000)
    assert page.eval_on_selector_all(".md-search-result__item", "els => els.length") > 0
    ctx.close()
    assert not problems, "\n".join(problems)


def test_file_url_page_works(browser, served):
    _, site, _, _ = served
    for name in ("k21.html", "index.html"):
        url = (site / name).resolve().as_uri()
        page, ctx, problems = _open(browser, url, "file://")
        assert page.eval_on_selector_all(".rb-chart", "els => els.length") >= (1 if name == "k21.html" else 0)
        ctx.close()
        assert not problems, f"{name} from file://:\n" + "\n".join(problems)
