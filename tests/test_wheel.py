"""The built wheel, installed (not editable) into one fresh virtual environment:

- with the [compute] dependencies too, it builds a site from a directory outside the checkout (the top-level
  templates/, mkdocs.yml and docs/ ship inside the package: ``report_builder/_site/``, pyproject.toml's
  force-include);
- with only what ``pip install '<wheel>[render]'`` installs (the base dependencies and [render], resolved
  from pyproject.toml's requirements; no torch), it shows ``--help`` and renders the session's smoke build
  (tests/conftest.py: both embedded models, every figure they produce) from another directory into the same
  site (same figure hashes), and ``build``/``check`` name the [compute] extra they need.

The dependencies are linked from this environment's site-packages (no network): the render-only set is
a folder of links to exactly the distributions of the [render] closure; the [compute] ones are added
with PYTHONPATH for the build only."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.tools import lock

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


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> dict:
    """One venv holding the wheel and, through a .pth line, only its base + [render] dependencies."""
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               REPORT_BUILDER_CACHE=str(tmp / "user-cache"))
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
         env=env)
    deps = tmp / "render-deps"  # what `pip install '<wheel>[render]'` installs, linked from here
    deps.mkdir()
    names = lock.closure(("render",), make=False)
    for name in names:
        dist = metadata.distribution(name)
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")} - {"__pycache__"}:
            src, link = Path(dist.locate_file(top)), deps / top
            if src.exists() and not link.exists():
                link.symlink_to(src)
    purelib = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # a plain path line runs none of that folder's .pth files, so this checkout's editable install stays invisible
    (purelib / "zz_render_deps.pth").write_text(str(deps) + "\n")
    compute = {**env, "PYTHONPATH": sysconfig.get_paths()["purelib"]}  # this environment's packages: [compute]
    return {"venv": venv, "py": py, "env": env, "compute": compute, "names": names, "tmp": tmp}


@pytest.fixture(scope="module")
def built(venv) -> Path:
    """A build by the installed wheel (with the [compute] dependencies), outside the checkout. Its user cache
    starts with this machine's evaluation sets and frequency ranks, as tests/test_regenerate.py's does (derived
    data, keyed by the data code's and wordfreq's versions: 3 s of building the Wikipedia set and 5 s of
    ranking MiniLM's vocabulary saved); not the Vega bundle, which the installed wheel bundles itself."""
    from report_builder import guard

    work = venv["tmp"] / "elsewhere"
    work.mkdir()
    for memo in ("evalsets", "freq"):
        src = guard.user_cache_dir() / memo
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, venv["tmp"] / "user-cache" / memo, symlinks=False)
    small = ["--set", "datasets.0.n=2", "--set", "datasets.0.k24_n=1", "--set", "datasets.0.max_length=32",
             "--set", "datasets.1.n=2", "--set", "datasets.1.k24_n=1", "--set", "datasets.1.max_length=32",
             "--set", "k24.examples=1", "--set", "k24.top_k=3"]
    r = _run([str(venv["venv"] / "bin" / "report-builder"), "-q", "build", "--preset", "smoke", "--model", "minilm",
              *small, "--cache", str(work / "cache"), "--out", str(work / "out")], env=venv["compute"], cwd=work,
             timeout=900)
    assert "analyses:" in r.stdout
    return work


def test_installed_wheel_builds_a_site_outside_the_checkout(venv, built):
    where = _run([str(venv["py"]), "-c", "import report_builder; print(report_builder.__file__)"], env=venv["env"],
                 cwd=venv["tmp"])
    assert where.stdout.strip().startswith(str(venv["venv"])), where.stdout
    site = built / "out"
    for page in ("index.html", "k21.html", "k24.html", "methods.html", "api.html", "cite.html"):
        assert (site / page).is_file(), page
    assert "decompose" in (site / "api.html").read_text()
    assert (site / "assets" / "rb" / "charts.js").is_file()


def _hashes(site: Path) -> dict:
    return {k: v.get("hash") for k, v in json.loads((site / "figures" / "manifest.json").read_text())["figures"].items()}


def test_render_extra_alone_renders_the_cache_and_needs_no_torch(venv, smoke):
    """`pip install '<wheel>[render]'`: no torch, no gensim, no scipy; --help, and `render --cache` of the smoke
    build from another directory gives the smoke site (same figure hashes: the rendering of a cache without
    torch, once also tests/test_smoke_build.py's, with torch blocked); a compute command names the extra it
    needs."""
    rb, env = str(venv["venv"] / "bin" / "report-builder"), venv["env"]
    assert not {"torch", "transformers", "gensim", "scipy", "datasets", "ray"} & set(venv["names"]), venv["names"]
    assert {"altair", "mkdocs", "pandas", "pyarrow"} <= set(venv["names"])
    probe = subprocess.run([str(venv["py"]), "-c", "import torch"], capture_output=True, text=True, env=env)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr
    assert "render" in _run([rb, "--help"], env=env).stdout
    assert "--cache DIR" in _run([rb, "render", "--help"], env=env).stdout
    other = venv["tmp"] / "other"
    other.mkdir()
    r = _run([rb, "-q", "render", "--cache", str(smoke[0] / "cache"), "--out", "site"], env=env, cwd=other,
             timeout=600)
    assert r.stderr == "", r.stderr
    assert _hashes(other / "site") == _hashes(smoke[0] / "site") and len(_hashes(other / "site")) > 30
    drawn = [k for k, h in _hashes(other / "site").items() if h]
    assert any(k.startswith("k24-") for k in drawn) and len(drawn) > 20, drawn  # the causal model's figures too
    for cmd in (["build", "--preset", "smoke", "--cache", "c", "--out", "s"], ["check", "--model", "minilm"]):
        r = subprocess.run([rb, *cmd], capture_output=True, text=True, env=env, cwd=other, timeout=300)
        assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("error: ") and "[compute] extra" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (other / "s").exists()
