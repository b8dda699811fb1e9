"""Citations that survive regeneration (issue #24), through the CLI as a user meets them.

One tiny model, one dataset, two figures (``figures:``): a build with ``site_url``, a second build
that changes one figure's input (the dataset's ``n``) and a parameter no K21 figure reads (``k24.top_k``). The first version stays at its permalink byte
for byte, the current figure is the new one, the history and the Changes page say what changed and
by how much; ``reproduce`` rebuilds the first version from another directory with an empty cache
(identical) and names the reason when its recipe was edited; ``diff`` names the changed input; a
damaged version is not republished silently; ``clean`` keeps the versions unless asked.

Issue #30: the same site and cache tampered with as an attacker would (traversal ids and hashes, links and
hard links at every level, a planted file, damaged indexes), then ``build``, ``render``, ``clean`` (every
flag), ``reproduce`` and ``diff`` over them: a sentinel folder outside and the tree around the site and
the cache are unchanged, the new site holds only what the build made, a damaged index keeps every version.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from cli_here import cli_here

ROOT = Path(__file__).resolve().parents[1]
SITE_URL = "https://example.org/report/"
FIG = "k21-fig3"  # a heatmap of k21_tokens: changes with the dataset
STILL = "k21-fig2"  # a diagram: the same version in both builds


def _cli(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd)


def _here(capsys, monkeypatch, *args: str, cwd: Path) -> SimpleNamespace:
    """`_cli` in this process (`cli_here`: no interpreter start importing torch, ~3 s of CPU per `reproduce`)."""
    return cli_here(capsys, *args, monkeypatch=monkeypatch, cwd=cwd)


def _version_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "index.html"}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Two builds of one site: (work dir, model dir, first hash, second hash, first version's files)."""
    from tests.test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("cite")
    work = tmp / "work"
    work.mkdir()
    model = tiny_bert_dir(work / "tiny-a", 0)
    cfg = {"models": [{"name": "tiny", "source": "tiny-a", "role": "primary_encoder"}],
           "datasets": [{"id": "wiki", "n": 3, "k24_n": 1, "max_length": 32}],
           "k24": {"top_k": 5, "examples": 1}, "figures": [FIG, STILL], "site_url": SITE_URL}
    (work / "cfg.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    common = ("build", "--config", "cfg.yaml", "--cache", "cache", "--out", "site", "--no-progress", "--threads", "1")
    r = _cli(*common, cwd=work)
    assert r.returncode == 0, r.stderr[-3000:]
    h1 = json.loads((work / "site" / "figures" / "versions.json").read_text())["current"][FIG]
    first = _version_files(work / "site" / "figures" / FIG / h1)
    r = _cli(*common, "--set", "datasets.0.n=4", "--set", "k24.top_k=6", cwd=work)  # top_k: no K21 figure's input
    assert r.returncode == 0, r.stderr[-3000:]
    h2 = json.loads((work / "site" / "figures" / "versions.json").read_text())["current"][FIG]
    shutil.copytree(work, tmp / "pristine", symlinks=True)  # for the hostile variants (the tests below edit work/)
    return work, model, h1, h2, first


def test_the_cited_version_stays_and_the_current_figure_is_the_new_one(builds):
    work, _, h1, h2, first = builds
    site = work / "site"
    assert h1 != h2
    bib = first["cite.bib"].decode()
    assert f"url          = {{{SITE_URL}figures/{FIG}/{h1}/}}" in bib and f"report_builder:{FIG}:{h1}" in bib
    path = bib.split("url          = {", 1)[1].split("}", 1)[0].removeprefix(SITE_URL)
    assert _version_files(site / path) == first  # same hash, same bytes
    assert set(first) >= {"chart.svg", "chart.png", "data.csv", "spec.json", "provenance.json", "cite.bib"}
    assert json.loads(first["provenance.json"])["content_hash"] == h1
    current = site / "figures" / FIG
    assert json.loads((current / "provenance.json").read_text())["content_hash"] == h2
    assert f"{SITE_URL}figures/{FIG}/{h2}/" in (current / "cite.bib").read_text()
    assert (current / "data.csv").read_bytes() == (current / h2 / "data.csv").read_bytes()
    assert "A newer version exists" in (site / path / "index.html").read_text()
    assert "This is the current version" in (current / h2 / "index.html").read_text()
    still = [d.name for d in (site / "figures" / STILL).iterdir() if d.is_dir()]
    assert len(still) == 1  # an unchanged figure keeps its one version
    page = (site / "k21.html").read_text()
    assert f"figures/{FIG}/{h2}/index.html" in page and f"{SITE_URL}figures/{FIG}/{h2}/" in page  # the cite box


def test_the_history_lists_both_builds_with_the_changed_inputs_and_the_numbers(builds):
    work, _, h1, h2, _ = builds
    entries = json.loads((work / "site" / "history.json").read_text())["entries"]
    assert len(entries) == 2
    assert {f["id"] for f in entries[0]["added"]} == {FIG, STILL} and not entries[0]["changed"]
    (change,) = entries[1]["changed"]
    assert (change["id"], change["old"], change["new"]) == (FIG, h1, h2)
    assert change["old_permalink"] == f"figures/{FIG}/{h1}/" and change["new_permalink"] == f"figures/{FIG}/{h2}/"
    what = {(r["kind"], r["what"]) for r in change["inputs"]}
    assert ("data", "datasets.wiki.hash") in what and ("parameter", "datasets.wiki.n") in what
    assert not any(r["kind"] in ("weights", "code", "library") for r in change["inputs"])
    # only what the figure's numbers depend on: not the build's k24.top_k, nor any configuration key
    assert not [w for _, w in what if "top_k" in w or w.startswith("config.")], what
    largest = change["data"]["largest_abs"]
    old = pd.read_csv(work / "site" / change["old_permalink"] / "data.csv")
    new = pd.read_csv(work / "site" / change["new_permalink"] / "data.csv")
    keys = ["model", "dataset", "layer", "category", "method"]
    both = old.merge(new, on=keys, suffixes=("_old", "_new"))
    gap = (both["value (%)_new"] - both["value (%)_old"]).abs().max()  # the unit in the column's name
    assert abs(largest["difference"]) == pytest.approx(gap, rel=1e-12)
    assert largest["difference"] != 0
    assert largest["column"] == "value (%)" and {"model", "layer", "category"} <= set(largest["where"])
    assert change["chart"] and (work / "site" / change["chart"]).read_text().lstrip().startswith("<svg")
    changes = (work / "site" / "changes.html").read_text()
    assert "Build 2" in changes and "Build 1" in changes and changes.index("Build 2") < changes.index("Build 1")
    for p in (change["old_permalink"], change["new_permalink"]):
        assert f'href="{p}index.html"' in changes and f'src="{p}chart.png"' in changes
    assert "datasets.wiki.hash" in changes and "largest change" in changes


def test_reproduce_from_another_directory_with_an_empty_cache(builds, tmp_path, capsys, monkeypatch):
    work, model, h1, _, _ = builds
    version = work / "site" / "figures" / FIG / h1
    r = _here(capsys, monkeypatch, "reproduce", str(version / "provenance.json"), "--cache", str(tmp_path / "cache"),
              "--no-progress", cwd=tmp_path)
    assert r.returncode == 4, r.stderr  # the recorded source is a folder of the build's directory
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert "tiny-a" in line and "fingerprint" in line and "--model tiny=PATH" in line
    r = _here(capsys, monkeypatch, "reproduce", str(version / "provenance.json"), "--cache", str(tmp_path / "cache"),
              "--no-progress", "--model", f"tiny={model}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == f"reproduced {FIG} {h1}: identical"
    # an edited recipe: another parameter, or another hash, is refused before any work (its seal: exit 7)
    for edit in ("seed", "hash"):
        copy = tmp_path / f"edited-{edit}"
        copy.mkdir()
        rec = json.loads((version / "provenance.json").read_text())
        if edit == "seed":
            rec["config"]["k21"]["seed"] = 1  # another masking of the same data
        else:
            rec["content_hash"] = "0" * 12
        (copy / "provenance.json").write_text(json.dumps(rec), encoding="utf-8")
        r = _here(capsys, monkeypatch, "reproduce", str(copy), "--cache", str(tmp_path / "cache"), "--no-progress",
                  "--json", "--model", f"tiny={model}", cwd=tmp_path)
        out = json.loads(r.stdout)
        assert r.returncode == 7 and out["status"] == "altered" and not out["identical"], r.stderr[-2000:]
        assert out["recipe_intact"] is False and any("edited" in x for x in out["reasons"])
        assert out["reproduced"] is None and out["computed"] == 0
    rec["config"]["datasets"][0]["n"] = 2  # (and the hash edited) another dataset: stopped before any work
    (copy / "provenance.json").write_text(json.dumps(rec), encoding="utf-8")
    r = _here(capsys, monkeypatch, "reproduce", str(copy), "--cache", str(tmp_path / "cache"), "--no-progress",
              "--model", f"tiny={model}", cwd=tmp_path)
    assert r.returncode == 7 and "cannot verify" in r.stderr and "edited" in r.stderr, r.stderr


def test_reproduce_refuses_a_model_folder_that_needs_its_own_code(builds, tmp_path, capsys, monkeypatch):
    """A recipe's model pointed at a folder with `auto_map` (`--model NAME=DIR`) gets the custom-code refusal,
    one line, exit 4 (before: "not available here", as if the folder were missing); its code never runs."""
    import shutil

    work, model, h1, _, _ = builds
    evil = tmp_path / "tiny-evil"
    shutil.copytree(model, evil)
    marker = tmp_path / "ran"
    (evil / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    cfg = json.loads((evil / "config.json").read_text())
    (evil / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoModel": "modeling_evil.EvilModel"}}))
    r = _here(capsys, monkeypatch, "reproduce", str(work / "site" / "figures" / FIG / h1), "--cache",
              str(tmp_path / "cache"), "--no-progress", "--model", f"tiny={evil}", cwd=tmp_path)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 4 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "needs its own Python code to load (`auto_map` in its config.json" in lines[0], lines[0]
    assert "not available" not in lines[0] and not marker.exists()


def test_diff_names_the_changed_input(builds, capsys, monkeypatch):
    work, _, h1, h2, _ = builds
    a, b = work / "site" / "figures" / FIG / h1, work / "site" / "figures" / FIG / h2
    r = _here(capsys, monkeypatch, "diff", str(a), str(b), cwd=work)
    assert r.returncode == 0, r.stderr
    assert f"{FIG} {h1} -> {h2}: changed" in r.stdout and "data: datasets.wiki.hash" in r.stdout
    assert "datasets.wiki.n 3 -> 4" in r.stdout and "largest change" in r.stdout and "top_k" not in r.stdout
    r = _here(capsys, monkeypatch, "diff", str(a / "provenance.json"), str(b / "provenance.json"), "--json", cwd=work)
    d = json.loads(r.stdout)
    assert d["kind"] == "version" and ("data", "datasets.wiki.hash") in {(x["kind"], x["what"]) for x in d["inputs"]}
    r = _here(capsys, monkeypatch, "diff", str(a), str(a), cwd=work)
    assert r.returncode == 0 and "identical" in r.stdout and "no recorded input differs" in r.stdout
    r = _here(capsys, monkeypatch, "diff", str(a), str(work), cwd=work)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_a_damaged_version_is_not_republished_silently_and_clean_keeps_versions(builds):
    work, _, h1, h2, _ = builds
    site = work / "site"
    old = site / "figures" / FIG / h1 / "data.csv"
    old.chmod(0o644)  # a version's files are read-only (the current copy shares them): an edit forced in place
    old.write_bytes(old.read_bytes().replace(b",", b";", 1))  # edited in place
    r = _cli("build", "--config", "cfg.yaml", "--cache", "cache", "--out", "site", "--no-progress", "--threads", "1",
             "--set", "datasets.0.n=4", cwd=work)
    assert r.returncode == 0, r.stderr[-3000:]
    warn = [x for x in r.stderr.splitlines() if f"figures/{FIG}/{h1}/" in x]
    assert len(warn) == 1 and "data.csv was changed" in warn[0]
    assert not (site / "figures" / FIG / h1).exists() and (site / "figures" / FIG / h2 / "data.csv").is_file()
    r = _cli("clean", "--cache", "cache", "--out", "site", "--versions-older-than", "soon", cwd=work)
    assert r.returncode == 2 and "30d" in r.stderr
    r = _cli("clean", "--cache", "cache", "--out", "site", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "kept its 2 published figure versions" in r.stdout
    assert not (site / "k21.html").exists() and (site / "history.json").is_file()
    assert (site / "figures" / FIG / h2 / "provenance.json").is_file() and not (site / "figures" / FIG / "data.csv").exists()
    r = _cli("clean", "--cache", "cache", "--out", "site", "--versions-older-than", "0d", cwd=work)
    assert r.returncode == 0 and "kept its 2 published figure versions" in r.stdout  # both are current
    r = _cli("clean", "--cache", "cache", "--out", "site", "--versions-older-than", "all", cwd=work)
    assert r.returncode == 0 and not site.exists(), r.stdout + r.stderr


# ---------------------------------------------------------------- a hostile earlier site and cache (issue #30)

SECOND = ("--set", "datasets.0.n=4", "--set", "k24.top_k=6")  # the second build's settings: nothing to compute


def _hostile(builds, tmp: Path) -> tuple[Path, Path]:
    """A copy of the built site and cache, tampered with: traversal ids and hashes in versions.json, an
    unknown id, wrong hash forms, a file name out of its folder; a version folder that is a link to the
    sentinel (listed with its files' hashes); a file of the current version a link to the sentinel's
    secret (listed with the secret's hash); the old version's page and a planted file hard links to a
    sentinel file; a planted page in a version folder; links at the top, in figures/ and in history/;
    a history entry with a script link and one of the wrong type; a manifest with a traversal id.
    Returns (the work folder, the sentinel)."""
    from tests.citations import synthetic as syn

    work, s = tmp / "work", syn.sentinel(tmp)
    shutil.copytree(builds[0].parent / "pristine", work, symlinks=True)
    site, h1, h2 = work / "site", builds[2], builds[3]
    vj = site / "figures" / "versions.json"
    idx = json.loads(vj.read_text())
    good = idx["figures"][FIG][h1]
    for fid in ("../../sentinel", str(s), "k21-nope", "K21-FIG3"):
        idx["figures"][fid] = {"aaaaaaaaaaaa": good}
    for h in ("../../../sentinel", "AAAAAAAAAAAA", "abc", "0123456789abcd"):
        idx["figures"][FIG][h] = good
    idx["figures"][FIG]["bbbbbbbbbbbb"] = {**good, "files": {**good["files"], "../../../../sentinel/secret.txt": "0" * 64}}
    idx["current"]["../../sentinel"] = "aaaaaaaaaaaa"
    os.symlink(s / "fake", site / "figures" / FIG / "aaaaaaaaaaaa")
    idx["figures"][FIG]["aaaaaaaaaaaa"] = {**good, "files": {n: syn.sha((s / "fake" / n).read_bytes()) for n in good["files"]}}
    cur = site / "figures" / FIG / h2
    (cur / "cite.bib").unlink()
    os.symlink(s / "secret.txt", cur / "cite.bib")
    idx["figures"][FIG][h2]["files"]["cite.bib"] = syn.sha((s / "secret.txt").read_bytes())
    old = site / "figures" / FIG / h1
    (old / "index.html").unlink()
    os.link(s / "hard.txt", old / "index.html")
    os.link(s / "hard.txt", site / "figures" / FIG / "hard.txt")
    (old / "planted.html").write_text("<script>alert(1)</script>")
    os.symlink(s, site / "sentinel-link")
    os.symlink(s, site / "figures" / "k21-tab2")
    vj.write_text(json.dumps(idx))
    hj = site / "history.json"
    hist = json.loads(hj.read_text())
    evil = json.loads(json.dumps(hist["entries"][-1]))
    evil["changed"][0]["chart"] = "../sentinel/page.svg"
    evil["added"] = [{"id": FIG, "title": "x", "hash": h2, "permalink": "javascript:alert(1)//"}]
    hist["entries"] += [evil, {"id": "x", "changed": "nope"}]
    hj.write_text(json.dumps(hist))
    os.symlink(s / "page.svg", site / "history" / FIG / "linked.svg")
    (site / "history" / "planted.svg").write_text((s / "page.svg").read_text())
    mj = site / "figures" / "manifest.json"
    mj.write_text(json.dumps({**json.loads(mj.read_text()), "base": [1, 2], "figures": {"../../x": {"hash": "../y"}}}))
    return work, s


def _no_foreign_file(site: Path, h1: str, h2: str) -> None:
    """The new site holds no link, no planted or sentinel file, and only the versions the builds made."""
    assert not [p for p in site.rglob("*") if p.is_symlink()]
    names = {p.relative_to(site).as_posix() for p in site.rglob("*")}
    assert not [n for n in names if any(w in n for w in ("planted", "sentinel", "hard.txt", "linked", "k21-tab2",
                                                         "aaaaaaaaaaaa", ".tmp-"))], names
    assert {p.name for p in (site / "figures" / FIG).iterdir() if p.is_dir()} == {h1, h2}
    assert set(json.loads((site / "figures" / "versions.json").read_text())["figures"][FIG]) == {h1, h2}


def _remove_unlisted(site: Path) -> None:
    """Remove what the site's marker does not list (as a user told so would), links unfollowed."""
    from report_builder import site_marker

    listed = set(json.loads((site / site_marker.NAME).read_text().split(site_marker.FILES, 1)[1]))
    for rel in site_marker.entries(site):
        p = site / rel
        if rel not in listed and os.path.lexists(p):
            p.unlink() if p.is_symlink() or not p.is_dir() else shutil.rmtree(p)


def test_a_build_over_a_hostile_earlier_site_touches_nothing_outside_and_publishes_only_its_own(builds, tmp_path):
    from tests.citations import synthetic as syn

    _, _, h1, h2, first = builds
    work, s = _hostile(builds, tmp_path)
    site, cache = work / "site", work / "cache"
    around, before = syn.snapshot(tmp_path, skip=(site, cache)), syn.snapshot(site)
    build = ("build", "--config", "cfg.yaml", "--cache", "cache", "--out", "site", "--no-progress", "--threads", "1",
             *SECOND)
    r = _cli(*build, cwd=work)  # entries its marker does not list (planted, linked): refused, nothing touched
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 3 and "it holds 7 entries report_builder did not write" in line, r.stderr[-3000:]
    assert syn.snapshot(site) == before and syn.snapshot(tmp_path, skip=(site, cache)) == around
    _remove_unlisted(site)  # as the line asks; what stays was tampered with in place (damaged indexes, links)
    r = _cli(*build, cwd=work)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert syn.snapshot(tmp_path, skip=(site, cache)) == around and (s / "hard.txt").read_text().startswith("hard")
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert any("versions.json: 9 malformed entries ignored" in w for w in warn), warn
    cite = site / "figures" / FIG / h2 / "cite.bib"  # derived: the planted link is never read, made anew
    assert not cite.is_symlink() and "private" not in cite.read_text() and h2 in cite.read_text()
    assert any("aaaaaaaaaaaa" in w and "not republished" in w for w in warn), warn
    assert any("history.json: entry 3" in w and "entry 4" in w for w in warn), warn
    _no_foreign_file(site, h1, h2)
    assert _version_files(site / "figures" / FIG / h1) == first  # the cited version, byte for byte
    assert "javascript" not in (site / "changes.html").read_text().replace("javascripts/", "")
    assert "k21-nope" not in (site / "figures" / "versions.json").read_text()


def test_render_over_a_damaged_index_keeps_every_version_and_the_history(builds, tmp_path):
    """A truncated versions.json, a history.json nested too deep, a history/ folder that is a link and a
    results cache whose state folder is a link: the render refuses the cache in one line, then (the
    link removed) keeps both versions, rebuilds the index from their folders and keeps history.json as it was."""
    from tests.citations import synthetic as syn

    _, _, h1, h2, first = builds
    work, s = tmp_path / "work", syn.sentinel(tmp_path)
    shutil.copytree(builds[0].parent / "pristine", work, symlinks=True)
    site, cache = work / "site", work / "cache"
    vj, hj = site / "figures" / "versions.json", site / "history.json"
    vj.write_text(vj.read_text()[:200])
    hj.write_text('{"entries": ' + "[" * 200 + "]" * 200 + "}")
    shutil.rmtree(site / "history")
    os.symlink(s, site / "history")
    shutil.move(cache / "site", s / "state")
    os.symlink(s / "state", cache / "site")
    around = syn.snapshot(tmp_path, skip=(site, cache))
    r = _cli("render", "--cache", "cache", "--out", "site", cwd=work)
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 3 and "cache/site" in line and "symbolic link" in line, r.stderr[-2000:]
    (cache / "site").unlink()
    r = _cli("render", "--cache", "cache", "--out", "site", cwd=work)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert any("versions.json cannot be used" in w and "every version folder found (3) is kept" in w for w in warn), warn
    assert any("history.json cannot be read" in w and "kept as it is" in w for w in warn), warn
    assert hj.read_text() == '{"entries": ' + "[" * 200 + "]" * 200 + "}"
    assert not [p for p in site.rglob("*") if p.is_symlink()]
    assert set(json.loads(vj.read_text())["figures"][FIG]) == {h1, h2}
    assert _version_files(site / "figures" / FIG / h1) == first
    assert syn.snapshot(tmp_path, skip=(site, cache)) == around


def test_clean_reproduce_and_diff_over_a_hostile_site_and_cache(builds, tmp_path, capsys, monkeypatch):
    """``clean`` with every flag, ``reproduce`` and ``diff`` (in-process) over the hostile site: refused in
    one line where they must be, nothing outside --out/--cache written or removed."""
    from report_builder import cli
    from tests.citations import synthetic as syn

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "user-cache"))
    model, h1, h2 = builds[1], builds[2], builds[3]
    work, s = _hostile(builds, tmp_path)
    site, cache = work / "site", work / "cache"
    os.symlink(s, cache / "reproduced")
    forged = tmp_path / "forged"  # a copy of a version with a traversal id as its figure
    shutil.copytree(site / "figures" / FIG / h1, forged)
    rec = json.loads((forged / "provenance.json").read_text())
    (forged / "provenance.json").write_text(json.dumps({**rec, "figure": {**rec["figure"], "id": "../../../sentinel"}}))
    around = syn.snapshot(tmp_path, skip=(site, cache, tmp_path / "user-cache"))

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        assert "Traceback" not in err and "internal error" not in err, err
        return code, out, err

    # reproduce: a version folder that is a link; a recipe naming a traversal id; the cache's reproduced/ a link
    code, _, err = run("reproduce", str(site / "figures" / FIG / "aaaaaaaaaaaa"), "--cache", str(cache), "--no-progress")
    assert code == 2 and "symbolic link" in err
    code, _, err = run("reproduce", str(forged), "--cache", str(cache), "--no-progress")
    assert code == 2 and "figure.id is not a registered figure id" in err
    code, _, err = run("reproduce", str(site / "figures" / FIG / h1), "--cache", str(cache), "--no-progress",
                       "--model", f"tiny={model}")
    assert code == 3 and "reproduced" in err and "symbolic link" in err, err
    (cache / "reproduced").unlink()
    # diff: a link refused, two hostile sites compared by their registered figures only
    code, _, err = run("diff", str(site / "figures" / FIG / "aaaaaaaaaaaa"), str(site / "figures" / FIG / h1))
    assert code == 2 and "symbolic link" in err
    code, out, _ = run("diff", str(site), str(builds[0].parent / "pristine" / "site"))
    assert code == 0 and "k21-tab2" not in out
    # clean, every flag: refused while the site holds entries its marker does not list, then as asked
    code, out, err = run("clean", "--cache", str(cache), "--out", str(site))
    assert code == 3 and "it holds 7 entries report_builder did not write" in err, out + err
    _remove_unlisted(site)
    code, out, err = run("clean", "--cache", str(cache), "--out", str(site))
    assert code == 0 and "kept its 3 published figure versions" in out, out + err  # k21-fig3's two, k21-fig2's
    assert len([ln for ln in err.splitlines() if "versions.json" in ln]) == 1
    walked = [*(site / "figures").iterdir(), *(site / "figures" / FIG).iterdir()]  # a version's own files are kept
    assert not [p for p in walked if p.is_symlink()] and not (site / "sentinel-link").is_symlink()
    code, out, _ = run("clean", "--cache", str(cache), "--out", str(site), "--versions-older-than", "2000-01-01")
    assert code == 0 and "kept its 3 published figure versions" in out and "figure versions (" not in out
    code, out, _ = run("clean", "--cache", str(cache), "--out", str(site), "--versions-older-than", "0d")
    assert code == 0 and f"1 figure versions (figures/{FIG}/{h1}/)" in out, out
    code, out, _ = run("clean", "--cache", str(cache), "--out", str(site), "--all", "--versions-older-than", "all")
    assert code == 0 and not site.exists(), out
    assert syn.snapshot(tmp_path, skip=(site, cache, tmp_path / "user-cache")) == around
    assert (s / "secret.txt").read_text() == "private key\n" and (s / "hard.txt").read_text().startswith("hard")
