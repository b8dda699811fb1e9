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


OVERLAPS = """() => [...document.querySelectorAll('.rb-chart')].flatMap(el => {
    const s = el.querySelector('details > summary'), svg = el.querySelector('svg.marks');
    if (!s || !svg) return [];
    const a = s.getBoundingClientRect(), b = svg.getBoundingClientRect();
    const hit = a.left < b.right - 1 && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    return hit || a.width > 40 ? [el.id + ': button ' + Math.round(a.left) + '-' + Math.round(a.right)
                                  + ', chart ' + Math.round(b.left) + '-' + Math.round(b.right)] : [];
})"""
"""Each chart whose actions button overlaps its drawing or is wider than a button (`test_chart_actions_sit_beside_the_chart`)."""

EMPTY_HEADS = """() => [...document.querySelectorAll('article table > thead')]
    .filter(t => [...t.querySelectorAll('th')].every(th => !th.textContent.trim()))
    .map(t => t.getBoundingClientRect().height)"""
"""The drawn height of each table header whose cells are all empty (`test_key_value_tables_show_no_empty_header`)."""


@pytest.fixture(scope="module")
def laptop_pages(browser, served) -> dict:
    """Every page of the fixture site opened once at laptop width (light), for the tests that read a page there:
    {"pages", "failures", "charts" (drawn), "overlaps" (`OVERLAPS` on k21/k24), "heads" (`EMPTY_HEADS` on
    index/methods)}. (The chart pages were opened three times at this width before, 2-3 s each.)"""
    base, site, _, _ = served
    out = {"pages": sorted(p.name for p in site.glob("*.html")), "failures": [], "charts": 0, "overlaps": [],
           "heads": {}}
    for name in out["pages"]:
        page, ctx, problems = _open(browser, f"{base}/{name}", base)
        out["charts"] += page.eval_on_selector_all(".rb-chart svg.marks", "els => els.length")
        out["failures"] += [f"{name}: {p}" for p in problems]
        if name in ("k21.html", "k24.html"):
            out["overlaps"] += page.evaluate(OVERLAPS)
        if name in ("index.html", "methods.html"):
            out["heads"][name] = page.evaluate(EMPTY_HEADS)
        ctx.close()
    return out


def test_every_page_renders_offline(laptop_pages):
    pages = laptop_pages["pages"]
    assert {"index.html", "k21.html", "k24.html", "methods.html", "models.html", "changes.html", "cite.html"} <= set(pages)
    assert not laptop_pages["failures"], "\n".join(laptop_pages["failures"])
    assert laptop_pages["charts"] >= 1


@pytest.fixture(scope="module")
def screenshots(browser, served) -> dict:
    """k21 and k24 at laptop, phone and laptop-dark, each opened once: the screenshots, and {"failures",
    "phone_overlaps" (`OVERLAPS` at phone width, read before any scrolling)}."""
    base, _, _, _ = served
    SCREENSHOTS.mkdir(exist_ok=True)
    failures, phone_overlaps = [], []
    for paper in ("k21", "k24"):
        for label, vp, scheme in (("laptop", LAPTOP, "light"), ("phone", PHONE, "light"), ("laptop-dark", LAPTOP, "dark")):
            page, ctx, problems = _open(browser, f"{base}/{paper}.html", base, viewport=vp, scheme=scheme)
            failures += problems
            if label == "phone":
                phone_overlaps += page.evaluate(OVERLAPS)
            page.screenshot(path=str(SCREENSHOTS / f"{paper}-{label}-top.png"))
            _first_chart_shot(page, SCREENSHOTS / f"{paper}-{label}-chart.png")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > vp["width"] + 1:
                failures.append(f"{paper} {label}: page wider than the window ({width}px)")
            ctx.close()
    return {"failures": failures, "phone_overlaps": phone_overlaps}


def test_screenshots_laptop_and_phone(screenshots):
    assert not screenshots["failures"], "\n".join(screenshots["failures"])
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


def test_large_data_charts_work_from_disk(browser, tmp_path):
    """A chart whose data sits in a file (the K24 maps explorer's, on a real site) is interactive from
    disk too: charts.js loads the data's script twin (a page opened from file:// may not fetch a file)."""
    report, _ = h.render_dummy_site(tmp_path, inline_limit=100)
    site = tmp_path / "site"
    twins = list(site.glob("figures/*/data-*.json.js"))
    assert twins and all(p.with_suffix("").is_file() for p in twins)
    checked = 0
    for name in ("k21.html", "k24.html"):
        if not (site / name).is_file():
            continue
        page, ctx, problems = _open(browser, (site / name).resolve().as_uri(), "file://")
        static = page.eval_on_selector_all(".rb-chart img.rb-static", "els => els.length")
        checked += page.eval_on_selector_all(".rb-chart svg.marks", "els => els.length")
        ctx.close()
        assert not problems and static == 0, f"{name} from file://: {problems}"
    assert checked >= 1


@pytest.mark.parametrize("width", ["laptop", "phone"])
def test_chart_actions_sit_beside_the_chart(request, width):
    """vega-embed's actions button stays in the space beside the chart (material's <details> styling
    once widened it over the last panel); on a phone, where a wide chart scrolls sideways in its box, it
    sat over the chart's right edge (the box's corner, the chart running on under it). Read on k21.html and
    k24.html during the visits of `laptop_pages` and `screenshots` (whose problems those tests assert)."""
    if width == "laptop":
        overlaps = request.getfixturevalue("laptop_pages")["overlaps"]
    else:
        overlaps = request.getfixturevalue("screenshots")["phone_overlaps"]
    assert not overlaps, overlaps


def test_static_drawings_keep_their_text_inside(browser, served):
    """Every chart.svg, shown by a browser with its own fonts, keeps its text inside the drawing (the
    theme names Arial-metric fonts first, the ones vl-convert measured the layout with)."""
    _, site, _, _ = served
    ctx = browser.new_context(viewport={"width": 2400, "height": 900})
    page = ctx.new_page()
    outside = []
    for svg in sorted(site.glob("figures/*/chart.svg")):
        page.goto(svg.resolve().as_uri())
        outside += [f"{svg.parent.name}: {t}" for t in page.evaluate("""() => {
            const s = document.querySelector('svg'), w = +s.getAttribute('width');
            return [...s.querySelectorAll('text')].filter(t => { const r = t.getBoundingClientRect();
                return r.width && (r.right > w + 1 || r.left < -1); }).map(t => t.textContent.slice(0, 60));
        }""")]
    ctx.close()
    assert not outside, outside


def test_key_value_tables_show_no_empty_header(laptop_pages):
    """Home's "This build" and Methods' software tables are Markdown tables with an empty header row
    (``| | |``); it is not drawn (it was a blank shaded band above the first row). Read during the visit of
    `laptop_pages` (whose problems `test_every_page_renders_offline` asserts)."""
    for name in ("index.html", "methods.html"):
        heads = laptop_pages["heads"][name]
        assert heads, f"{name}: no key-value table found (the check would pass vacuously)"
        assert all(hgt == 0 for hgt in heads), f"{name}: an empty table header is drawn ({heads} px)"


def test_token_maps_stay_square_on_a_phone(browser, served):
    """On a phone charts.js narrows wide panels to the window; a square token-to-token map (the K24 maps
    explorer, 896 x 896 px) keeps its height too, so its cells stay square (narrowed alone, the map
    became a 280 x 896 px column of thin strips)."""
    base, _, _, _ = served
    small = {"width": 320, "height": 700}  # a small phone: the fixture maps (280 px) are narrowed to 210
    page, ctx, problems = _open(browser, f"{base}/k24.html", base, viewport=small)
    # the maps (a colour legend is a rect mark too, a thin one)
    boxes = page.evaluate("""() => [...document.querySelectorAll('#chart-k24-maps g.mark-rect')]
        .map(g => g.getBBox()).filter(b => b.width > 50 && b.height > 50).map(b => [b.width, b.height])""")
    ctx.close()
    assert not problems, problems
    assert boxes, "no map drawn in k24-maps"
    for w, hgt in boxes:
        assert 0.9 < w / hgt < 1.1, f"map drawn {w:.0f} x {hgt:.0f} px on a phone"
        assert w <= small["width"], f"map wider than the phone ({w:.0f} px)"


def test_home_figure_ids_never_break_across_lines(browser, served):
    """Home's figure index on a phone: an id (``k21-tab11``) is one word; it broke at its hyphen, "k21-" at
    the end of one line and "tab11" on the next."""
    base, _, _, _ = served
    page, ctx, problems = _open(browser, f"{base}/index.html", base, viewport={"width": 320, "height": 700})
    lines = page.evaluate("""() => [...document.querySelectorAll('h2#figures ~ p a > code')]
        .map(c => [c.textContent, c.getClientRects().length])""")
    ctx.close()
    assert not problems, problems
    assert len(lines) >= 3, f"no figure ids found on Home ({lines}): the check would pass vacuously"
    assert [t for t, n in lines if n != 1] == [], lines


def test_tables_fit_a_laptop_page(browser, served):
    """K21 Table 1 drew 1072 px in the 938 px content column of a 1280 px laptop (the default build; the
    Source and Licence columns hidden past the right edge) because every header was set on one line: one
    'Mean tokens (<model>)' column per model. Headers now wrap at their spaces where the table would not
    fit otherwise; no figure table is wider than the page."""
    base, _, _, _ = served
    wide = {}
    for name in ("k21.html", "k24.html"):
        page, ctx, problems = _open(browser, f"{base}/{name}", base, viewport={"width": 1280, "height": 900})
        # the fixture's models are named tiny-*: give Table 1's per-model headers the default build's lengths
        page.evaluate("""() => [...document.querySelectorAll('article table.rb-table th')]
            .filter(th => th.textContent.startsWith('Mean tokens ('))
            .forEach(th => { th.textContent = th.textContent.replace('(tiny-', '(SmolLM2-135M-'); })""")
        wide[name] = page.evaluate("""() => [...document.querySelectorAll('article table.rb-table')]
            .map(t => [t.rows[0].innerText.replace(/\\s+/g, ' ').slice(0, 60), t.scrollWidth,
                       t.parentElement.clientWidth])""")
        ctx.close()
        assert not problems, problems
    assert wide["k21.html"], "no K21 table found (the check would pass vacuously)"
    over = [(n, row) for n, rows in wide.items() for row in rows if row[1] > row[2] + 1]
    assert over == [], over
