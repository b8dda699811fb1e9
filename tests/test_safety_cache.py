"""A results cache is used by one `clean` or by builds at a time, and is never left without its marker
(issue #30; docs/guide/safety.md "One clean or builds at a time"). The races are played deterministically:
the test (or a child process it waits for) holds the lock, then runs the other command."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from report_builder import cache_lock as cache_mod, guard
from report_builder.cache import Cache
from report_builder.cache_lock import CacheBusy

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, cwd, wait="0.5", timeout=300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "REPORT_BUILDER_LOCK_WAIT": wait}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def _one_error(r, code: int, *words: str) -> str:
    assert r.returncode == code, (r.returncode, r.stdout[-1500:], r.stderr[-3000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in r.stderr and len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _tree(d: Path) -> list[str]:
    """The files and folders of ``d`` but the lock file (which a lock holder creates)."""
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.name != guard.CACHE_LOCK)


def _cache(root: Path) -> Cache:
    c = Cache(root)
    c.put("k21_mixing", "a" * 20, {"t": pd.DataFrame({"x": [1, 2]})}, {})
    return c


_HOLD = """
import sys, time
from report_builder.cache_lock import using
with using(sys.argv[1], sys.argv[2], exclusive=sys.argv[3] == "1"):
    print("held", flush=True)
    time.sleep(float(sys.argv[4]))
"""


def _holder(cache_dir: Path, command: str, exclusive: bool, seconds: float) -> subprocess.Popen:
    """A child process holding the cache's lock as ``command`` for ``seconds`` (returns once it holds it)."""
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(cache_dir), command, "1" if exclusive else "0",
                          str(seconds)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "held"
    return p


def test_clean_during_a_build_is_refused_and_a_build_during_a_clean(tmp_path):
    cache_dir, site = tmp_path / "cache", tmp_path / "site"
    _cache(cache_dir)
    before = _tree(cache_dir)
    with cache_mod.using(cache_dir, "build"):  # a build of this cache is running (this process)
        r = _cli("clean", "--cache", str(cache_dir), "--out", str(site), cwd=tmp_path)
        _one_error(r, 3, f"the results cache {cache_dir} is in use by `build` (pid {os.getpid()}", "`clean` waited 0.5 s")
        # variant: `clean --all` (also the user cache's): refused the same way, before it removes anything
        r = _cli("clean", "--all", "--cache", str(cache_dir), "--out", str(site), cwd=tmp_path)
        _one_error(r, 3, "in use by `build`")
        assert _tree(cache_dir) == before
    # the reverse: a `clean` holds the cache; `render` and `build` stop in one line before any work
    holder = _holder(cache_dir, "clean", True, 60)
    try:
        r = _cli("render", "--cache", str(cache_dir), "--out", str(site), cwd=tmp_path)
        _one_error(r, 3, "in use by `clean` (pid", "`render` waited")
        r = _cli("build", "--preset", "smoke", "--no-progress", "--cache", str(cache_dir), "--out", str(site),
                 cwd=tmp_path)
        _one_error(r, 3, "in use by `clean` (pid", "`build` waited")
        assert not site.exists() and _tree(cache_dir) == before
    finally:
        holder.kill()
        holder.wait()
    # nobody holds it any more: `clean` removes the cache, lock file and marker included
    r = _cli("clean", "--cache", str(cache_dir), "--out", str(site), cwd=tmp_path)
    assert r.returncode == 0 and not cache_dir.exists(), r.stderr


def test_builds_share_the_cache_and_clean_waits_for_a_short_one(tmp_path):
    cache_dir = tmp_path / "cache"
    _cache(cache_dir)
    holder = _holder(cache_dir, "build", False, 1.5)
    try:
        t0 = time.monotonic()
        with cache_mod.using(cache_dir, "render", wait=0):  # two builds or renders run side by side
            assert time.monotonic() - t0 < 1
        with pytest.raises(CacheBusy, match=r"in use by `build` \(pid \d+, started "):
            with cache_mod.using(cache_dir, "clean", exclusive=True, wait=0):
                pass
        # a `clean` waits for a build that ends within its wait, then runs
        r = _cli("clean", "--cache", str(cache_dir), "--out", str(tmp_path / "site"), cwd=tmp_path, wait="30")
        assert r.returncode == 0 and "1 cache entries" in r.stdout and not cache_dir.exists(), r.stderr
        assert time.monotonic() - t0 >= 1.0
    finally:
        holder.kill()
        holder.wait()


def test_the_cache_is_never_left_without_its_marker(tmp_path):
    # `clean` killed after removing the marker but before the lock file: the folder counts as empty
    d = tmp_path / "cache"
    d.mkdir()
    (d / guard.CACHE_LOCK).write_text("")
    assert Cache.existing(d) is None
    Cache(d)  # a build takes it as a new cache (and marks it)
    assert (d / guard.CACHE_MARKER).is_file()
    # a lock file planted as a link is refused, never followed
    e = tmp_path / "other"
    _cache(e)
    (e / guard.CACHE_LOCK).symlink_to(tmp_path / "victim")
    with pytest.raises(guard.UnsafeOutput, match="symbolic link"):
        with cache_mod.using(e, "build"):
            pass
    assert not (tmp_path / "victim").exists()
    # a `clean` that finds a file someone else put in the cache keeps the marker with it
    f = tmp_path / "third"
    _cache(f)
    (f / "notes.txt").write_text("mine")
    r = _cli("clean", "--cache", str(f), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert r.returncode == 0 and "notes.txt" in r.stdout, r.stderr
    assert sorted(p.name for p in f.iterdir()) == [guard.CACHE_MARKER, "notes.txt"]
