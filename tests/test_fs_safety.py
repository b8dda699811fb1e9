"""Adopt nothing, write nothing outside ``--out`` and ``--cache``, trust no cache entry that cannot be
proved, refuse before any work (issues #22 and #23; docs/guide/safety.md). Each case through the CLI, with a
variant of its payload; the renders read the session smoke build's results (a copy)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from report_builder import guard
from report_builder.cache import Cache
from cli_here import cli_here

ROOT = Path(__file__).resolve().parents[1]
SITE_DIR = "site"  # `site_state.SITE_DIR`: where a results cache keeps each output's state


def _state(out: Path, cache: Path):
    from report_builder.site import site_state

    return site_state.site_state(out, cache)
FEW = ["k21-tab2", "k21-fig2"]  # a table and an inlined diagram: a render of the smoke cache in seconds


def _cli(*args, cwd, env_extra=None, timeout=300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def _here(capsys, monkeypatch, cwd: Path, *args: str) -> SimpleNamespace:
    """`_cli` in this process (`cli_here`), for commands refused before any work."""
    return cli_here(capsys, *args, monkeypatch=monkeypatch, cwd=cwd)


def _refused(r, code: int, *words: str) -> str:
    """The one ``error:`` line of a refused command (exit ``code``, no traceback), holding ``words``."""
    assert r.returncode == code, (r.returncode, r.stdout[-1500:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], r.stderr
    for w in words:
        assert w in errors[0], errors[0]
    return errors[0]


def _tree(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*"))


def _few(cwd: Path, **keys) -> Path:
    p = cwd / "few.yaml"
    p.write_text(yaml.safe_dump({"preset": "smoke", "figures": FEW, **keys}))
    return p


def _render(cwd: Path, cache: Path, out: Path, *extra: str, **keys):
    return _cli("render", "--config", str(_few(cwd, **keys)), "--cache", str(cache), "--out", str(out), *extra,
                cwd=cwd)


@pytest.fixture(scope="module")
def results(smoke, tmp_path_factory):
    """The smoke build's results cache without the site state of its output."""
    src = smoke[0] / "cache"
    dst = tmp_path_factory.mktemp("results") / "cache"
    shutil.copytree(src, dst, ignore=lambda d, names: [SITE_DIR] if Path(d) == src else [])
    return dst


def _copy(results: Path, to: Path) -> Path:
    shutil.copytree(results, to)
    return to


# ------------------------------------------------------------------ adopt nothing; clean only what is ours


@pytest.mark.parametrize("payload", ["results/exp1/metrics.csv", "models/bert/config.json", "freq/counts.txt",
                                     "locks/a.lock", "last_build.json"])
def test_no_folder_is_adopted_as_a_cache(tmp_path, payload, capsys, monkeypatch):
    exp = tmp_path / "experiment"
    (exp / payload).parent.mkdir(parents=True, exist_ok=True)
    (exp / payload).write_text("{}" if payload.endswith(".json") else "epoch,acc\n1,0.9\n")
    before = _tree(exp)
    cmds = [["clean"]] + ([["render"]] if payload.startswith(("results", "last")) else [])
    for cmd in cmds:
        r = _here(capsys, monkeypatch, tmp_path, *cmd, "--cache", str(exp), "--out", str(tmp_path / "site"))
        _refused(r, 3, "refusing to use", "as the cache")
        assert _tree(exp) == before and not (exp / guard.CACHE_MARKER).exists()
    assert not (tmp_path / "site").exists()


def test_clean_creates_nothing_removes_only_its_own_and_names_it(tmp_path):
    # a missing cache stays missing; nothing (no marker, no lock file) appears anywhere
    r = _cli("clean", "--cache", str(tmp_path / "none"), "--out", str(tmp_path / "nosite"), cwd=tmp_path)
    assert r.returncode == 0 and "no cache at" in r.stdout, r.stderr
    assert _tree(tmp_path) == []
    empty = tmp_path / "empty"  # variant: an empty folder is not marked either
    empty.mkdir()
    assert _cli("clean", "--cache", str(empty), "--out", str(tmp_path / "nosite"), cwd=tmp_path).returncode == 0
    assert _tree(tmp_path) == ["empty"]

    df = pd.DataFrame({"x": [1, 2]})
    for root, foreign in ((tmp_path / "c1", True), (tmp_path / "c2", False)):
        cache = Cache(root)
        cache.put("k21_mixing", "a" * 20, {"t": df}, {})
        cache.get_or_compute("k24_ctx", 1, {"p": 1}, lambda: ({"t": df, "u": df}, {}))
        site = tmp_path / f"site-{root.name}"
        site.mkdir()
        (site / guard.SITE_MARKER).write_text("")
        (site / "index.html").write_text("<p>old</p>")
        if foreign:  # files the tool did not write stay, and are named
            (cache.root / "k21_mixing" / "notes.txt").write_text("mine")
            (cache.root / "k24_ctx" / ("b" * 20)).mkdir()
            (cache.root / "k24_ctx" / ("b" * 20) / "meta.json").write_text('{"tables": {}}')
            (cache.root / "k24_ctx" / ("b" * 20) / "draft.txt").write_text("not an entry")
            (root / "mine.txt").write_text("mine")
        r = _cli("clean", "--cache", str(root), "--out", str(site), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        msg = r.stdout
        assert f"2 cache entries from {root / 'results'}" in msg and f"the site {site}/" in msg, msg
        assert not site.exists() and not [p for p in tmp_path.rglob("*.lock")]
        if foreign:
            assert "left 3" in msg and "notes.txt" in msg and "mine.txt" in msg, msg
            assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == [
                guard.CACHE_MARKER, "mine.txt", f"results/k21_mixing/notes.txt", f"results/k24_ctx/{'b' * 20}/draft.txt",
                f"results/k24_ctx/{'b' * 20}/meta.json"]
        else:
            assert not root.exists() and "the empty cache" in msg, msg


@pytest.mark.parametrize("foreign", [False, True])
def test_clean_all_empties_reproduce_default_cache(tmp_path, foreign):
    """`clean --all` removes ``<user cache>/reproduce`` (`reproduce`'s default cache) as it removes the
    other user-cache entries the tool made: its entries and the figures `reproduce` drew, then the folder;
    a file there it did not write stays and is named, and a ``reproduce`` folder without the cache marker
    (the user's) is not touched (before: the whole folder was left, entries and all)."""
    ucache = tmp_path / "ucache"
    d = ucache / "reproduce"
    env = {"REPORT_BUILDER_CACHE": str(ucache)}
    cache = Cache(d)
    cache.put("k21_mixing", "a" * 20, {"t": pd.DataFrame({"x": [1, 2]})}, {})
    drawn = d / "reproduced" / "k21-fig3-0123456789ab"  # where `reproduce` draws (Cache.reproduced)
    drawn.mkdir(parents=True)
    (drawn / "chart.svg").write_text("<svg/>")
    if foreign:
        (d / "reproduced" / "my-notes").mkdir()
        (d / "mine.txt").write_text("mine")
    r = _cli("clean", "--all", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "o"), cwd=tmp_path,
             env_extra=env)
    assert r.returncode == 0, r.stderr
    assert f"from reproduce's cache {d}: 1 cache entries from {d / 'results'}, 1 reproduced figures" in r.stdout
    if foreign:
        assert _tree(d) == [guard.CACHE_MARKER, "mine.txt", "reproduced", "reproduced/my-notes"]
        assert "left 2" in r.stdout and "mine.txt" in r.stdout and "my-notes" in r.stdout, r.stdout
    else:
        assert not d.exists() and f"the empty cache {d}/" in r.stdout, r.stdout
    # variant: a `reproduce` folder of the user's (no marker) is left as it is, and named
    shutil.rmtree(d, ignore_errors=True)
    (d / "results").mkdir(parents=True)
    (d / "results" / "exp.csv").write_text("x\n1\n")
    r = _cli("clean", "--all", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "o"), cwd=tmp_path,
             env_extra=env)
    assert r.returncode == 0 and _tree(d) == ["results", "results/exp.csv"] and str(d) in r.stdout, r.stdout


def test_clean_all_removes_only_converted_copies_it_made(tmp_path):
    """``<user cache>/models/``: `clean --all` removed every folder whose name starts like a converted copy
    (``smollm2-``, ``gemma3-270m-``), a user's own ``smollm2-my-finetune/`` and its weights included. Now
    only a copy carrying the model marker, or named exactly prefix + 16-hex fingerprint (a copy from
    before the marker); the others are named and kept."""
    models = tmp_path / "ucache" / "models"
    mine = {"smollm2-my-finetune": "model.safetensors", "gemma3-270m-notes": "README"}
    ours = {"smollm2-0123456789abcdef": "model.safetensors", "gemma3-270m-mine-but-marked": guard.MODEL_MARKER}
    for name, f in {**mine, **ours}.items():
        (models / name).mkdir(parents=True)
        (models / name / f).write_text("{}")
    r = _cli("clean", "--all", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "o"), cwd=tmp_path,
             env_extra={"REPORT_BUILDER_CACHE": str(tmp_path / "ucache")})
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in models.iterdir()) == sorted(mine), r.stdout
    assert f"2 converted models from {models}" in r.stdout and "left 2" in r.stdout
    assert all(str(models / name) in r.stdout for name in mine)


def test_clean_refuses_symlinked_results_or_out(tmp_path):
    victim = tmp_path / "victim"
    (victim / "exp" / ("a" * 20)).mkdir(parents=True)
    (victim / "exp" / ("a" * 20) / "meta.json").write_text('{"tables": {}}')  # looks like an entry
    cache = Cache(tmp_path / "cache")
    cache.root.symlink_to(victim, target_is_directory=True)
    r = _cli("clean", "--cache", str(cache.base), "--out", str(tmp_path / "site"), cwd=tmp_path)
    _refused(r, 3, "refusing to clean the results folder", "symbolic link")
    assert (victim / "exp" / ("a" * 20) / "meta.json").is_file()
    cache.root.unlink()
    for target in ("marked", "foreign"):  # variant: --out is a link to a site, or to someone's folder
        d = tmp_path / target
        d.mkdir()
        (d / ("index.html" if target == "marked" else "thesis.tex")).write_text("x")
        if target == "marked":
            (d / guard.SITE_MARKER).write_text("")
        link = tmp_path / f"link-{target}"
        link.symlink_to(d, target_is_directory=True)
        r = _cli("clean", "--cache", str(cache.base), "--out", str(link), cwd=tmp_path)
        _refused(r, 3, "symbolic link")
        assert link.is_symlink() and len(list(d.iterdir())) == (2 if target == "marked" else 1)


def test_clean_of_a_folder_it_did_not_make_says_it_refuses_to_clean(tmp_path):
    """`clean` of someone's folder said "refusing to replace the output directory ...; choose a new or empty
    directory with --out" (a build's words): it names what it refuses, that nothing was removed, and no swap."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("x")
    site = tmp_path / "site"  # variant: a built site holding a file its build did not write
    site.mkdir()
    (site / "index.html").write_text("<p>old</p>")
    (site / guard.SITE_MARKER).write_text('built by report_builder\nfiles: ["index.html"]\n')
    (site / "CNAME").write_text("example.org\n")
    for out, words in ((victim, ("has no .report_builder-site marker",)),
                       (site, ("'CNAME'", "which cleaning it would delete; move it out first"))):
        r = _cli("clean", "--cache", str(tmp_path / "cache"), "--out", str(out), cwd=tmp_path)
        line = _refused(r, 3, f"refusing to clean the output directory {out}:", "nothing was removed", *words)
        assert "replac" not in line and "new or empty directory" not in line, line
    assert (victim / "thesis.tex").read_text() == "x" and (site / "CNAME").is_file() and (site / "index.html").is_file()


# ------------------------------------------------------------------ refused before any work


def test_cache_and_output_never_nest(tmp_path, capsys, monkeypatch):
    s = tmp_path / "s"
    for cache, out in ((s / "cache", s), (s / "out" / "cache", s / "out"), (s, s / "site"), (s, s)):
        r = _here(capsys, monkeypatch, tmp_path, "render", "--cache", str(cache), "--out", str(out))
        _refused(r, 3, "--cache", "--out")
        assert not s.exists()
    r = _here(capsys, monkeypatch, tmp_path, "build", "--preset", "smoke", "--no-progress", "--cache", str(s / "cache"),
              "--out", str(s))
    _refused(r, 3, "is inside --out")
    assert not s.exists() and "analyses:" not in r.stdout


def test_a_mount_point_is_no_output(tmp_path, monkeypatch, capsys):
    """An empty mounted volume as --out (a container's ``-v ...:/out``) was adopted, then the swap's rename
    failed with EBUSY after all the work: an internal error. Refused before any work, in one line."""
    from report_builder import cli

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == mnt or real(p))
    with pytest.raises(guard.UnsafeOutput, match="mount point"):
        guard.check_replaceable(mnt, guard.SITE_MARKER, "the output directory", "--out")
    guard.check_replaceable(mnt / "site", guard.SITE_MARKER, "the output directory", "--out")  # inside it: fine
    monkeypatch.setattr(cli.api, "build", lambda *a, **k: pytest.fail("a build ran"))
    assert cli.main(["render", "--preset", "smoke", "--cache", str(tmp_path / "c"), "--out", str(mnt)]) == 3
    assert "it is a mount point" in capsys.readouterr().err and list(mnt.iterdir()) == []


def test_an_input_inside_the_output_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """A configuration file, a data file or folder, or a local model inside --out: the build read it, then
    the site swap deleted it with the old site (``site/my-config.yaml`` gone after the build). Refused in one
    line before any work; ``build --plan`` (no site written) still reads it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / guard.SITE_MARKER).write_text("")
    conf = site / "my-config.yaml"
    conf.write_text("preset: smoke\n")
    (site / "data").mkdir()
    (site / "data" / "mine.txt").write_text("the film is good .\n")
    outside = tmp_path / "cfg.yaml"
    cases = {"--config": ["--config", str(conf)],
             "datasets[0].path": ["--config", str(outside), "--set", f"datasets.0.path={site / 'data' / 'mine.txt'}"],
             "data_dir": ["--preset", "smoke", "--data-dir", str(site / "data")],
             "models[0].source": ["--preset", "smoke", "--set", f"models.0.source={site / 'data'}"]}
    outside.write_text("preset: smoke\ndatasets: [{id: mine, path: x.txt, n: 1}]\n")
    for what, argv in cases.items():
        r = _here(capsys, monkeypatch, tmp_path, "build", *argv, "--no-progress", "--cache", str(tmp_path / "c"),
                  "--out", str(site))
        _refused(r, 3, what, "is inside --out", "the site swap would delete it")
        assert not (tmp_path / "c").exists() and "analyses:" not in r.stdout
    assert sorted(p.name for p in site.iterdir()) == sorted([guard.SITE_MARKER, "my-config.yaml", "data"])
    r = _here(capsys, monkeypatch, tmp_path, "build", "--plan", "--config", str(conf), "--cache", str(tmp_path / "c"),
              "--out", str(site))
    assert r.returncode == 0, r.stderr


def test_blocked_state_path_is_found_before_any_work(tmp_path):
    cache = Cache(tmp_path / "cache")
    out = tmp_path / "site"
    (cache.base / SITE_DIR).write_text("a file where the state folder goes")
    r = _cli("build", "--preset", "smoke", "--no-progress", "--cache", str(cache.base), "--out", str(out), cwd=tmp_path)
    _refused(r, 3, "state folder")
    assert "analyses:" not in r.stdout and not cache.root.exists() and not out.exists()
    (cache.base / SITE_DIR).unlink()  # variant: the output's own state folder is blocked
    blocked = _state(out, cache.base).root
    blocked.parent.mkdir()
    blocked.write_text("blocked")
    r = _cli("build", "--preset", "smoke", "--no-progress", "--cache", str(cache.base), "--out", str(out), cwd=tmp_path)
    _refused(r, 3, "state folder", blocked.name)
    assert not cache.root.exists() and not out.exists()


@pytest.mark.slow
def test_weights_that_are_not_regular_files_are_refused(tmp_path):
    from tests.test_pipeline import tiny_bert_dir

    model = tiny_bert_dir(tmp_path / "m", 0)
    weights = model / "model.safetensors"
    for kind, cmd in (("zero", "plan"), ("fifo", "build")):
        weights.unlink()
        if kind == "zero":
            weights.symlink_to("/dev/zero")
        else:
            os.mkfifo(weights)
        args = [cmd, "--model", str(model), "--cache", str(tmp_path / "cache")]
        r = _cli(*args, *(["--out", str(tmp_path / "site")] if cmd == "build" else []), cwd=tmp_path, timeout=180)
        _refused(r, 4, "refusing to read model file", "not a regular file",
                 "character device" if kind == "zero" else "FIFO")


# ------------------------------------------------------------------ nothing outside --out and --cache


@pytest.mark.slow
def test_render_writes_nothing_beside_out_and_outputs_keep_their_own_renders(results, tmp_path):
    cache = _copy(results, tmp_path / "cache")
    parent = tmp_path / "public"
    parent.mkdir()
    for name in ("a", "b"):
        r = _render(tmp_path, cache, parent / name)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "2 figures rebuilt (2 drawn," in r.stderr
    assert sorted(p.name for p in parent.iterdir()) == ["a", "b"]  # no lock, no .cache beside the outputs
    assert sorted(tmp_path.iterdir()) == sorted([cache, parent, tmp_path / "few.yaml"])
    states = sorted(p.name for p in (cache / SITE_DIR).iterdir() if p.is_dir())
    assert states == sorted(_state(parent / n, cache).root.name for n in ("a", "b"))
    r = _render(tmp_path, cache, parent / "a")  # b's build pruned none of a's renders
    assert r.returncode == 0 and "0 figures rebuilt (0 drawn, 0 drawings reused), 2 unchanged" in r.stderr and "mkdocs skipped" in r.stderr, r.stderr


def _poison(path: Path, marker: str) -> None:
    """Edit a stored file and its SHA-256 in the same entry's meta.json, as an attacker would."""
    import hashlib

    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg"><script>alert("{marker}")</script></svg>')
    meta_p = path.parent.parent / "meta.json" if path.parent.name == "files" else path.parent / "meta.json"
    meta = json.loads(meta_p.read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if "files" in meta:
        meta["files"][path.name] = digest
    else:
        meta["svg"] = digest
    meta_p.write_text(json.dumps(meta))


def _site_text(site: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in site.rglob("*") if p.is_file() and p.suffix in
                   (".html", ".svg", ".json", ".csv"))


@pytest.mark.slow
def test_edited_or_foreign_render_entries_are_rebuilt_never_published(results, tmp_path, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "config"))  # a key of its own: it is replaced below
    cache, site = _copy(results, tmp_path / "cache"), tmp_path / "site"
    assert _render(tmp_path, cache, site).returncode == 0
    state = _state(site, cache)
    renders = state.root / "figure-renders"
    # a figure entry's chart.svg with its digest, and HTML planted in its record (k21-fig2); variant: a
    # drawing of the content-hash render cache with its digest (k21-tab2, whose entry is gone: built again)
    (fig2,) = renders.glob("fig-k21-fig2-*")
    _poison(fig2 / "files" / "chart.svg", "PWNED-FIG")
    meta = json.loads((fig2 / "meta.json").read_text())
    meta["section"]["table_html"] = "<img src=x onerror=alert(1)>PWNED-HTML"
    (fig2 / "meta.json").write_text(json.dumps(meta))
    (tab2,) = renders.glob("fig-k21-tab2-*")
    shutil.rmtree(tab2)
    (drawing,) = [d for d in renders.iterdir() if d.is_dir() and not d.name.startswith("fig-") and
                  (d / "chart.svg").read_bytes() == (site / "figures" / "k21-tab2" / "chart.svg").read_bytes()]
    _poison(drawing / "chart.svg", "PWNED-DRAWING")
    r = _render(tmp_path, cache, site, "--set", "site_url=https://example.org/a/")
    assert r.returncode == 0 and "2 figures rebuilt (1 drawn, 1 drawings reused), 0 unchanged" in r.stderr, r.stderr[-2000:]
    assert "PWNED" not in _site_text(site)
    # variant: entries signed with another key (a restored or copied render cache) are not trusted
    state.key_file.write_bytes(os.urandom(32))
    r = _render(tmp_path, cache, site, "--set", "site_url=https://example.org/b/")
    assert "2 figures rebuilt (2 drawn, 0 drawings reused)" in r.stderr, r.stderr[-2000:]
    # a key others may read is replaced by a new private one (every entry is then drawn again)
    from report_builder.site.site_state import secret

    key = secret(state.key_file)
    os.chmod(state.key_file, 0o644)
    assert secret(state.key_file) not in (None, key) and stat.S_IMODE(state.key_file.stat().st_mode) == 0o600


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """A POSIX ACL as the ``system.posix_acl_*`` xattr stores it (version 2; tag, perm, id)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


@pytest.mark.slow
def test_existing_out_keeps_its_mode_owner_group_and_acl(results, tmp_path):
    cache, site = _copy(results, tmp_path / "cache"), tmp_path / "site"
    site.mkdir()
    none = 0xFFFFFFFF
    acl = _acl((0x01, 7, none), (0x02, 5, 4321), (0x04, 7, none), (0x10, 7, none), (0x20, 0, none))
    try:
        os.setxattr(site, "system.posix_acl_access", acl)
        os.setxattr(site, "system.posix_acl_default", acl)
        os.setxattr(site, "user.rb-test", b"kept")
    except OSError as e:
        pytest.skip(f"this filesystem keeps no ACLs or user xattrs ({e})")
    if os.geteuid() == 0:
        os.chown(site, 4321, 4322)
    os.chmod(site, 0o2770)
    want = site.stat()
    xattrs = {n: os.getxattr(site, n) for n in os.listxattr(site)}
    for variant in ("empty folder", "a previous site"):  # both replaced by the swap (a new inode)
        r = _render(tmp_path, cache, site, *(["--set", "site_url=https://example.org/"] if variant != "empty folder"
                                            else []))
        assert r.returncode == 0, r.stderr[-2000:]
        st = site.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (stat.S_IMODE(want.st_mode), want.st_uid,
                                                                    want.st_gid), variant
        assert {n: os.getxattr(site, n) for n in os.listxattr(site)} == xattrs, variant
        page = site / "index.html"  # written inside the new site: the group and the default ACL are inherited
        assert page.stat().st_gid == want.st_gid and "system.posix_acl_access" in os.listxattr(page), variant


@pytest.mark.slow
def test_tilde_expands_in_every_path_key(results, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _copy(results, home / "c")
    env = {"HOME": str(home), "REPORT_BUILDER_CACHE": str(guard.user_cache_dir())}  # Vega etc. as they are
    cfg = _few(work, out_dir="~/mysite", cache_dir="~/c")
    r = _cli("render", "--config", str(cfg), cwd=work, env_extra=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (home / "mysite" / "index.html").is_file() and _tree(work) == ["few.yaml"]
    cfg = _few(work, out_dir="~", cache_dir="~/c")  # variant: the home folder itself, never a folder named ~
    _refused(_cli("render", "--config", str(cfg), cwd=work, env_extra=env), 3, "home")
    assert _tree(work) == ["few.yaml"]
    from report_builder.config import from_dict

    c = from_dict({"preset": "smoke", "data_dir": "~/data", "datasets": [{"id": "mine", "path": "~/d.txt"}],
                   "models": [{"name": "m", "source": "~/model", "role": "primary_encoder"}]})
    h = os.path.expanduser("~")
    assert (c.data_dir, c.datasets[0].path, c.models[0].source) == (f"{h}/data", f"{h}/d.txt", f"{h}/model")


# ------------------------------------------------------------------ serve stays inside the site


def test_serve_stays_inside_the_site(tmp_path):
    site, outside = tmp_path / "site", tmp_path / "private"
    (site / "figures" / "k21-fig1").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    (site / "index.html").write_text("<p>home</p>")
    (site / "figures" / "k21-fig1" / "data.csv").write_text("a\n1\n")
    (site / guard.SITE_MARKER).write_text("")
    (site / ".env").write_text("TOKEN=1")
    (site / "leak.txt").symlink_to(outside / "secret.txt")
    (site / "leakdir").symlink_to(outside, target_is_directory=True)
    (site / "home.html").symlink_to(site / "index.html")  # a link, even inside the site, is never served
    (site / "env.txt").symlink_to(site / ".env")  # variant: a link to a dotfile of the site
    p = subprocess.Popen([sys.executable, "-m", "report_builder", "serve", "--dir", str(site), "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = p.stdout.readline()
        assert "http://127.0.0.1:" in line, (line, p.stderr.read() if p.poll() is not None else "")
        base = line.split("at ")[1].split()[0]

        def status(path: str) -> int:
            try:
                with urllib.request.urlopen(base + path, timeout=30) as resp:
                    body = resp.read().decode(errors="replace")
                    assert "SECRET" not in body and "TOKEN" not in body
                    return resp.status
            except urllib.error.HTTPError as e:
                return e.code

        assert status("") == 200 and status("index.html") == 200 and status("figures/k21-fig1/data.csv") == 200
        for path in ("leak.txt", "leakdir/secret.txt", "leakdir/", "figures/", "figures/k21-fig1/", ".env",
                     guard.SITE_MARKER, "figures/../.env", "%2eenv", "home.html", "env.txt"):
            assert status(path) == 404, path
    finally:
        p.terminate()
        p.wait(timeout=30)



_CRASH = """
import os, sys
os.replace = lambda *a: os._exit(9)  # killed between writing a record and renaming it into place
what = sys.argv[1]
if what == "last_build":
    from report_builder import last_build
    from report_builder.config import from_dict
    last_build.save(from_dict({"preset": "smoke", "cache_dir": sys.argv[2]}), [], {}, {})
elif what == "memo":
    from report_builder.guard import user_cache_dir
    from report_builder.models.fingerprints import memo_put
    memo_put(user_cache_dir() / "fingerprints.json", "k", "v")
elif what == "freq":
    from report_builder.data import frequency as f
    f.vocab_hash, f.compute_frequency_ranks = (lambda t: "v"), (lambda t, n: {1: 1})
    f.frequency_ranks(None)
else:
    from report_builder.site import assets
    assets._make_bundle = lambda: "bundle"
    assets.vega_bundle()
"""


def test_a_record_write_killed_midway_leaves_a_name_the_next_start_sweeps(tmp_path, monkeypatch):
    """JSON records, memos and the Vega bundle are replaced through one `atomic.write_text`, whose temporary
    sibling is ``.<name>.tmp-<pid>@<host>-…``: a process killed before the rename leaves a name the
    start-of-build sweep proves dead and removes — in the results cache, the output's state folder and the
    user cache (before: ``last_build.tmp<pid>``, ``.freq-….tmp`` and ``vega-….tmp-<pid>`` stayed for ever,
    and nothing swept the cache's top level, the state folder or the user cache but its models)."""
    from report_builder import housekeeping
    from report_builder.config import from_dict
    from report_builder.site import site_state

    ucache, cache, out = tmp_path / "ucache", tmp_path / "cache", tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPORT_BUILDER_CACHE": str(ucache)}
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(ucache))
    Cache(cache)
    kinds = ["last_build", "memo", "freq", "vega"]
    for what in kinds:
        r = subprocess.run([sys.executable, "-c", _CRASH, what, str(cache)], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 9, r.stderr[-2000:]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = site_state.site_state(out, cache)
    state.root.mkdir(parents=True)  # a build killed while it replaced the output's manifest
    (state.root / f".manifest.json.tmp-{dead.pid}@{guard.host_tag()}-0a1b2c3d").write_text("{}")
    left = sorted(p for p in tmp_path.rglob("*") if p.is_file() and p.name != guard.CACHE_MARKER)
    assert len(left) == len(kinds) + 1, left
    assert all(p.name.startswith(".") and guard._TMP_PID.search(p.name) for p in left), left
    live = cache / f".last_build.json.tmp-{guard.tmp_tag()}"  # this process's: alive, never swept
    live.write_text("{}")
    housekeeping.preflight(from_dict({"preset": "smoke", "cache_dir": str(cache), "out_dir": str(out)}))
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file() and p.name != guard.CACHE_MARKER) == [live]



def test_no_hand_made_temporary_names():
    """A file is replaced through `atomic.write_text` (or a `guard.tmp_tag` name), never a ``.tmp<pid>``
    suffix or a ``mkstemp`` name that no sweep can judge."""
    import re

    bad = re.compile(r"with_suffix\(f?\"\.tmp|\.tmp\{os\.getpid|mkstemp\(")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in (ROOT / "report_builder").rglob("*.py") if p.name != "guard.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if bad.search(line)]
    assert found == []
