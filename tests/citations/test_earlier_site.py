"""Publishing the versions of a hostile earlier site and ``clean`` over it, without a build (issue #30):
what the new site carries is only what verifies, as regular files written by rename; nothing outside
the site is read into it, written or removed; a damaged index removes no version. A synthetic site
(`synthetic`); the end-to-end variant through the CLI is in tests/test_citations.py."""
from __future__ import annotations

import json
import os

import pytest

from report_builder import cli
from report_builder.citations import permalinks
from report_builder.citations.version_files import permalink, version_hash
from report_builder.site import svgsafe
from tests.citations import synthetic as syn


def _hostile(tmp_path) -> tuple[dict, object]:
    """A synthetic site tampered with: traversal ids and hashes, a version folder that is a link to the
    sentinel (listed with its files' hashes), a file inside the current version that is a link to the
    secret (listed with the secret's hash), a page hard-linked to a sentinel file, planted files, a
    version whose drawing holds a script (its hashes right), links in figures/ and history/."""
    info, s = syn.make_site(tmp_path), syn.sentinel(tmp_path)
    site, index = info["site"], info["index"]
    figs = index["figures"][syn.FIG]
    good = figs[info["old"]]
    index["figures"]["../../sentinel"] = {"aaaaaaaaaaaa": good}
    index["figures"][syn.FIG]["../../../sentinel"] = good
    os.symlink(s / "fake", site / "figures" / syn.FIG / "aaaaaaaaaaaa")
    figs["aaaaaaaaaaaa"] = {**good, "files": {n: syn.sha((s / "fake" / n).read_bytes()) for n in good["files"]}}
    cur = site / permalink(syn.FIG, info["new"])
    (cur / "cite.bib").unlink()
    os.symlink(s / "secret.txt", cur / "cite.bib")
    figs[info["new"]]["files"]["cite.bib"] = syn.sha((s / "secret.txt").read_bytes())
    old = site / permalink(syn.FIG, info["old"])
    (old / "index.html").unlink()
    os.link(s / "hard.txt", old / "index.html")
    (old / "planted.html").write_text("<script>alert(1)</script>")
    spec, csv = json.dumps({"mark": "rect", "n": 9}), "layer,value (%)\n1,9\n"
    h = version_hash(spec, csv, syn.EVIL_SVG)  # a forged version whose hashes are all right
    evil = site / permalink(syn.FIG, h)
    evil.mkdir()
    rec = json.loads((old / "provenance.json").read_text())
    files = {"chart.svg": syn.EVIL_SVG, "chart.png": "png", "data.csv": csv, "spec.json": spec, "cite.bib": "@misc{x}",
             "provenance.json": json.dumps({**rec, "content_hash": h, "permalink": None})}
    for n, text in files.items():
        (evil / n).write_text(text)
    figs[h] = {**good, "files": {n: syn.sha(v) for n, v in files.items()}}
    os.symlink(s, site / "figures" / "k21-tab2")
    os.symlink(s / "page.svg", site / "history" / syn.FIG / "linked.svg")
    (site / "history" / "planted.svg").write_text(syn.EVIL_SVG)
    (site / "figures" / "versions.json").write_text(json.dumps(index))
    os.link(site / "figures" / "versions.json", s / "versions-hard.json")  # the index itself a hard link out
    info["evil"] = h
    return info, s


def test_publish_carries_only_verified_regular_files_and_writes_by_rename(tmp_path):
    info, s = _hostile(tmp_path)
    site, new_site = info["site"], tmp_path / "new"
    new_site.mkdir()
    around = syn.snapshot(tmp_path, skip=(new_site,))
    said: list[str] = []
    v = permalinks.Versions(site, None, said.append, svgsafe.is_safe)
    index = v.publish(new_site, lambda fid, h, *a: f"<p>{fid} {h}</p>")
    carried = {(f, h) for f, vs in index["figures"].items() for h in vs}
    # the current one's cite.bib is a link: derived (made anew from the record), it is never read or carried
    assert carried == {(syn.FIG, info["old"]), (syn.OTHER, info["other"]), (syn.FIG, info["new"])}
    bib = new_site / permalink(syn.FIG, info["new"]) / "cite.bib"
    assert not bib.is_symlink() and "private key" not in bib.read_text() and info["new"] in bib.read_text()
    damaged = " ".join(said)
    for why in ("aaaaaaaaaaaa", "chart.svg holds more than a chart draws"):
        assert why in damaged, said
    assert syn.snapshot(tmp_path, skip=(new_site,)) == around  # nothing read into the site was written
    got = {str(p.relative_to(new_site)) for p in new_site.rglob("*")}
    assert not [p for p in new_site.rglob("*") if p.is_symlink()]
    assert not [g for g in got if "planted" in g or "sentinel" in g or "aaaaaaaaaaaa" in g or info["evil"] in g]
    old = new_site / permalink(syn.FIG, info["old"])
    assert sorted(os.listdir(old)) == ["chart.png", "chart.svg", "cite.bib", "data.csv", "index.html",
                                       "provenance.json", "spec.json"]
    assert (old / "index.html").read_text() == f"<p>{syn.FIG} {info['old']}</p>"
    assert (s / "hard.txt").read_text() == "hard-linked into the site\n"  # the page was not written through
    assert json.loads((new_site / "figures" / "versions.json").read_text())["figures"] == index["figures"]


def _clean(capsys, site, tmp_path, *flags) -> tuple[int, str, str]:
    code = cli.main(["clean", "--out", str(site), "--cache", str(tmp_path / "no-cache"), *flags])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


def test_clean_over_a_hostile_site_follows_no_link_and_names_each_version_removed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "user-cache"))
    info, s = _hostile(tmp_path)
    site = info["site"]
    around = syn.snapshot(tmp_path, skip=(site,))
    code, out, err = _clean(capsys, site, tmp_path)
    assert code == 0 and "kept its 4 published figure versions" in out, out + err  # the forged one too: no flag
    assert syn.snapshot(tmp_path, skip=(site,)) == around  # the index rewritten by rename, not through its link
    assert not (site / "index.html").exists() and not (site / "figures" / "k21-tab2").is_symlink()
    assert not (site / "figures" / syn.FIG / "aaaaaaaaaaaa").is_symlink()  # a link is no version: removed as a link
    assert (site / permalink(syn.FIG, info["old"]) / "spec.json").is_file()
    code, out, err = _clean(capsys, site, tmp_path, "--versions-older-than", "2020-01-15")
    assert code == 0 and "2 figure versions (" in out, out
    assert permalink(syn.FIG, info["old"]) in out and permalink(syn.FIG, info["evil"]) in out
    assert (site / permalink(syn.FIG, info["new"])).is_dir()  # the current one stays whatever its date
    code, out, err = _clean(capsys, site, tmp_path, "--all", "--versions-older-than", "all")
    assert code == 0 and not site.exists(), out + err
    assert syn.snapshot(tmp_path, skip=(site, tmp_path / "user-cache")) == around


@pytest.mark.parametrize("damage", ["empty", "truncated", "wrong types", "link", "folder"])
def test_a_plain_clean_with_a_damaged_index_removes_no_version(tmp_path, capsys, damage):
    info, s = syn.make_site(tmp_path), syn.sentinel(tmp_path)
    vj = info["site"] / "figures" / "versions.json"
    text = vj.read_text()
    vj.unlink()
    if damage == "link":
        os.symlink(s / "secret.txt", vj)
    elif damage == "folder":
        vj.mkdir()
        (vj / "x").write_text("{}")
    else:
        vj.write_text({"empty": "", "truncated": text[:100], "wrong types": "[1, 2]"}[damage])
    around = syn.snapshot(tmp_path, skip=(info["site"],))
    code, out, err = _clean(capsys, info["site"], tmp_path)
    assert code == 0 and "kept its 3 published figure versions" in out, out + err
    warn = [ln for ln in err.splitlines() if "versions.json" in ln]
    assert len(warn) == 1 and warn[0].startswith("warning:") and "every version folder found (3) is kept" in warn[0]
    for h in ("old", "new"):
        assert (info["site"] / permalink(syn.FIG, info[h]) / "provenance.json").is_file()
    assert len(json.loads(vj.read_text())["figures"][syn.FIG]) == 2 and not vj.is_symlink()  # repaired
    assert syn.snapshot(tmp_path, skip=(info["site"],)) == around


def _site_without_index(tmp_path, damage: str) -> dict:
    """A synthetic site whose versions.json is truncated or missing and whose manifest is gone."""
    info = syn.make_site(tmp_path)
    vj = info["site"] / "figures" / "versions.json"
    text = vj.read_text()
    vj.unlink()
    if damage == "truncated":
        vj.write_text(text[:100])
    (info["site"] / "figures" / "manifest.json").unlink()
    return info


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_clean_by_date_with_no_usable_index_removes_no_version(tmp_path, capsys, damage):
    """Without a usable index (and no manifest) no figure's current version is known: a dated clean used to
    remove every version, the current ones too, and the site with them."""
    info = _site_without_index(tmp_path, damage)
    code, out, err = _clean(capsys, info["site"], tmp_path, "--versions-older-than", "2030-01-01")
    assert code == 0 and "kept its 3 published figure versions" in out and "figure versions (" not in out, out + err
    assert "--versions-older-than removes no version" in err, err
    for h in ("old", "new", "other"):
        fig = syn.OTHER if h == "other" else syn.FIG
        assert (info["site"] / permalink(fig, info[h]) / "provenance.json").is_file()


def test_clean_keeps_the_site_url_its_index_records(tmp_path, capsys):
    """`cite` after `clean` gives the version's absolute address as before (clean's index kept no site_url)."""
    info = syn.make_site(tmp_path)
    vj = info["site"] / "figures" / "versions.json"
    vj.write_text(json.dumps({**info["index"], "site_url": "https://example.org/r/"}))
    code, out, err = _clean(capsys, info["site"], tmp_path)
    assert code == 0, out + err
    assert json.loads(vj.read_text())["site_url"] == "https://example.org/r/"
    assert cli.main(["cite", syn.FIG, "--dir", str(info["site"])]) == 0
    assert f"url          = {{https://example.org/r/{permalink(syn.FIG, info['new'])}}}" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [
    {"inputs": [{"kind": "weights", "what": "models.tiny.fingerprint"}]},  # no old/new
    {"data": {"comparable": True}},  # no counts
    {"data": {"comparable": True, "values_changed": 1, "values_compared": 2, "largest_abs": {"difference": "big"}}},
    {"data": {"comparable": True, "values_changed": 1, "values_compared": 2,
              "largest_rel": {"relative": 0.5, "column": "v", "where": "layer 1"}}},
    {"data": {"comparable": True, "values_changed": 1, "values_compared": 2, "rows_added": 3}},
])
def test_a_history_change_the_changes_page_cannot_show_is_left_out_not_an_internal_error(tmp_path, bad):
    """A change whose inputs or data summary lack what the Changes page prints (KeyError, a format error on
    every later build of the site) is left out of the page and kept in the file."""
    from report_builder.citations import earlier_site, history

    info = syn.make_site(tmp_path)
    hj = info["site"] / "history.json"
    h = json.loads(hj.read_text())
    good = json.loads(json.dumps(h["entries"][0]))
    good["changed"][0].update(inputs=[{"kind": "weights", "what": "w", "old": "a", "new": "b"}], data={
        "comparable": True, "values_changed": 1, "values_compared": 2, "rows_added": 0, "rows_removed": 0,
        "largest_abs": {"difference": 0.5, "column": "v", "old": 1.0, "new": 1.5, "where": {"layer": 1}},
        "largest_rel": {"relative": 0.5, "column": "v", "where": {"layer": 1}}})
    h["entries"][0]["changed"][0].update(bad)
    h["entries"].append(good)
    hj.write_text(json.dumps(h))
    past = earlier_site.read_history(info["site"])
    assert list(past.skipped) == [1] and len(past.raw) == 2 and past.entries == [good], past.skipped
    page = history.history_html(past.entries, set())
    assert "largest change 0.5 in v" in page


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_without_index_or_manifest_the_current_versions_come_from_the_history(tmp_path, damage):
    """A build over a site whose index and manifest are both unusable took no figure as current: its history
    entry listed every figure as "added" again (and no version could be kept within the precision)."""
    from report_builder.citations import earlier_site

    info = _site_without_index(tmp_path, damage)
    h = json.loads((info["site"] / "history.json").read_text())
    h["entries"].insert(0, {**h["entries"][0], "id": "e0", "changed": [], "added": [
        {"id": f, "title": "t", "hash": info[k], "permalink": permalink(f, info[k])}
        for f, k in ((syn.FIG, "old"), (syn.OTHER, "other"))]})
    (info["site"] / "history.json").write_text(json.dumps(h))
    index = earlier_site.load_versions(info["site"], lambda line: None)
    assert index.current == {syn.FIG: info["new"], syn.OTHER: info["other"]}


def test_published_version_files_are_read_only_so_the_current_copy_cannot_edit_them(tmp_path):
    """The current copy ``figures/<id>/data.csv`` is a hard link to its version's: an in-place edit of it
    (``>> data.csv``, pandas' ``to_csv``) changed the cited version too, and the next build that changed the
    figure dropped that version as damaged. A version's files are read-only (as DVC's cache and git's objects)."""
    import stat

    info = syn.make_site(tmp_path)
    new_site = tmp_path / "new"
    new_site.mkdir()
    v = permalinks.Versions(info["site"], None, lambda line: None, svgsafe.is_safe)
    v.current = {syn.FIG: info["new"]}
    (new_site / "figures" / syn.FIG).mkdir(parents=True)
    cur = new_site / "figures" / syn.FIG / "data.csv"
    cur.write_bytes((info["site"] / permalink(syn.FIG, info["new"]) / "data.csv").read_bytes())  # as mkdocs writes it
    index = v.publish(new_site, lambda fid, h, *a: "<p>page</p>")
    for fid, vs in index["figures"].items():
        for h, rec in vs.items():
            for name in rec["files"]:
                mode = (new_site / permalink(fid, h) / name).stat().st_mode
                assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), (fid, h, name, oct(mode))
            assert (new_site / permalink(fid, h) / "cite.bib").stat().st_mode & stat.S_IWUSR  # derived: made anew
    assert cur.stat().st_ino == (new_site / permalink(syn.FIG, info["new"]) / "data.csv").stat().st_ino
    assert not cur.stat().st_mode & stat.S_IWUSR


def test_a_current_version_the_index_does_not_hold_is_malformed(tmp_path):
    """``current`` naming a hash the site holds no version of made the next build's history say the figure
    changed from a version that never existed (its old permalink shown as removed)."""
    from report_builder.citations import earlier_site

    info = syn.make_site(tmp_path)
    vj = info["site"] / "figures" / "versions.json"
    vj.write_text(json.dumps({**info["index"], "current": {syn.FIG: "aaaaaaaaaaaa", syn.OTHER: info["other"]}}))
    said: list[str] = []
    index = earlier_site.load_versions(info["site"], said.append)
    assert index.current == {syn.OTHER: info["other"]} and index.dropped == 1
    assert len(said) == 1 and "1 malformed entries ignored" in said[0], said


def test_the_index_is_written_in_one_order_so_a_rebuild_with_no_change_keeps_its_bytes(tmp_path):
    """A build's new versions were appended after the earlier ones (and a new figure after the others); the
    next build, with nothing changed, read them back sorted and wrote ``versions.json`` in another order: bytes
    of the site changed by a rebuild that changed nothing. Figures and versions are written sorted."""
    info = syn.make_site(tmp_path)
    scratch = tmp_path / "scratch"
    n = 10
    while True:  # a new version whose hash sorts before the figure's earlier ones
        h, _ = syn.version(scratch, syn.FIG, n, "2020-03-01T00:00:00+00:00")
        if h < min(info["old"], info["new"]):
            break
        n += 1
    sites = [info["site"], tmp_path / "b1", tmp_path / "b2"]
    for k, (old, new) in enumerate(zip(sites, sites[1:])):
        new.mkdir()
        v = permalinks.Versions(old, None, lambda line: None, svgsafe.is_safe)
        v.current = {syn.FIG: h, syn.OTHER: info["other"]}
        if k == 0:  # the build that made the new version: its files are the figure's current copy
            (new / "figures" / syn.FIG).mkdir(parents=True)
            for f in (scratch / permalink(syn.FIG, h)).iterdir():
                (new / "figures" / syn.FIG / f.name).write_bytes(f.read_bytes())
            v.new[syn.FIG] = {"hash": h, "created": "2020-03-01T00:00:00+00:00", "title": "t", "paper": "K21"}
            v.records[syn.FIG] = json.loads((scratch / permalink(syn.FIG, h) / "provenance.json").read_text())
        v.publish(new, lambda fid, h, *a: "<p>page</p>")
    first, second = ((s / "figures" / "versions.json").read_bytes() for s in sites[1:])
    assert list(json.loads(first)["figures"][syn.FIG]) == sorted([h, info["old"], info["new"]])
    assert first == second


@pytest.mark.parametrize("n", ["<script>alert(1)</script>", {"tiny": "<img src=x onerror=alert(1)>"}])
def test_a_carried_versions_page_escapes_its_records_sequence_counts(tmp_path, n):
    """A version folder whose record's ``datasets.<id>.n`` holds markup (its files, content hash and index all
    consistent: whoever writes the site can make one) was published with that markup as HTML in its version
    page's provenance table: the counts were the one field of the table written unescaped."""
    from report_builder.citations import version_page

    info = syn.make_site(tmp_path)
    site, h = info["site"], info["old"]
    prov = site / permalink(syn.FIG, h) / "provenance.json"
    rec = json.loads(prov.read_text())
    rec["datasets"]["wiki"]["n"] = n
    prov.write_text(json.dumps(rec))
    vj = site / "figures" / "versions.json"
    idx = json.loads(vj.read_text())
    idx["figures"][syn.FIG][h]["files"]["provenance.json"] = syn.sha(prov.read_bytes())
    vj.write_text(json.dumps(idx))
    new_site = tmp_path / "new"
    new_site.mkdir()
    v = permalinks.Versions(site, None, lambda line: None, svgsafe.is_safe)
    v.current = {syn.FIG: info["new"]}
    v.publish(new_site, lambda fid, hh, rec, bib, cur, newer: version_page.page(fid, hh, rec, bib, cur, None, newer, "u"))
    page = (new_site / permalink(syn.FIG, h) / "index.html").read_text()
    assert "sequences" in page and "<script>alert" not in page and "<img src=x" not in page, page


def test_a_build_without_the_figures_that_published_some_versions_refuses_to_drop_them(tmp_path):
    """A version is kept by every later build only while its figure id is known (registered, or declared by
    the build). Before: a site holding versions of an id the next build did not know (published by a newer
    report_builder, or by a build whose own declarations are gone) was rebuilt without them -- "1 malformed
    entries ignored" and the swap deleted their permalinks, which `clean` keeps. Now the build refuses in one
    line naming them, before any work, and the site stays as it was."""
    from report_builder.errors import UnsafeOutput, exit_code
    from report_builder.site import build as build_mod
    from tests import site_helpers as h

    h.render_dummy_site(tmp_path)
    site = tmp_path / "site"
    before = syn.snapshot(site)
    with pytest.raises(UnsafeOutput) as info:  # k21-dummy-tab and k24-dummy-maps: no longer declared
        build_mod.render_site(h._dummy_tables(), h.DUMMY_ROLES, h.provenance("smoke"), out_dir=site,
                              log=lambda *_: None, figures=h.DUMMY_FIGURES[:1])
    msg = str(info.value)
    assert exit_code(info.value) == 3 and "figures/k21-dummy-tab/" in msg and "does not know" in msg, msg
    assert "figures/k21-dummy-fig/" not in msg, msg
    assert syn.snapshot(site) == before


def test_a_version_page_says_newer_only_of_a_version_created_later(tmp_path):
    """A rebuild that swaps a model back makes an earlier version current again: the page of the version
    created after it said "A newer version exists" of the older one. It now says which is current and that
    it was created before this one; a version older than the current one still reads "A newer version exists"."""
    from report_builder.citations import version_page

    info = syn.make_site(tmp_path)
    new_site = tmp_path / "new"
    new_site.mkdir()
    v = permalinks.Versions(info["site"], None, lambda line: None, svgsafe.is_safe)
    v.current = {syn.FIG: info["old"], syn.OTHER: info["other"]}  # back to the version of 2020-01-01
    v.publish(new_site, lambda fid, hh, rec, bib, cur, newer: version_page.page(fid, hh, rec, bib, cur, None, newer, "u"))
    later = (new_site / permalink(syn.FIG, info["new"]) / "index.html").read_text()
    assert "A newer version exists" not in later and "not part of the current report" not in later, later
    assert "An earlier version is current" in later and info["old"] in later
    v.current = {syn.FIG: info["new"], syn.OTHER: info["other"]}
    again = tmp_path / "again"
    again.mkdir()
    v.publish(again, lambda fid, hh, rec, bib, cur, newer: version_page.page(fid, hh, rec, bib, cur, None, newer, "u"))
    assert "A newer version exists" in (again / permalink(syn.FIG, info["old"]) / "index.html").read_text()
