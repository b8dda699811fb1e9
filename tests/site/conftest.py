"""Shared browser fixtures of the site tests: Debian's Chromium driven by Playwright (one instance per
session for every browser test; never skipped under ``CI=true``)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
IN_CI = os.environ.get("CI") == "true"


def _unavailable(msg: str):
    if IN_CI:
        pytest.fail(msg + " (CI=true: the browser test must run)")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        if os.geteuid() != 0:
            _unavailable("/usr/bin/chromium missing and not root to install it")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env)
    if not CHROMIUM.exists():
        pytest.fail("chromium could not be installed")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright (Python) is not installed; pip install -e '.[dev]'")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(chromium), args=ARGS, headless=True)
        yield b
        b.close()


