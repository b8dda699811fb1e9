"""Screenshots of chosen figures of a built site, to look at: each figure's section on its page and its
static ``chart.png`` shown alone, at laptop (1280 px) and phone (390 px) width, light and dark.

Usage: ``python -m tests.screens SITE_DIR OUT_DIR k21-fig1 k24-ctx-ff ...`` (needs /usr/bin/chromium
and Playwright for Python, like tests/test_browser.py).
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORTS = {"laptop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
PAGE_OF = {"k21": "k21.html", "k24": "k24.html"}


def shoot(site: Path, out: Path, ids: list[str]) -> list[str]:
    """Write the screenshots; return the problems seen (console errors, charts wider than the page)."""
    from playwright.sync_api import sync_playwright

    from report_builder.site.serve import make_server

    out.mkdir(parents=True, exist_ok=True)
    server = make_server(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    problems: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            for vp_name, vp in VIEWPORTS.items():
                for scheme in ("light", "dark"):
                    ctx = browser.new_context(viewport=vp, color_scheme=scheme)
                    page = ctx.new_page()
                    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                            if m.type == "error" else None)
                    for paper in sorted({i.split("-")[0] for i in ids}):
                        page.goto(f"{base}/{PAGE_OF[paper]}", wait_until="load")
                        page.wait_for_function(
                            "document.documentElement.getAttribute('data-rb-charts') === 'ready'", timeout=90_000)
                        for fig in (i for i in ids if i.startswith(paper)):
                            head = page.query_selector(f'[id="{fig}"]')
                            if head is None:
                                problems.append(f"{fig}: no section")
                                continue
                            target = page.query_selector(f'[id="chart-{fig}"]') or head
                            page.evaluate("el => { el.scrollIntoView({block: 'start'}); window.scrollBy(0, -90); }",
                                          target)
                            page.screenshot(path=str(out / f"{fig}-page-{vp_name}-{scheme}.png"))
                            over = page.evaluate(
                                "id => { const el = document.getElementById('chart-' + id);"
                                " const svg = el && el.querySelector('svg.marks');"
                                " return svg ? [Math.round(svg.getBoundingClientRect().width), el.clientWidth] : null; }",
                                fig)
                            if over and over[0] > over[1] + 1:
                                problems.append(f"{fig} {vp_name}: chart wider than its box ({over[0]} > {over[1]} px)")
                    ctx.close()
            # the static PNG alone, at its natural size (what a reader pastes into a paper)
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            for fig in ids:
                page.goto(f"{base}/figures/{fig}/chart.png")
                page.screenshot(path=str(out / f"{fig}-static.png"), full_page=True)
            ctx.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return problems


if __name__ == "__main__":
    if len(sys.argv) < 4:
        print(__doc__)
        raise SystemExit(2)
    for line in shoot(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]):
        print(line)
