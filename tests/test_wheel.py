"""The built wheel, installed (not editable) into a fresh virtual environment, builds a site from a
directory outside the checkout: the top-level templates/, mkdocs.yml and docs/ ship inside the package
(``report_builder/_site/``, pyproject.toml's force-include)."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel from a clean copy of the tracked files (no build/ or egg-info in the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    files = _run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]).stdout
    for rel in filter(None, files.split("\0")):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((ROOT / rel).read_bytes())
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", str(tmp / "dist"), str(src)])
    (whl,) = (tmp / "dist").glob("report_builder-*.whl")
    return whl


def test_wheel_holds_the_site_inputs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in ("report_builder/_site/mkdocs.yml",
                "report_builder/_site/templates/figure.md.j2",
                "report_builder/_site/templates/pages/api.md.j2",
                "report_builder/_site/templates/overrides/main.html",
                "report_builder/_site/templates/assets/charts.js",
                "report_builder/_site/docs/methods.md",
                "report_builder/resources/k21_reported.yaml",
                "report_builder/bench/memory_child.py"):
        assert rel in names, rel
    # the one copy of each source is the repository's top-level file, mapped into the package
    tops = {p.relative_to(ROOT).as_posix() for d in ("templates", "docs") for p in (ROOT / d).rglob("*.md*")
            if "generated" not in p.parts}
    assert {f"report_builder/_site/{t}" for t in tops} <= names
    assert not any(n.startswith(("tests/", "docs/", "templates/", "report_builder/site/resources/")) for n in names)


def test_installed_wheel_builds_a_site_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
         env=env)
    # the dependencies: this environment's site-packages, after the venv's own (which holds report_builder);
    # a plain path line runs none of that folder's .pth files, so its editable install stays invisible
    purelib = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (purelib / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = _run([str(py), "-c", "import report_builder; print(report_builder.__file__)"], env=env, cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    work = tmp_path / "elsewhere"
    work.mkdir()
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    small = ["--set", "datasets.0.n=2", "--set", "datasets.0.k24_n=1", "--set", "datasets.0.max_length=32",
             "--set", "datasets.1.n=2", "--set", "datasets.1.k24_n=1", "--set", "datasets.1.max_length=32",
             "--set", "k24.examples=1", "--set", "k24.top_k=3"]
    r = _run([str(venv / "bin" / "report-builder"), "-q", "build", "--preset", "smoke", "--model", "minilm",
              *small, "--cache", str(work / "cache"), "--out", str(work / "out")], env=env, cwd=work, timeout=900)
    assert "analyses:" in r.stdout
    site = work / "out"
    for page in ("index.html", "k21.html", "k24.html", "methods.html", "api.html", "cite.html"):
        assert (site / page).is_file(), page
    assert "decompose" in (site / "api.html").read_text()
    assert (site / "assets" / "rb" / "charts.js").is_file()
