"""Safe to run: never delete what the tool did not create, concurrency-safe cache and site, integrity of
fingerprints and converted models, cleanup on SIGTERM, early checks, nothing private published."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from report_builder import api, guard
from report_builder.cache import Cache
from report_builder.config import from_dict
from tests import site_helpers as h
from cli_here import cli_here

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, cwd=None, env_extra=None, timeout=600):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def _here(capsys, monkeypatch, *args, cwd: Path) -> SimpleNamespace:
    """`_cli` in this process (`cli_here`), for commands refused before any work."""
    return cli_here(capsys, *args, monkeypatch=monkeypatch, cwd=cwd)


def _victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    (v / "thesis").mkdir(parents=True)
    (v / "thesis" / "chapter1.tex").write_text("\\chapter{One}\n")
    return v


# ------------------------------------------------------------------ point 2: never delete foreign files


def test_render_and_clean_refuse_a_foreign_output_directory(tmp_path, capsys, monkeypatch):
    victim = _victim(tmp_path)
    cache = tmp_path / "cache"
    for cmd in (["render"], ["clean"], ["build", "--model", "minilm"]):
        r = _here(capsys, monkeypatch, *cmd, "--out", str(victim), "--cache", str(cache), cwd=tmp_path)
        assert r.returncode != 0, (cmd, r.stdout, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        verb = "clean" if cmd == ["clean"] else "replace"
        assert lines and lines[-1].startswith(f"error: refusing to {verb} the output directory"), r.stderr
        assert "Traceback" not in r.stderr
        assert (victim / "thesis" / "chapter1.tex").read_text() == "\\chapter{One}\n"
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    for out in (".", str(work), str(tmp_path)):
        r = _here(capsys, monkeypatch, "render", "--out", out, "--cache", str(cache), cwd=work)
        assert r.returncode != 0 and "refusing to replace" in r.stderr, (out, r.stderr)
    assert (work / "notes.txt").read_text() == "mine"


def test_site_with_marker_or_empty_dir_is_replaced_foreign_one_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    from report_builder.site.build import render_site

    kw = dict(log=lambda *_: None, figures=h.DUMMY_FIGURES)
    render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=empty, **kw)
    assert (empty / guard.SITE_MARKER).is_file() and (empty / "index.html").is_file()
    (empty / "notes.txt").write_text("a user's own file")  # not in the marker's list: refused, kept
    with pytest.raises(guard.UnsafeOutput, match=r"it holds 1 entry report_builder did not write \('notes.txt'\)"):
        render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=empty, **kw)
    assert (empty / "notes.txt").read_text() == "a user's own file"
    (empty / "notes.txt").unlink()
    (empty / "index.html").write_text("edited")  # a file the build wrote: replaced with the site
    render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=empty, **kw)
    assert (empty / "index.html").read_text() != "edited"
    (empty / guard.SITE_MARKER).write_text("built by report_builder\n")  # an older build's marker lists nothing
    (empty / "stale.txt").write_text("from an earlier build")
    render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=empty, **kw)
    assert not (empty / "stale.txt").exists() and "files: " in (empty / guard.SITE_MARKER).read_text()
    victim = _victim(tmp_path)
    with pytest.raises(guard.UnsafeOutput, match="refusing to replace the output directory"):
        render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=victim, **kw)
    assert (victim / "thesis" / "chapter1.tex").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_cache_directory_must_be_ours(tmp_path, capsys, monkeypatch):
    foreign = tmp_path / "thesis"
    (foreign / "results").mkdir(parents=True)
    (foreign / "results" / "table1.csv").write_text("a,b\n")
    (foreign / "chapter1.tex").write_text("x")
    with pytest.raises(guard.UnsafeOutput, match="refusing to use .* as the cache"):
        Cache(foreign)
    r = _here(capsys, monkeypatch, "clean", "--cache", str(foreign), "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert r.returncode != 0 and "refusing to use" in r.stderr
    assert (foreign / "results" / "table1.csv").exists()
    # nothing is adopted: a folder holding only names the tool writes is refused too (docs/guide/safety.md)
    legacy = tmp_path / "legacy"
    (legacy / "results" / "k21_mixing").mkdir(parents=True)
    (legacy / "last_build.json").write_text("{}")
    with pytest.raises(guard.UnsafeOutput, match="refusing to use .* as the cache"):
        Cache(legacy)
    assert not (legacy / guard.CACHE_MARKER).exists()


# ------------------------------------------------------------------ point 3: concurrency

_STRESS = textwrap.dedent("""
    import json, sys, random
    import pandas as pd
    from report_builder.cache import Cache
    root, worker, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cache = Cache(root)
    df = pd.DataFrame({"x": list(range(200)), "y": [0.5] * 200})
    failures, corrupt = 0, 0
    rnd = random.Random(worker)
    for k in range(m):
        try:
            key = "k%d" % (k % 3)  # few keys: every write races
            if rnd.random() < 0.5:
                e = cache.put("stress", key, {"t": df}, {"w": worker})
            else:
                e = cache.get_or_compute("stress", 1, {"key": key}, lambda: ({"t": df}, {"w": worker}))
            got = cache.get("stress", key) or e
            assert got.tables["t"].equals(df)
        except Exception as exc:  # noqa: BLE001
            failures += 1
            print(type(exc).__name__, exc, file=sys.stderr)
    corrupt = sum("corrupt" in line for line in cache.log)
    print(json.dumps({"failures": failures, "corrupt": corrupt}))
""")


def test_cache_stress_many_processes_one_key(tmp_path):
    n_proc, m = 4, 40
    script = tmp_path / "stress.py"
    script.write_text(_STRESS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache"), str(w), str(m)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(n_proc)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["failures"] for r in results) == 0, results
    assert sum(r["corrupt"] for r in results) == 0, results
    cache = Cache(tmp_path / "cache")
    assert cache.stale_temp() == []
    for d in (cache.root / "stress").iterdir():
        if d.is_dir():
            assert Cache._load(d) is not None  # every published entry verifies


def test_reader_never_deletes_an_entry_being_written(tmp_path):
    """A check failing while another process holds the entry's lock is repeated under the lock."""
    cache = Cache(tmp_path / "cache")
    df = pd.DataFrame({"x": [1, 2, 3]})
    cache.put("a", "k", {"t": df}, {})
    d = cache.path("a", "k")
    real = Cache._load
    calls = []

    def flaky(path):  # the first look catches a half-replaced entry; the re-check under the lock is fine
        calls.append(path)
        if len(calls) == 1:
            raise ValueError("t.parquet does not match its recorded hash")
        return real(path)

    Cache._load = staticmethod(flaky)
    try:
        e = cache.get("a", "k")
    finally:
        Cache._load = staticmethod(real)
    assert e is not None and d.exists() and not cache.log and len(calls) == 2


def _tiny_build_config(tmp_path: Path, model_dir: Path, data_file: Path, out: Path, cache: Path) -> Path:
    cfg = {
        "models": [{"name": "tiny", "source": str(model_dir), "role": "primary_encoder"}],
        "datasets": [{"id": "sentiment-sample", "path": str(data_file), "n": 3, "k24_n": 1, "max_length": 32}],
        "k24": {"top_k": 5, "examples": 1},
        "batch_size": 2,
        # three figures (a K21 table and chart, a K24 chart): drawing all of them twice at once was a third of
        # these builds' CPU; every figure of a site with local sources is read for local paths by
        # tests/site/test_hostile.py::test_published_site_and_versions_have_no_local_paths
        "figures": ["k21-tab2", "k21-fig3", "k24-ctx-ff"],
        "cache_dir": str(cache), "out_dir": str(out),
    }
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.fixture(scope="module")
def concurrent_builds(tmp_path_factory):
    """Two builds of one tiny config started at the same moment on the same cache and output."""
    from tests.test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("concurrent")
    model = tiny_bert_dir(tmp / "models" / "tiny-a", 0)
    data = tmp / "my-reviews.txt"
    data.write_text("a fine film .\nthe plot is thin but the cast is great .\ndull and far too long .\n")
    cfg = _tiny_build_config(tmp, model, data, tmp / "out" / "site", tmp / "cache")
    work = tmp / "work"
    work.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "report_builder", "build", "--config", str(cfg), "--no-progress", "--threads", "1"]
    procs = [subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    runs = [(p, *p.communicate(timeout=900)) for p in procs]
    return tmp, cfg, work, runs


@pytest.mark.slow
def test_two_concurrent_builds_both_succeed(concurrent_builds):
    tmp, cfg, work, runs = concurrent_builds
    for p, out, err in runs:
        assert p.returncode == 0, err[-3000:]
    site = tmp / "out" / "site"
    assert (site / "index.html").is_file() and (site / guard.SITE_MARKER).is_file()
    assert (site / "config.resolved.yaml").is_file()
    # the shared entries were computed once: the second build reused what the first wrote
    logs = runs[0][1] + runs[1][1]
    assert "corrupt" not in logs
    leftovers = [p.name for p in (tmp / "out").iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == []
    assert Cache(tmp / "cache").stale_temp() == []
    # generated pages were written next to the output, not into the working directory
    assert not (work / "docs").exists()


# ------------------------------------------------------------------ point 7: nothing private published


@pytest.mark.slow
def test_published_site_has_no_local_paths_and_describes_user_data(concurrent_builds):
    tmp, cfg, work, runs = concurrent_builds
    site = tmp / "out" / "site"
    assert (site / "figures" / "k21-tab2" / "provenance.json").is_file()  # the figures were read too
    assert h.private_text(site, [str(tmp), str(Path.home()), str(ROOT)]) == []
    resolved = yaml.safe_load((site / "config.resolved.yaml").read_text())
    assert resolved["models"][0]["source"] == "<local>/tiny-a"
    assert resolved["datasets"][0]["path"] == "<local>/my-reviews.txt"
    models_page = (site / "models.html").read_text()
    assert "my-reviews.txt" in models_page and "Pang &amp; Lee" not in models_page


def test_public_path(tmp_path, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "ucache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    assert guard.public_path(str(tmp_path / "sub" / "x.txt")) == "sub/x.txt"
    assert guard.public_path(str(tmp_path / "ucache" / "models" / "m")) == "<cache>/models/m"
    assert guard.public_path(str(Path.home() / "nowhere-xyz" / "m")).startswith(("<home>/", "<local>/"))
    assert guard.public_path("/opt/somewhere/model-dir") == "<local>/model-dir"
    assert guard.public_path("minilm") == "minilm" and guard.public_path("bert-base-uncased") == "bert-base-uncased"


def test_user_dataset_file_gets_its_own_datasheet(tmp_path):
    from report_builder.data import load_eval_set

    f = tmp_path / "mine.txt"
    f.write_text("one line .\nanother line .\n")
    es = load_eval_set("sentiment-sample", path=str(f))
    sheet = es.datasheet
    assert "mine.txt" in sheet["source"] and "sha256" in sheet["source"] and "Pang" not in sheet["source"]
    assert "Pang" not in sheet["licence"] and sheet["size"] == 2 and "2 items" in sheet["built"]
    assert "Pang" in load_eval_set("sentiment-sample", n=2).datasheet["source"]  # the built-in sample


def test_model_path_that_is_a_file_is_named_as_such(tmp_path, capsys, monkeypatch):
    f = tmp_path / "pytorch_model.bin"
    f.write_bytes(b"\0" * 8)
    r = _here(capsys, monkeypatch, "check", "--model", str(f), cwd=tmp_path)
    assert r.returncode != 0 and "is a file" in r.stderr and "does not exist" not in r.stderr


# ------------------------------------------------------------------ point 4: integrity


def test_fingerprint_follows_content_for_same_size_same_mtime_replacement(tmp_path, monkeypatch):
    from report_builder.models.fingerprints import hash_files

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "ucache"))
    w = tmp_path / "model.safetensors"
    w.write_bytes(b"A" * 4096)
    st = w.stat()
    fp1 = hash_files([w])
    assert hash_files([w]) == fp1  # memoised
    # in place, same size, mtime restored to the nanosecond (cp -p onto the file): same inode
    with open(w, "r+b") as f:
        f.write(b"B" * 4096)
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert w.stat().st_ino == st.st_ino and w.stat().st_mtime_ns == st.st_mtime_ns
    fp2 = hash_files([w])
    assert fp2 != fp1
    # replaced by rename (rsync -a): new inode, same size and mtime
    new = tmp_path / "incoming"
    new.write_bytes(b"C" * 4096)
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, w)
    fp3 = hash_files([w])
    assert fp3 not in (fp1, fp2)
    memo = json.loads((tmp_path / "ucache" / "fingerprints.json").read_text())
    assert len(memo) == 3


@pytest.mark.slow
def test_damaged_converted_smollm2_is_rebuilt_and_clean_all_removes_it(tmp_path, monkeypatch):
    from report_builder.models import convert, sources

    real_dir = sources.embedded_dir("smollm2")  # converts into the real user cache if needed
    assert convert.verify_converted(real_dir) is None
    ucache = tmp_path / "ucache"
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(ucache))
    copy = ucache / "models" / real_dir.name
    shutil.copytree(real_dir, copy)
    assert sources.embedded_dir("smollm2") == copy
    st = (copy / "model.safetensors").stat()
    with open(copy / "model.safetensors", "r+b") as f:  # flip bytes in the middle of the weights
        f.seek(st.st_size // 2)
        f.write(b"\xff" * 64)
    assert "does not match" in convert.verify_converted(copy)
    converted = []

    def fake_convert(e, out):  # the real conversion, minus its ~20 s: copy pristine files
        converted.append(out)
        for p in real_dir.iterdir():
            if p.is_file() and p.name != guard.MODEL_MARKER:
                shutil.copy(p, out / p.name)

    monkeypatch.setattr(convert, "convert_gguf", fake_convert)
    assert sources.embedded_dir("smollm2") == copy and len(converted) == 1
    assert convert.verify_converted(copy) is None
    # truncated weights (no marker: a pre-marker copy) are converted again too
    (copy / guard.MODEL_MARKER).unlink()
    with open(copy / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    sources.embedded_dir("smollm2")
    assert len(converted) == 2 and convert.verify_converted(copy) is None
    # clean --all removes converted models and stale temp dirs (a dead process's), not live ones
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = ucache / "models" / f".{copy.name}.tmp-{dead.pid}-abcd1234"
    stale.mkdir()
    live = ucache / "models" / f".{copy.name}.tmp-{os.getpid()}-abcd1234"
    live.mkdir()
    cfg = from_dict({"preset": "smoke", "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")})
    msg = api.clean(cfg, all=True)
    assert "1 converted models" in msg and not copy.exists() and not stale.exists() and live.exists()


# ------------------------------------------------------------------ point 6 (part): SIGTERM, sweep, early checks

_SLOW_RENDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import report_builder.site.build as b
    def slow(docs, site, **kw):
        Path(sys.argv[1]).write_text("ready")
        time.sleep(120)
    b._mkdocs_build = slow
    from report_builder.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.mark.slow
def test_sigterm_during_render_removes_temp_dirs(concurrent_builds, tmp_path):
    tmp, cfg, work, runs = concurrent_builds
    script = tmp_path / "slow.py"
    script.write_text(_SLOW_RENDER)
    ready = tmp_path / "ready"
    out = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    p = subprocess.Popen([sys.executable, str(script), str(ready), "render", "--config", str(cfg), "--out", str(out)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not ready.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert ready.exists(), p.communicate()[1][-2000:]
    assert [c for c in tmp_path.iterdir() if ".tmp-" in c.name]  # the render's temp dirs exist now
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    assert "Traceback" not in err
    assert [c.name for c in tmp_path.iterdir() if ".tmp-" in c.name] == []
    assert not out.exists()


def test_stale_temp_dirs_of_dead_processes_are_swept_at_start(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "site"
    stale_site = tmp_path / f".site.tmp-{dead.pid}-0000aaaa"
    stale_site.mkdir()
    live_site = tmp_path / f".site.tmp-{os.getpid()}-0000bbbb"
    live_site.mkdir()
    foreign = tmp_path / f".thesis.tmp-{dead.pid}-0000cccc"  # not a name a build of `site` makes
    foreign.mkdir()
    cache = Cache(tmp_path / "cache")
    stale_entry = cache.root / "k21_mixing" / f".abc.tmp-{dead.pid}-0000dddd"
    stale_entry.mkdir(parents=True)
    from report_builder.site.build import render_site

    render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=out, log=lambda *_: None,
                figures=h.DUMMY_FIGURES)
    assert not stale_site.exists() and live_site.exists() and foreign.exists()
    # another output: this one holds the dummy figures' versions, which a smoke build refuses to drop
    cfg = from_dict({"preset": "smoke", "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "smoke")})
    api.preflight(cfg)
    assert not stale_entry.exists()


def test_another_hosts_temp_dirs_are_swept_by_age_only(tmp_path):
    """On a cluster sharing a cache (docs/guide/cluster.md), a pid in another host's temp name
    means nothing here: such a folder is left alone until it is old, while this host's dead ones go."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    other = "00000000" if guard.host_tag() != "00000000" else "11111111"
    here = tmp_path / f".abc.tmp-{dead.pid}@{guard.host_tag()}-0000aaaa"
    there = tmp_path / f".abd.tmp-{dead.pid}@{other}-0000bbbb"
    there_old = tmp_path / f".abe.tmp-{dead.pid}@{other}-0000cccc"
    for d in (here, there, there_old):
        d.mkdir()
    os.utime(there_old, (time.time() - 7200,) * 2)
    assert sorted(guard.sweep([tmp_path])) == sorted([here, there_old])
    assert there.is_dir()
    assert guard.make_tmp_dir(tmp_path / "x").name.startswith(f".x.tmp-{os.getpid()}@{guard.host_tag()}-")
    assert guard.stale_temp_dirs(tmp_path) == []  # this live process's own folder


def test_unwritable_output_or_cache_fails_before_any_analysis(tmp_path, monkeypatch):
    cfg = from_dict({"models": [{"name": "m", "source": "minilm", "role": "primary_encoder"}],
                     "datasets": [{"id": "wiki", "n": 2}], "cache_dir": str(tmp_path / "cache"),
                     "out_dir": str(tmp_path / "ro" / "site")})
    ran = []
    monkeypatch.setattr(api, "analyze", lambda *a, **k: ran.append(1))
    real = guard.tempfile.mkstemp

    def mkstemp(*a, dir=None, **k):  # noqa: A002 - root ignores permissions: simulate EACCES
        if str(dir).startswith(str(tmp_path / "ro")):
            raise PermissionError(13, "Permission denied")
        return real(*a, dir=dir, **k)

    monkeypatch.setattr(guard.tempfile, "mkstemp", mkstemp)
    with pytest.raises(guard.UnsafeOutput, match="not writable.*with out_dir "):
        api.build(cfg, log=lambda *_: None, progress=False)
    cfg2 = from_dict({**cfg.to_dict(), "preset": "custom", "cache_dir": str(tmp_path / "ro" / "cache"),
                      "out_dir": str(tmp_path / "site")})
    with pytest.raises(guard.UnsafeOutput, match="cache directory .* not writable.*with cache_dir "):
        api.build(cfg2, log=lambda *_: None, progress=False)
    assert ran == []
