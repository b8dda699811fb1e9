"""Test-wide settings: offline hub, one torch thread (tiny models are dominated by thread sync); the
session's smoke build, shared by tests/test_smoke_build.py, tests/test_reproducible_build.py and
tests/executors/test_ray.py, and how builds are compared (their tables' bytes, their figure hashes)."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the render-only tests need no torch
    pass


NO_TORCH = ("torch", "transformers", "scipy")
"""What a rebuild from the cache never imports (`render` and a no-op `build` run where they are not installed)."""

RECORD_IMPORTS = f"""
import sys
from report_builder.cli import main
code = main()
print("imported:", *sorted(m for m in {NO_TORCH!r} if m in sys.modules), file=sys.stderr)
raise SystemExit(code)
"""
"""``python -c RECORD_IMPORTS ARGS`` runs ``report-builder ARGS`` as ``python -m report_builder`` does, then
prints which of `NO_TORCH` it imported (``imported:`` alone when none) as the last line on stderr."""


def smoke_build(tmp: Path, *extra: str, record_imports: bool = False) -> tuple[str, float]:
    """``report-builder build --preset smoke`` into ``tmp/cache`` and ``tmp/site`` through the CLI, as
    the README runs it (through `RECORD_IMPORTS` with ``record_imports``); (its stdout + stderr, seconds)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cli = ["-c", RECORD_IMPORTS] if record_imports else ["-m", "report_builder"]
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *cli, "build", "--preset", "smoke", "--no-progress",
                        "--cache", str(tmp / "cache"), "--out", str(tmp / "site"), *extra],
                       capture_output=True, text=True, env=env, timeout=1800, cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"^analyses: \d+ computed", r.stdout, re.M)  # results on stdout, the log on stderr
    return r.stdout + "\n" + r.stderr, time.perf_counter() - t0


def table_bytes(cache_dir) -> dict[str, bytes]:
    """Every result table of a cache (shard entries included) by its path under ``results/``, as bytes."""
    base = Path(cache_dir) / "results"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.parquet"))}


def figure_hashes(site_dir) -> dict[str, str | None]:
    """Each figure's content hash, from a rendered site's ``figures/manifest.json``."""
    man = json.loads((Path(site_dir) / "figures" / "manifest.json").read_text())
    return {fid: rec.get("hash") for fid, rec in man["figures"].items()}


@pytest.fixture(scope="session", autouse=True)
def render_key_folder(tmp_path_factory):
    """The tests' configuration folder (the render key, `site_state.key_file`), never the user's own: one
    per run, shared by the pytest-xdist workers (and the commands they start), like the smoke build."""
    if os.environ.get("REPORT_BUILDER_CONFIG"):
        yield Path(os.environ["REPORT_BUILDER_CONFIG"])
        return
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "config"
    os.environ["REPORT_BUILDER_CONFIG"] = str(folder)
    try:
        yield folder
    finally:
        os.environ.pop("REPORT_BUILDER_CONFIG", None)


@pytest.fixture(scope="session")
def smoke(tmp_path_factory):
    """The smoke build from an empty cache (default threads and batch size), then the same command
    again, its imports recorded (`RECORD_IMPORTS`: tests/test_smoke_build.py's no-op rebuild checks read
    it): (folder, first log, second log, first seconds, second seconds). Built once per test run:
    under pytest-xdist the first worker to need it builds it in the run's shared temporary folder
    while another waits on a file lock, then both read it. Tests only read it (or rebuild it as a
    no-op, which keeps the site and every table as they are)."""
    def twice(tmp: Path) -> list:
        (first, t1), (second, t2) = smoke_build(tmp), smoke_build(tmp, record_imports=True)
        return [first, second, t1, t2]

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        tmp = tmp_path_factory.mktemp("smoke")
        return (tmp, *twice(tmp))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this run
    tmp, record = shared / "smoke", shared / "smoke.json"
    with FileLock(str(shared / "smoke.lock")):
        if not record.is_file():
            tmp.mkdir(exist_ok=True)
            record.write_text(json.dumps(twice(tmp)))
    return (tmp, *json.loads(record.read_text()))



# ------------------------------------------------------------------ two workers (`make test`: pytest -n 2)

FIRST = ("tests/test_paper_preset.py", "tests/test_smoke_build.py", "tests/executors/test_ray.py",
         "tests/test_reproducible_build.py", "tests/site/test_hostile.py", "tests/test_wheel.py",
         "tests/test_citations.py", "tests/site/test_browser.py", "tests/test_safety.py")
"""The longest modules, started first so that neither worker ends the run alone on one of them (the
smoke build's module second: the modules after it read that build)."""


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: plain `pytest` (no xdist) runs as well
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist: a whole module per worker at a time (its module-scoped fixtures, such as a Ray
    cluster or a built site, are set up once, on one worker), in the order of the collection below.
    (xdist's own ``--dist loadgroup`` groups nothing under pytest 9.2, ``--dist loadfile`` reorders.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep the order of `pytest_collection_modifyitems`

        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0]

    return ByModule(config, log)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the `FIRST` modules first (every worker collects, and sorts, the same way)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {m: k for k, m in enumerate(FIRST)}
    items.sort(key=lambda it: rank.get(it.nodeid.split("::", 1)[0], len(FIRST)))
