"""A results cache is used by one `clean` or by builds at a time, and is never left without its marker
(issue #30; docs/guide/safety.md "One clean or builds at a time"). The races are played deterministically:
the test (or a child process it waits for) holds the lock, then runs the other command."""
from __future__ import annotations

import json
import os
import shutil
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


# ------------------------------------------------------------------ a copied cache cannot publish script

HOSTILE = ("PWNED", "evil.example", "javascript:", "foreignObject", "onload=", "onclick=", "onerror=")
"""What the hostile drawing brings (`_hostile_svg`); pages have scripts of their own, drawings none."""


def _figures():
    from report_builder.figures.registry import figure
    from tests import site_helpers as h

    return [figure("k21-fig2"), *[f for f in h.DUMMY_FIGURES if f.id == "k21-dummy-fig"]]  # a diagram, a chart


def _render(root: Path, **kw):
    from report_builder.site import build as build_mod
    from tests import site_helpers as h

    Cache(root / "cache")
    return build_mod.render_site(h._dummy_tables(), h.DUMMY_ROLES, {**h.provenance(), "date": "2025-01-02T03:04:05+00:00"},
                                 out_dir=root / "site", log=lambda *_: None, figures=_figures(),
                                 cache_dir=root / "cache", **kw)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _hostile_svg(genuine: str) -> str:
    """A drawing with everything a chart never holds: a script, an event handler, a `javascript:` link, a
    foreignObject with HTML, an external image, an iframe; the rest is the genuine drawing."""
    head, rest = genuine.split(">", 1)
    return (head + ' onload="alert(\'PWNED-onload\')">'
            + '<script>alert("PWNED-script")</script>'
            + '<a href="javascript:alert(\'PWNED-link\')"><text x="1" y="1">click</text></a>'
            + '<foreignObject width="9" height="9"><div xmlns="http://www.w3.org/1999/xhtml">'
            + '<img src="x" onerror="alert(\'PWNED-img\')"/></div></foreignObject>'
            + '<image href="https://evil.example/t.png" width="1" height="1"/>'
            + '<rect width="1" height="1" fill="url(https://evil.example/p.svg#x)" onclick="alert(1)"/>' + rest)


@pytest.mark.slow
def test_the_render_key_lives_outside_the_cache_and_foreign_entries_are_drawn_again(tmp_path, monkeypatch):
    from report_builder.site import figure_cache, site_state

    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "user-a"))
    ids = [f.id for f in _figures()]
    r1 = _render(tmp_path)
    key_file = tmp_path / "user-a" / "render-key"
    key = key_file.read_bytes()
    assert site_state.site_state(tmp_path / "site", tmp_path / "cache").key_file == key_file and len(key) == 32
    assert (key_file.stat().st_mode & 0o777, key_file.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert not (tmp_path / "cache" / "site" / "key").exists()
    for tree in (tmp_path / "cache", tmp_path / "site"):  # the key is in neither, in any file
        assert not [p for p, data in _files(tree).items() if key in data]
    # the same cache in another user's hands (or copied to another machine): nothing is trusted, all drawn again
    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "user-b"))
    r2 = _render(tmp_path, site_url="https://example.org/b/")
    assert r2.rebuilt == ids and sorted(r2.drawn) == sorted(ids) and r2.hashes == r1.hashes
    # entries of an older version, signed with its key in <cache>/site/key: drawn again, no crash
    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "user-a"))
    legacy = os.urandom(32)
    (tmp_path / "cache" / "site" / "key").write_bytes(legacy)
    renders = site_state.site_state(tmp_path / "site", tmp_path / "cache").root / "figure-renders"
    for meta_p in renders.glob("fig-*/meta.json"):
        meta = json.loads(meta_p.read_text())
        meta["mac"] = site_state.mac(legacy, meta_p.parent.name, figure_cache._json(
            {k: v for k, v in meta.items() if k != "mac"}))
        meta_p.write_text(json.dumps(meta))
    r3 = _render(tmp_path, site_url="https://example.org/c/")
    assert r3.rebuilt == ids and r3.hashes == r1.hashes
    # a key that is a link (to a private file of the right size) is replaced, its target left alone
    target = tmp_path / "elsewhere-key"
    target.write_bytes(os.urandom(32))
    os.chmod(target, 0o600)
    key_file.unlink()
    key_file.symlink_to(target)
    before = target.read_bytes()
    assert site_state.secret(key_file) not in (None, before)
    assert not key_file.is_symlink() and target.read_bytes() == before


@pytest.mark.slow
def test_a_resigned_hostile_entry_is_published_without_script(tmp_path, monkeypatch):
    """An entry signed with the right key (whoever holds it) still cannot put script on the site: a drawing
    reused from the figure cache or the render cache is checked against the allow-list; an inlined one
    is sanitised. The genuine drawings are published byte for byte."""
    import hashlib

    from report_builder.site import figure_cache, site_state

    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "config"))
    r1 = _render(tmp_path)
    site = tmp_path / "site"
    genuine = {i: (site / "figures" / i / "chart.svg").read_bytes() for i in ("k21-fig2", "k21-dummy-fig")}
    page = (site / "k21.html").read_text()
    state = site_state.site_state(site, tmp_path / "cache")
    key, renders = state.key(), state.root / "figure-renders"
    # the diagram's figure entry: its chart.svg replaced, its digest and HMAC made again with the key
    (entry,) = renders.glob("fig-k21-fig2-*")
    (entry / "files" / "chart.svg").write_text(_hostile_svg(genuine["k21-fig2"].decode()))
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"]["chart.svg"] = hashlib.sha256((entry / "files" / "chart.svg").read_bytes()).hexdigest()
    meta["mac"] = site_state.mac(key, entry.name, figure_cache._json({k: v for k, v in meta.items() if k != "mac"}))
    (entry / "meta.json").write_text(json.dumps(meta))
    # variant: the chart's drawing in the render cache (its figure entry gone, so the drawing is looked up)
    shutil.rmtree(next(renders.glob("fig-k21-dummy-fig-*")))
    (drawing,) = [d for d in renders.iterdir() if (d / "chart.svg").is_file()
                  and (d / "chart.svg").read_bytes() == genuine["k21-dummy-fig"]]
    (drawing / "chart.svg").write_text(_hostile_svg(genuine["k21-dummy-fig"].decode()))
    s = hashlib.sha256((drawing / "chart.svg").read_bytes()).hexdigest()
    p = hashlib.sha256((drawing / "chart.png").read_bytes()).hexdigest()
    (drawing / "meta.json").write_text(json.dumps({"svg": s, "png": p, "mac": site_state.mac(key, drawing.name, s, p)}))
    r2 = _render(tmp_path, site_url="https://example.org/x/")
    assert sorted(r2.rebuilt) == ["k21-dummy-fig", "k21-fig2"] and "k21-dummy-fig" in r2.drawn
    assert r2.hashes == r1.hashes
    for name, data in _files(site).items():  # (the Guide's prose and its search index name these words)
        if name.endswith((".html", ".svg", ".json")) and not name.startswith(("guide/", "search/")):
            text = data.decode("utf-8", "replace")
            assert not [w for w in HOSTILE if w in text], name
            assert not (name.endswith(".svg") and ("<script" in text or "<iframe" in text)), name
    assert {i: (site / "figures" / i / "chart.svg").read_bytes() for i in genuine} == genuine
    assert _inline(page) == _inline((site / "k21.html").read_text())  # the diagram on the page, as it was
    # the inlining itself sanitises, whatever a record says: a drawing handed over with a valid record
    fig_dir = tmp_path / "handed"
    fig_dir.mkdir()
    (fig_dir / "chart.svg").write_text(_hostile_svg(genuine["k21-fig2"].decode()))
    rec = {"files": {}, "content_hash": "0" * 12, "page_spec": None, "compare_note": "", "compare_same": False,
           "show_paper": False, "tables": {}, "drawn": True}
    shown = figure_cache.section_fields(rec, fig_dir)["svg_html"]
    assert "<svg" in shown and "K21 Fig. 2" in shown and not [w for w in HOSTILE if w in shown], shown


def _inline(page: str) -> str:
    start = page.index('<div class="rb-diagram">')
    return page[start:page.index("</svg>", start)]


_SVG = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">{}</svg>'


@pytest.mark.parametrize("body, gone", [
    ('<script>alert(1)</script><g/>', "<script"),
    ('<SCRIPT>alert(1)</SCRIPT>', "SCRIPT"),
    ('<g onload="alert(1)"/>', "onload"),
    ('<rect onClick="alert(1)" width="1"/>', "onClick"),
    ('<a href="javascript:alert(1)"><text>x</text></a>', "javascript:"),
    ('<image xlink:href="javascript:alert(1)"/>', "javascript:"),
    ('<image href=" JaVaScRiPt:alert(1)"/>', "JaVaScRiPt"),
    ('<image href="data:image/svg+xml;base64,PHN2Zz4="/>', "data:"),
    ('<image href="https://evil.example/p.png"/>', "evil.example"),
    ('<image href="//evil.example/p.png"/>', "evil.example"),
    ('<rect fill="url(https://evil.example/x.svg#p)" width="1"/>', "evil.example"),
    ('<rect fill="u\\72l(https://evil.example/#p)" width="1"/>', "evil.example"),
    ('<foreignObject><div xmlns="http://www.w3.org/1999/xhtml">hi</div></foreignObject>', "foreignObject"),
    ('<iframe src="https://evil.example/"/>', "iframe"),
    ('<embed src="x.swf"/><object data="x"/>', "embed"),
    ('<use href="https://evil.example/s.svg#a"/>', "evil.example"),
    ('<animate attributeName="href" to="javascript:alert(1)"/>', "animate"),
    ('<set attributeName="onmouseover" to="alert(1)"/>', "onmouseover"),
    ('<style>@import url(https://evil.example/x.css)</style>', "evil.example"),
    ('<g style="background:url(https://evil.example/)"/>', "evil.example"),
    ('<!-- <script>alert(1)</script> --><g/>', "<script"),
    ('<text><![CDATA[</text><script>alert(1)</script>]]></text>', "<script"),
    ('<?xml-stylesheet href="https://evil.example/x.css"?><g/>', "evil.example"),
])
def test_svgsafe_keeps_only_what_charts_draw(body, gone):
    from report_builder.site import svgsafe

    svg = _SVG.format(body)
    assert not svgsafe.is_safe(svg) and svgsafe.problems(svg)
    clean = svgsafe.sanitise(svg)
    assert gone not in clean and clean.startswith("<svg") and svgsafe.is_safe(clean), clean


def test_svgsafe_refuses_entities_and_keeps_genuine_drawings_byte_for_byte():
    import vl_convert as vlc

    from report_builder.figures.k21.intro import attention_block_svg
    from report_builder.site import svgsafe

    for doc in ('<!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
                '<svg xmlns="http://www.w3.org/2000/svg"><text>&b;</text></svg>',  # an entity bomb
                '<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg">'
                '<text>&x;</text></svg>',  # an external entity
                '<svg xmlns="http://www.w3.org/2000/svg"><text>&undefined;</text></svg>', "<svg", "not xml"):
        assert not svgsafe.is_safe(doc) and svgsafe.sanitise(doc) == "", doc
    diagram = attention_block_svg()  # the inlined diagram (K21 Fig. 2)
    spec = {"data": {"values": [{"t": "<script>alert(1)</script>", "v": 1, "c": 0.5}, {"t": 'a"&b', "v": 2, "c": 1}]},
            "title": {"text": "onload=x javascript:y", "subtitle": ["x"]}, "mark": {"type": "rect", "clip": True},
            "encoding": {"x": {"field": "t", "type": "nominal"}, "y": {"field": "v", "type": "quantitative"},
                         "color": {"field": "c", "type": "quantitative"}},
            "config": {"background": "white"}}
    chart = vlc.vegalite_to_svg(spec)  # a Vega drawing: gradient legend, clip path, hostile text as data
    for genuine in (diagram, chart):
        assert svgsafe.problems(genuine) == [] and svgsafe.sanitise(genuine) is genuine


@pytest.mark.slow
def test_every_drawing_of_the_smoke_site_is_published_unchanged(smoke):
    """The allow-list holds everything our charts draw: each ``chart.svg`` of the smoke build passes as it is
    (so no reused drawing is refused, no page changes and no content hash moves)."""
    from report_builder.site import svgsafe

    drawings = sorted((smoke[0] / "site" / "figures").glob("*/chart.svg"))
    assert len(drawings) >= 20
    for p in drawings:
        text = p.read_text(encoding="utf-8")
        assert svgsafe.problems(text) == [] and svgsafe.sanitise(text) is text, p


def test_a_state_folder_with_links_or_special_files_is_refused_before_any_write(tmp_path):
    from report_builder import housekeeping
    from report_builder.config import from_dict
    from report_builder.site import site_state

    outside = tmp_path / "outside"
    outside.mkdir()
    cfg = from_dict({"preset": "smoke", "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")})
    Cache(tmp_path / "cache")
    state = site_state.site_state(tmp_path / "site", tmp_path / "cache")
    cases = {"the output's folder": lambda: (state.root.parent.mkdir(),
                                             state.root.symlink_to(outside, target_is_directory=True)),
             "<cache>/site": lambda: state.root.parent.symlink_to(outside, target_is_directory=True),
             "figure-renders": lambda: (state.root.mkdir(parents=True),
                                        (state.root / "figure-renders").symlink_to(outside)),
             "a FIFO build record": lambda: (state.root.mkdir(parents=True), os.mkfifo(state.record)),
             "a linked manifest": lambda: (state.root.mkdir(parents=True),
                                           state.manifest.symlink_to(outside / "m.json"))}
    for what, plant in cases.items():
        if (tmp_path / "cache" / "site").is_symlink():
            (tmp_path / "cache" / "site").unlink()
        shutil.rmtree(tmp_path / "cache" / "site", ignore_errors=True)
        plant()
        with pytest.raises(guard.UnsafeOutput, match="refusing to (use|read)"):
            housekeeping.preflight(cfg)  # `build` and `render` check it before any work
        assert list(outside.iterdir()) == [], what  # nothing written through the link (not even a probe)


def test_the_fallback_carries_only_render_entries_from_the_old_site(tmp_path):
    from report_builder.site import site_state

    out, outside = tmp_path / "site", tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE")
    old = out / site_state.IN_OUT / "figure-renders"
    entry = old / ("0123456789ab-vl" + "1.8.0")
    entry.mkdir(parents=True)
    (entry / "chart.svg").write_text("<svg/>")
    (entry / "key").symlink_to(outside / "id_rsa")  # a link inside an entry
    (old / "notes.txt").write_text("planted")  # a file that is no entry
    (old / ("fedcba987654-vl" + "1.8.0")).symlink_to(outside, target_is_directory=True)  # a linked entry
    state = site_state.site_state(out, None)
    assert state.in_out
    new = tmp_path / "new"
    work = state.working(new)
    carried = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
    assert carried == [f"figure-renders/{entry.name}/chart.svg"]


def test_links_and_fifos_in_a_cache_are_never_followed_or_read(tmp_path):
    """A FIFO would hang the build that reads it, a link would read (or lock) a file outside the cache: each
    one in a cache's records, entries, render entries and lock is damage or refused, at once."""
    import signal

    from report_builder import last_build
    from report_builder.site import figure_cache, figure_files

    signal.alarm(60)  # a read that blocks fails the test instead of hanging it
    try:
        c = _cache(tmp_path / "cache")
        entry = c.path("k21_mixing", "a" * 20)
        (entry / "meta.json").unlink()
        os.mkfifo(entry / "meta.json")
        assert c.get("k21_mixing", "a" * 20) is None and "corrupt" in c.log[-1]
        os.mkfifo(tmp_path / "cache" / "last_build.json")
        assert last_build.read(tmp_path / "cache") is None
        renders = tmp_path / "renders"
        d = renders / ("0123456789ab-vl" + figure_files.vlc.__version__)
        d.mkdir(parents=True)
        for name in ("meta.json", "chart.png"):
            (d / name).write_text("{}")
        os.mkfifo(d / "chart.svg")
        assert figure_files.RenderCache(renders, b"k" * 32).get("0123456789ab") is None
        (d / "chart.svg").unlink()
        (d / "chart.svg").symlink_to(tmp_path / "outside.svg")
        (tmp_path / "outside.svg").write_text("<svg/>")
        assert figure_files.RenderCache(renders, b"k" * 32).get("0123456789ab") is None
        fig = renders / ("fig-k21-fig2-" + "0" * 24)
        fig.mkdir()
        os.mkfifo(fig / "meta.json")
        from report_builder.figures.registry import figure

        fc = figure_cache.FigureCache(renders, {}, None, judged=lambda: {}, secret=b"k" * 32)
        assert fc.get(figure("k21-fig2")) is None
        # an entry, an analysis folder or the results folder that is a link: not read, nothing written through it
        outside = tmp_path / "outside"
        shutil.copytree(c.path("k21_mixing", "a" * 20).parent, outside / "k21_mixing")
        shutil.rmtree(c.root / "k21_mixing")
        (c.root / "k21_mixing").mkdir()
        (c.root / "k21_mixing" / ("b" * 20)).symlink_to(outside / "k21_mixing" / ("a" * 20))
        assert c.get("k21_mixing", "b" * 20) is None
        shutil.rmtree(c.root / "k21_mixing")
        (c.root / "k21_mixing").symlink_to(outside / "k21_mixing")
        before = _tree(outside)
        for call in (lambda: c.get("k21_mixing", "a" * 20),
                     lambda: c.get_or_compute("k21_mixing", 1, {}, lambda: ({"t": pd.DataFrame({"x": [1]})}, {}))):
            with pytest.raises(guard.UnsafeOutput, match="symbolic link"):
                call()
        assert _tree(outside) == before and c.sweep() == []
        other = tmp_path / "other"
        _cache(other)
        os.mkfifo(other / guard.CACHE_LOCK)
        with pytest.raises(guard.UnsafeOutput, match="not a regular file"):
            with cache_mod.using(other, "build"):
                pass
    finally:
        signal.alarm(0)


@pytest.mark.slow
def test_a_resigned_entry_cannot_carry_a_script_of_its_own(tmp_path, monkeypatch):
    """A chart's large data has a script twin (``data-<hash>.json.js``) that the page loads: an entry signed
    with the right key whose twin says anything else than its data file, or that carries a page, is built
    again; the published twin is the genuine one."""
    import hashlib

    from report_builder.site import figure_cache, site_state

    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "config"))
    _render(tmp_path, inline_limit=10)  # the chart's data goes to a file and its twin
    site = tmp_path / "site"
    (twin,) = (site / "figures" / "k21-dummy-fig").glob("data-*.json.js")
    genuine = twin.read_bytes()
    state = site_state.site_state(site, tmp_path / "cache")
    (entry,) = (state.root / "figure-renders").glob("fig-k21-dummy-fig-*")
    for name, text in ((twin.name, "alert('PWNED-twin')"), ("notes.html", "<script>alert('PWNED-page')</script>")):
        (entry / "files" / name).write_text(text)
        meta = json.loads((entry / "meta.json").read_text())
        meta["files"][name] = hashlib.sha256(text.encode()).hexdigest()
        meta["mac"] = site_state.mac(state.key(), entry.name, figure_cache._json({k: v for k, v in meta.items()
                                                                                  if k != "mac"}))
        (entry / "meta.json").write_text(json.dumps(meta))
        r = _render(tmp_path, inline_limit=10, site_url=f"https://example.org/{len(name)}/")
        assert r.rebuilt == ["k21-dummy-fig"], name
        assert twin.read_bytes() == genuine and not (site / "figures" / "k21-dummy-fig" / "notes.html").exists()
        (entry,) = (state.root / "figure-renders").glob("fig-k21-dummy-fig-*")  # the entry stored again


def test_a_tampered_build_record_never_reaches_outside_the_cache(tmp_path):
    """Entry names read back from ``last_build.json`` are checked before they are joined into a path: a
    traversal (which a damaged-entry clean-up would have removed) or a malformed record is one line."""
    from report_builder import last_build
    from report_builder.errors import DataError

    victim = tmp_path / "victim" / "k"
    victim.mkdir(parents=True)
    (victim / "meta.json").write_text("damaged")  # would be removed as a damaged entry
    c = _cache(tmp_path / "cache")
    record = c.base / "last_build.json"
    for entries, err in (([["../../victim", "k"]], guard.UnsafeOutput), ([["k21_mixing", "../../../victim/k"]],
                                                                           guard.UnsafeOutput),
                         ([["k21_mixing"]], DataError), ("all", DataError), ([[1, 2]], DataError)):
        record.write_text(json.dumps({"format": 2, "entries": entries, "provenance": {}}))
        with pytest.raises(err, match="tampered build record|damaged"):
            last_build.tables_from_cache(c.base)
        assert (victim / "meta.json").is_file()
    record.write_text(json.dumps({"format": 2, "entries": [], "provenance": {}, "config": {"preset": "smoke"},
                                  "inputs": {"wiki": {"kind": "file", "sha256": "0", "kept": "../../victim/k/meta.json"}}}))
    with pytest.raises(DataError, match="keeps no copy"):  # a kept copy named outside the cache is no copy
        last_build.recorded_config(c.base)


@pytest.mark.parametrize("damage", ["truncated", "link", "fifo", "not an object"])
def test_a_build_record_that_cannot_be_read_back_is_named_not_taken_for_no_build(tmp_path, damage):
    """Before: a ``last_build.json`` truncated, replaced by a link (to a genuine record, even) or a FIFO, or not
    a record, made ``render`` say "no previous build recorded in …/last_build.json; builds are recorded in
    <every other cache>; pass --cache DIR" -- of a cache holding one. Now the one line says the record is
    there and cannot be read back, and what to do."""
    from report_builder import last_build
    from report_builder.errors import DataError, exit_code

    c = _cache(tmp_path / "cache")
    record = c.base / "last_build.json"
    genuine = json.dumps({"format": 2, "entries": [], "provenance": {}})
    if damage == "truncated":
        record.write_text(genuine[:20])
    elif damage == "link":
        (tmp_path / "elsewhere.json").write_text(genuine)
        os.symlink(tmp_path / "elsewhere.json", record)
    elif damage == "fifo":
        os.mkfifo(record)
    else:
        record.write_text("[1, 2]")
    with pytest.raises(DataError) as info:
        last_build.tables_from_cache(c.base)
    msg = str(info.value)
    assert exit_code(info.value) == 3 and f"the build record {record} cannot be read back" in msg, msg
    assert "no previous build" not in msg and "build` again" in msg, msg


def test_a_marker_written_by_a_concurrent_build_is_not_taken_for_a_foreign_folder(tmp_path, monkeypatch):
    """Two builds creating one cache: the second looked for the marker an instant before the first wrote it,
    then listed the folder holding it, and refused the cache as foreign (seen 2 times in 1,600 under load;
    `test_two_concurrent_builds_both_succeed` once). The folder is listed first now: a listed marker counts."""
    from pathlib import Path as P

    d = tmp_path / "cache"
    d.mkdir()
    (d / guard.CACHE_MARKER).write_text("")  # written by the first build meanwhile
    real = P.is_file
    monkeypatch.setattr(P, "is_file", lambda self: False if self.name == guard.CACHE_MARKER else real(self))
    guard.mark_cache(d)  # accepted
    (d / "results").mkdir()
    (d / guard.CACHE_MARKER).unlink()
    with pytest.raises(guard.UnsafeOutput, match="has no .report_builder-cache marker"):
        guard.mark_cache(d)  # a folder holding other things and no marker is still refused
