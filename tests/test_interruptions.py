"""Interrupted, concurrent and failing-disk builds (a robustness pass): a build killed at any moment loses no
published figure version and leaves nothing the next command trips over; a failure of the disk is one line
with its exit code."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from report_builder import atomic, guard
from report_builder.site import build as build_mod
from tests import site_helpers as h


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _versions(site: Path) -> dict[str, list[str]]:
    index = json.loads((site / "figures" / "versions.json").read_text())
    return {fid: sorted(vs) for fid, vs in index["figures"].items()}


def _debris(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


@pytest.fixture(scope="module")
def dummy_site(tmp_path_factory) -> Path:
    """`h.render_dummy_site` rendered once for the module (its ``site`` and ``docs/generated``): the tests
    below start from a copy of it (`_copy_dummy_site`), which is what a render leaves (3-4 s of CPU each)."""
    root = tmp_path_factory.mktemp("dummy-site")
    h.render_dummy_site(root)
    return root


def _copy_dummy_site(dummy_site: Path, tmp_path: Path) -> None:
    """``tmp_path/site`` and ``tmp_path/docs/generated`` as `h.render_dummy_site(tmp_path)` leaves them."""
    for rel in ("site", "docs/generated"):
        shutil.copytree(dummy_site / rel, tmp_path / rel, symlinks=True)


def _killed_mid_swap(dummy_site: Path, tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    """A site whose build was killed (SIGKILL, power loss) between the two renames of the swap: the old site
    renamed aside as a dead process's ``.site.old-…``, the new one not yet in its place."""
    _copy_dummy_site(dummy_site, tmp_path)
    site = tmp_path / "site"
    before = _versions(site)
    site.rename(tmp_path / f".site.old-{_dead_pid()}@{guard.host_tag()}-0a1b2c3d")
    return site, before


def test_a_build_killed_between_the_swap_renames_loses_no_published_version(dummy_site, tmp_path):
    """Before: the next build's sweep removed the dead process's ``.site.old-…`` -- the only copy of every
    published version -- and built a site without them (their permalinks gone). Now the old site is put back
    first, and the next build carries its versions."""
    site, before = _killed_mid_swap(dummy_site, tmp_path)
    tables = h._dummy_tables()
    tables["k21_tokens"] = tables["k21_tokens"].assign(**{"ATTNRESLN-N": tables["k21_tokens"]["ATTNRESLN-N"] * 0.5})
    logs: list[str] = []
    build_mod.render_site(tables, h.DUMMY_ROLES, h.provenance(), out_dir=site, log=logs.append,
                          figures=h.DUMMY_FIGURES)
    after = _versions(site)
    assert all(set(hs) <= set(after.get(fid, [])) for fid, hs in before.items()), (before, after)
    assert after != before  # the changed figures' new versions beside the earlier ones
    assert any("put back" in line for line in logs), logs
    assert _debris(tmp_path) == []


def test_clean_after_a_build_killed_mid_swap_keeps_the_published_versions(dummy_site, tmp_path):
    """``clean`` keeps a site's published versions; before, after a build killed between the swap's renames,
    it swept the ``.site.old-…`` holding them (and said it removed "1 stale temporary folder")."""
    from report_builder import housekeeping
    from report_builder.config import from_dict

    site, before = _killed_mid_swap(dummy_site, tmp_path)
    msg = housekeeping.clean(from_dict({"preset": "smoke", "cache_dir": str(tmp_path / "cache"),
                                        "out_dir": str(site)}), log=lambda *_: None)
    assert "kept its 3 published figure versions" in msg, msg
    assert all((site / "figures" / fid / hs[0] / "data.csv").is_file() for fid, hs in before.items()), msg
    assert _debris(tmp_path) == []


def test_an_interrupted_removal_of_the_old_site_is_never_taken_for_it(tmp_path, monkeypatch):
    """The old site is deleted under a temporary name (swept), never under the ``.old-`` name a restart puts
    back: a half-deleted old site is never restored."""
    old, new = tmp_path / "site", tmp_path / "new"
    for d, text in ((old, "old"), (new, "new")):
        d.mkdir()
        (d / "page.html").write_text(text)

    def killed(path, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_dir(new, old)
    assert (old / "page.html").read_text() == "new"
    left = _debris(tmp_path)
    assert len(left) == 1 and left[0].startswith(".site.tmp-"), left


def _wrapped_site_error(tmp_path, monkeypatch, err: OSError) -> Exception:
    """The exception `render_site` raises when writing a figure's files fails with ``err``."""
    def failing(*a, **k):
        raise err

    monkeypatch.setattr(build_mod, "write_figure_files", failing)
    with pytest.raises(Exception) as info:
        h.render_dummy_site(tmp_path)
    return info.value


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "the disk is full writing"), (errno.EDQUOT, "the disk is full"),
                                         (errno.EROFS, "permission denied"), (errno.EACCES, "permission denied")])
def test_a_full_or_read_only_disk_while_figures_are_written_is_one_line_exit_3(tmp_path, monkeypatch, code, words):
    """Before: the site stage wraps a figure's failure (``figure k21-tab8: could not write its files: OSError:
    [Errno 28] …``) and the CLI said "internal error … report it", exit 1, for a full --out disk. Now the
    cause is found under the wrapper: the disk line, exit 3."""
    from report_builder import cli

    target = tmp_path / ".site-docs.tmp-1@0a1b2c3d-0/figures/k21-dummy-fig/chart.svg"
    e = _wrapped_site_error(tmp_path, monkeypatch, OSError(code, os.strerror(code), str(target)))
    msg, rc = cli._describe(e, "build")
    assert rc == 3 and msg.startswith(words) and str(target) in msg, msg
    assert not (tmp_path / "site").exists() and _debris(tmp_path) == []  # nothing half-written published


def test_a_full_disk_names_the_file_written_not_the_one_copied(tmp_path):
    """`shutil.copyfile` reports ENOSPC with the source as ``filename`` and the destination as ``filename2``:
    before, the line said "the disk is full writing <venv>/…/material/…/bundle.min.js.map" (the theme file
    mkdocs copied, on another disk); now it names the file that did not fit."""
    from report_builder import cli

    src, dst = "/venv/lib/material/templates/assets/bundle.js.map", str(tmp_path / ".site.tmp-1/assets/bundle.js.map")
    e = OSError(errno.ENOSPC, "No space left on device")
    e.filename, e.filename2 = src, dst
    msg, rc = cli._describe(e, "build")
    assert rc == 3 and dst in msg and src not in msg, msg


_CLEAN_KILLED = r"""
import os, shutil, sys
from pathlib import Path
import pandas as pd
from report_builder.cache import Cache
c = Cache(sys.argv[1])
c.put("k21_mixing", "0123456789abcdef0123", {"a": pd.DataFrame({"x": [1]}), "b": pd.DataFrame({"y": [2]})}, {})
def killed(path, *a, **k):  # the first file removed, then the process dies (SIGKILL, a second Ctrl-C)
    sorted(Path(path).iterdir())[0].unlink()
    os._exit(9)
shutil.rmtree = killed
c.clean()
"""


def test_a_clean_killed_while_it_removed_an_entry_leaves_nothing_the_next_clean_refuses(tmp_path):
    """Before: `Cache.clean` deleted an entry in place, so a clean killed midway left ``meta.json`` without
    the tables it lists: no longer provably the tool's, every later ``clean`` left it and named it ("left 1 it
    cannot prove it wrote"). Now the entry is renamed to a temporary name first: the next clean sweeps it."""
    from report_builder.cache import Cache

    cache = tmp_path / "cache"
    r = subprocess.run([sys.executable, "-c", _CLEAN_KILLED, str(cache)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 9, r.stderr[-2000:]
    n, left = Cache(cache).clean()
    assert left == [], left
    assert not (cache / "results").exists()


def test_a_data_copy_killed_midway_is_swept_and_cleaned(tmp_path):
    """A build keeps a copy of a local data file at ``<cache>/inputs/<sha[:16]>/<name>`` (`last_build`); one
    killed while copying left ``.<name>.tmp-<pid>@<host>-…`` there, which no sweep looked at (the cache's
    sweep covered its top level, ``results/*`` and ``reproduced/``) and ``clean`` then left for ever, with its
    folder ("left 1 it cannot prove it wrote: …/inputs/<hash>"). A clean killed between removing a copy and
    its folder left an empty folder, refused the same way. Now both are swept and removed."""
    from report_builder import housekeeping
    from report_builder.cache import Cache
    from report_builder.config import from_dict

    cache = Cache(tmp_path / "cache")
    dead = _dead_pid()
    half = cache.base / "inputs" / ("ab" * 8)
    half.mkdir(parents=True)
    (half / f".reviews.txt.tmp-{dead}@{guard.host_tag()}-0a1b2c3d").write_text("a fine fi")
    empty = cache.base / "inputs" / ("cd" * 8)
    empty.mkdir()
    assert str(half / f".reviews.txt.tmp-{dead}@{guard.host_tag()}-0a1b2c3d") in map(str, cache.sweep())
    msg = housekeeping.clean(from_dict({"preset": "smoke", "cache_dir": str(cache.base),
                                        "out_dir": str(tmp_path / "site")}), log=lambda *_: None)
    assert "left" not in msg and not cache.base.exists(), msg


def test_a_build_that_swaps_after_another_renders_again_on_top_of_it(tmp_path, monkeypatch):
    """Two builds of one output at once: B starts from the site, A publishes a change while B renders, B swaps
    last. Before: B published its pages and history entry as of its start -- ``history.json`` ended on A's
    entry (figures changed to A's versions) while the site's current versions were B's, and the Changes page
    did not show A's change at all. Now B sees, under the site lock, that the output moved, and renders again
    on top of it: its entry records the change back, and the Changes page shows both."""
    site = tmp_path / "site"
    changed = h._dummy_tables()
    changed["k21_tokens"] = changed["k21_tokens"].assign(**{"ATTNRESLN-N": changed["k21_tokens"]["ATTNRESLN-N"] * 0.5})
    logs: list[str] = []

    def render(tables, **kw):
        return build_mod.render_site(tables, h.DUMMY_ROLES, h.provenance(), out_dir=site, log=logs.append,
                                     figures=h.DUMMY_FIGURES, **kw)

    render(h._dummy_tables())
    real, raced = build_mod._mkdocs_build, []

    def racing(*a, **k):  # build A runs from start to end while build B is in mkdocs (once)
        if not raced:
            raced.append(None)
            raced[0] = render(changed, site_url="https://a.example/")
        return real(*a, **k)

    monkeypatch.setattr(build_mod, "_mkdocs_build", racing)
    b = render(h._dummy_tables(), site_url="https://b.example/")  # B: another URL, so mkdocs runs
    current = json.loads((site / "figures" / "versions.json").read_text())["current"]
    entries = json.loads((site / "history.json").read_text())["entries"]
    assert current == b.hashes and raced[0].hashes != b.hashes
    last = {c["id"]: c["new"] for c in entries[-1]["changed"]}
    assert last and all(current[fid] == h_new for fid, h_new in last.items()), (current, entries[-1])
    page = (site / "changes.html").read_text(encoding="utf-8")
    assert all(v in page for fid, v in raced[0].hashes.items() if v != current[fid])
    assert any("rendering again on top of it" in line for line in logs), logs
    assert _debris(tmp_path) == []


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_cache_on_a_read_only_disk_says_so_not_remove_the_lock(tmp_path, monkeypatch, code):
    """Before: a cache on a read-only mount (or one the user may not write) stopped with "the lock file …
    cannot be opened (Read-only file system); remove it or choose another --cache": nothing can be removed
    there. Now the line says the cache cannot be written and what to do."""
    from report_builder import cache_lock
    from report_builder.cache import Cache

    cache = Cache(tmp_path / "cache").base
    real = cache_lock.os.open

    def read_only(path, *a, **k):
        if str(path).endswith(cache_lock.LOCK_NAME):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(cache_lock.os, "open", read_only)
    with pytest.raises(guard.UnsafeOutput) as info:
        with cache_lock.using(cache, "render"):
            pass
    msg = str(info.value)
    assert "remove it" not in msg and "cannot be written" in msg and "another cache_dir" in msg, msg


def test_a_cache_given_as_a_dangling_link_is_named_as_such(tmp_path):
    """``--cache`` a symbolic link whose folder is gone (an unmounted disk, a moved folder): before, "the cache
    directory … is not writable (File exists)", which points nowhere useful; now the line names the link and
    the missing folder."""
    link = tmp_path / "cache"
    link.symlink_to(tmp_path / "unmounted" / "cache")
    with pytest.raises(guard.UnsafeOutput) as info:
        guard.mark_cache(link)
    msg = str(info.value)
    assert "symbolic link" in msg and "does not exist" in msg and "File exists" not in msg, msg
    assert not (tmp_path / "unmounted").exists()


def test_nothing_to_put_back_takes_no_lock_and_needs_no_folder(tmp_path):
    """`restore_swapped` of an output whose folder does not exist yet (a first build into a new path, ``clean``
    of a path never built) does nothing and needs no lock on a parent that is not there."""
    assert atomic.restore_swapped(tmp_path / "not" / "yet" / "site") is None
    assert not (tmp_path / "not").exists()



def test_a_build_waiting_for_an_entry_another_build_computes_says_so(tmp_path):
    """Two builds of one cache: the second waits for the entry the first is computing (or for a first build
    suspended with Ctrl-Z, up to hours). Before, it waited without a word (its progress line standing still);
    now it says once what it waits for, then goes on."""
    import logging
    import threading

    import pandas as pd

    from report_builder.cache import Cache, result_key

    cache = Cache(tmp_path / "cache")
    key = result_key("k21_mixing", 1, {"p": 1})
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: lines.append(rec.getMessage())
    logger = logging.getLogger("report_builder")
    logger.addHandler(handler)
    old_level, logger.level = logger.level, logging.INFO
    first = guard.lock_for(cache.path("k21_mixing", key))
    first.acquire()  # the first build, computing the entry
    got: list = []
    second = threading.Thread(target=lambda: got.append(cache.get_or_compute(
        "k21_mixing", 1, {"p": 1}, lambda: ({"a": pd.DataFrame({"x": [1]})}, {}))))
    try:
        second.start()
        for _ in range(100):
            if lines:
                break
            second.join(0.05)
    finally:
        first.release()
        second.join(10)
        logger.removeHandler(handler)
        logger.level = old_level
    assert any(f"waiting for the cache entry k21_mixing/{key}" in line for line in lines), lines
    assert not second.is_alive() and len(got) == 1


def _two_reproductions_at_once(tmp_path, monkeypatch) -> tuple[Path, list[BaseException]]:
    """Two ``reproduce`` runs of one figure into one cache, publishing at the same moment: each finds no
    drawing at the target ``reproduced/<id>-<hash>/`` and then waits (up to 1 s) until the other got there
    too, before it renames its drawing in -- the interleaving that two processes meet by chance."""
    import threading

    from report_builder.cache import Cache
    from report_builder.citations import reproduce

    cache = Cache(tmp_path / "cache")
    target = cache.reproduced / "k21-fig3-0123456789ab"
    met = threading.Barrier(2, timeout=1)
    rename = os.rename

    def meet_then_rename(src, dst, *a, **k):
        if os.path.basename(os.fsdecode(src)) == "k21-fig3":  # a drawing about to be renamed in
            try:
                met.wait()
            except threading.BrokenBarrierError:  # the other run cannot get here meanwhile
                pass
        return rename(src, dst, *a, **k)

    monkeypatch.setattr(atomic.os, "rename", meet_then_rename)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        folder = guard.make_tmp_dir(cache.reproduced / "k21-fig3") / "k21-fig3"
        folder.mkdir()
        (folder / "data.csv").write_text(f"run {n}\n")
        try:
            reproduce._publish(cache, folder, target)
        except BaseException as e:  # noqa: BLE001 - what the run would have shown
            errors.append(e)
        finally:
            shutil.rmtree(folder.parent, ignore_errors=True)

    runs = [threading.Thread(target=run, args=(n,)) for n in (1, 2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(10)
    return target, errors


def test_two_reproductions_of_one_figure_at_once_both_publish(tmp_path, monkeypatch):
    """Before: both runs removed the target, the first renamed its drawing there and the second's rename
    failed, 'internal error: [Errno 39] Directory not empty'. Now the removal and the rename are one step
    under the lock of ``reproduced/``: the second run replaces the first's drawing with its own."""
    target, errors = _two_reproductions_at_once(tmp_path, monkeypatch)
    assert errors == []
    assert (target / "data.csv").read_text() in ("run 1\n", "run 2\n")
    assert _debris(target.parent) == []


def test_two_reproductions_at_once_where_folders_cannot_be_locked_keep_the_first_drawing(tmp_path, monkeypatch):
    """Where no folder can be locked (the lock then does nothing), the second rename finds the first run's
    finished drawing of the same hash in place: it is kept, not 'internal error: Directory not empty'."""
    from contextlib import nullcontext

    monkeypatch.setattr(guard, "site_lock", lambda *a, **k: nullcontext())
    target, errors = _two_reproductions_at_once(tmp_path, monkeypatch)
    assert errors == []
    assert (target / "data.csv").read_text() in ("run 1\n", "run 2\n")
    assert _debris(target.parent) == []


def test_generated_pages_of_a_render_killed_mid_swap_are_put_back_not_left(dummy_site, tmp_path):
    """``render_site(..., docs_dir=...)`` swaps the generated pages with the same two renames as the site.
    Before: a process killed between them left ``.generated.old-<pid>@<host>-…`` (and one killed while it
    deleted the old pages ``.generated.tmp-…``) beside the pages for ever: neither put back nor swept. Now
    the next render puts the pages back under the lock, as the site's, and sweeps the dead process's rest."""
    _copy_dummy_site(dummy_site, tmp_path)
    docs, dead = tmp_path / "docs" / "generated", f"{_dead_pid()}@{guard.host_tag()}"
    docs.rename(docs.parent / f".generated.old-{dead}-0a1b2c3d")
    (docs.parent / f".generated.tmp-{dead}-4e5f6a7b").mkdir()  # an old copy whose deletion was cut short
    (docs.parent / f".generated.tmp-{dead}-4e5f6a7b" / "index.md").write_text("half deleted")
    logs: list[str] = []
    build_mod.render_site(
        h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=tmp_path / "site", docs_dir=docs,
        log=logs.append, figures=h.DUMMY_FIGURES)
    assert _debris(docs.parent) == [] and _debris(tmp_path) == []
    assert any("put back" in line and str(docs) in line for line in logs), logs
    assert (docs / "index.md").is_file()


_REPRODUCE_KILLED = r"""
import os, sys
from pathlib import Path
from report_builder.cache import Cache
from report_builder.citations import reproduce
base, folder, target = map(Path, sys.argv[1:4])
rename = os.rename
def killed(src, dst, *a, **k):  # the new drawing about to be renamed in: the process dies (SIGKILL)
    if os.path.basename(os.fsdecode(src)) == folder.name:
        os._exit(9)
    return rename(src, dst, *a, **k)
os.rename = killed
reproduce._publish(Cache(base), folder, target)
"""


def _drawing(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "data.csv").write_text(text)
    (folder / "spec.json").write_text("{}")
    return folder


def test_a_reproduce_killed_while_it_replaced_an_earlier_drawing_loses_neither(tmp_path):
    """Before: `reproduce._publish` deleted the earlier run's ``reproduced/<id>-<hash>/`` and then renamed the
    new drawing in, so a run killed between the two left no drawing at all (and a deletion cut short half a
    folder under its own name). Now the earlier drawing is renamed aside first (`atomic.replace_dir`): after a
    kill there the cache's sweep (the next ``reproduce`` or build on that cache) puts it back whole, and the
    next run replaces it by renames."""
    from report_builder.cache import Cache
    from report_builder.citations import reproduce

    base = Cache(tmp_path / "cache").base  # a results cache (with its marker), as `reproduce` makes it
    target = _drawing(base / "reproduced" / "k21-fig3-0123456789ab", "earlier\n")
    folder = _drawing(guard.make_tmp_dir(target.parent / "k21-fig3") / "k21-fig3", "new\n")
    r = subprocess.run([sys.executable, "-c", _REPRODUCE_KILLED, str(base), str(folder), str(target)],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 9, r.stderr[-2000:]
    shutil.rmtree(folder.parent)  # this test's (a live process's) temporary folder; the killed run's is swept
    Cache(base).sweep()
    assert (target / "data.csv").read_text() == "earlier\n" and (target / "spec.json").is_file()
    assert _debris(target.parent) == []
    again = _drawing(guard.make_tmp_dir(target.parent / "k21-fig3") / "k21-fig3", "again\n")
    reproduce._publish(Cache(base), again, target)
    assert (target / "data.csv").read_text() == "again\n"
    shutil.rmtree(again.parent)
    assert _debris(target.parent) == []


def test_a_reproduce_waiting_too_long_for_its_lock_names_the_reproduced_folder_not_out(tmp_path, monkeypatch):
    """Before: a ``reproduce`` that could not take the lock of the cache's ``reproduced/`` said "another build
    holds the lock of …/reproduced/<id>-<hash> …; wait for it or choose another --out" -- an option
    ``reproduce`` does not have, for a lock that is not the output's. Now it names the reproduced figures
    folder it locks and the option that gives another one (--cache)."""
    import fcntl

    from report_builder.cache import Cache
    from report_builder.citations import reproduce
    from report_builder import errors
    from report_builder.errors import UnsafeOutput

    cache = Cache(tmp_path / "cache")
    target = cache.reproduced / "k21-fig3-0123456789ab"
    folder = _drawing(guard.make_tmp_dir(target.parent / "k21-fig3") / "k21-fig3", "new\n")
    lock = guard.site_lock
    monkeypatch.setattr(guard, "site_lock", lambda *a, **k: lock(*a, **{**k, "timeout": 0.2}))
    held = os.open(target.parent, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # another reproduce of this figure into this cache, drawing
        with pytest.raises(UnsafeOutput) as info, errors.cli_vocabulary():
            reproduce._publish(cache, folder, target)
        with pytest.raises(UnsafeOutput) as api:  # the same through the Python API names its keyword
            reproduce._publish(cache, folder, target)
    finally:
        os.close(held)
    msg = str(info.value)
    assert "--out" not in msg and "--cache" in msg and f"reproduced figures folder {target.parent}" in msg, msg
    assert "another reproduce" in msg, msg
    assert "cache_dir" in str(api.value) and "--" not in str(api.value), api.value


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_planted_at_a_reproduced_drawing_is_replaced_itself_never_followed(tmp_path, dangling):
    """A copied cache may hold a link named like a drawing, ``reproduced/<id>-<hash>`` -> elsewhere. Replacing
    it by renames (`atomic.replace_dir`) moves the link aside and removes the link itself: what it leads to is
    untouched and nothing is left beside the drawing (the old ``exists()`` test followed the link: a dangling
    one failed the rename, "Not a directory"; a live one left its ``.tmp-`` name behind)."""
    from report_builder.cache import Cache
    from report_builder.citations import reproduce

    cache = Cache(tmp_path / "cache")
    elsewhere = _drawing(tmp_path / "elsewhere", "not the tool's\n")
    target = cache.reproduced / "k21-fig3-0123456789ab"
    target.parent.mkdir(parents=True)
    os.symlink(tmp_path / "missing" if dangling else elsewhere, target)
    folder = _drawing(guard.make_tmp_dir(target) / "k21-fig3", "new\n")
    reproduce._publish(cache, folder, target)
    shutil.rmtree(folder.parent)
    assert not target.is_symlink() and (target / "data.csv").read_text() == "new\n"
    assert (elsewhere / "data.csv").read_text() == "not the tool's\n"
    assert _debris(target.parent) == []


_CLEAN_VERSIONS_KILLED = r"""
import os, shutil, sys
from pathlib import Path
from report_builder.citations.site_clean import clean_site, parse_age
def killed(path, *a, dir_fd=None, **k):  # one file of the version deleted, then the process dies (SIGKILL)
    folder = Path(f"/proc/self/fd/{dir_fd}") / path if dir_fd is not None else Path(path)
    sorted(folder.iterdir())[0].unlink()
    os._exit(9)
shutil.rmtree = killed
clean_site(Path(sys.argv[1]), parse_age("2020-01-15"), log=lambda *_: None)
"""


def test_a_clean_of_old_versions_killed_midway_leaves_no_half_version(tmp_path, capsys, monkeypatch):
    """Before: ``clean --versions-older-than`` deleted a version folder in place, so a clean killed midway left
    ``figures/<id>/<hash>/`` without some of its files: half a figure at its permalink, still in the index, kept
    by the next clean. Now it is renamed out of the site first (`atomic.remove_aside`) to the output's own
    temporary name beside it: after a kill there no half version is left, the site holds nothing its marker
    does not list (a build or clean would refuse it), and the next clean sweeps the temporary folder."""
    from report_builder import cli, site_marker
    from report_builder.citations.version_files import permalink
    from tests.citations import synthetic as syn

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "user-cache"))
    info = syn.make_site(tmp_path)
    site = info["site"]
    site_marker.write(site)  # the marker with its list of entries, as a build writes it
    old = site / permalink(syn.FIG, info["old"])
    r = subprocess.run([sys.executable, "-c", _CLEAN_VERSIONS_KILLED, str(site)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 9, r.stderr[-2000:]
    assert not os.path.lexists(old), sorted(os.listdir(old))  # gone whole, not half a version
    assert site_marker.foreign(site, "clean") is None
    assert [n.split("-")[0] for n in _debris(tmp_path)] == [".site.tmp"]  # the dead process's, beside the site
    code = cli.main(["clean", "--out", str(site), "--cache", str(tmp_path / "no-cache")])
    out, err = capsys.readouterr()
    assert code == 0 and "kept its 2 published figure versions" in out, out + err
    assert _debris(tmp_path) == []
    assert (site / permalink(syn.FIG, info["new"]) / "spec.json").is_file()
    assert (site / permalink(syn.OTHER, info["other"]) / "spec.json").is_file()


def test_remove_aside_falls_back_in_place_and_removes_a_link_itself(tmp_path, monkeypatch):
    """`atomic.remove_aside` where the rename out of the root fails (the root a mount point: EXDEV) removes in
    place as before; a link is removed itself, never what it leads to; a missing path is False."""
    site, outside = tmp_path / "site", tmp_path / "outside"
    (site / "figures" / "a").mkdir(parents=True)
    (site / "figures" / "a" / "f").write_text("x")
    outside.mkdir()
    (outside / "keep").write_text("kept")
    (site / "figures" / "link").symlink_to(outside)
    assert atomic.remove_aside(site, site / "figures" / "link") and (outside / "keep").read_text() == "kept"
    assert not atomic.remove_aside(site, site / "figures" / "missing")
    rename = os.rename

    def cross_device(src, dst, *a, **k):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(atomic.os, "rename", cross_device)
    assert atomic.remove_aside(site, site / "figures" / "a") and not (site / "figures" / "a").exists()
    monkeypatch.setattr(atomic.os, "rename", rename)
    assert _debris(tmp_path) == [] and sorted(os.listdir(site / "figures")) == []
