"""The one reader of what the tool wrote before (`citations.readback`, `citations.earlier_site`) and the
file operations confined to a root (`atomic`): each hostile class with a variant of our own, and the one
line and exit code `reproduce`/`diff` give for it (issue #30). No build: a synthetic site (`synthetic`)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from report_builder import api, atomic, cli
from report_builder.citations import earlier_site, readback
from report_builder.errors import UnsafeOutput
from tests.citations import synthetic as syn


def _one_error(capsys, argv: list[str], code: int, *words: str) -> str:
    """Run the CLI in-process; its one ``error:`` line (exit ``code``, no traceback), holding ``words``."""
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- inside a root, no link followed


def test_reads_writes_and_removals_stay_inside_their_root(tmp_path):
    root, s = tmp_path / "root", syn.sentinel(tmp_path)
    (root / "a").mkdir(parents=True)
    (root / "a" / "f").write_text("ok")
    os.symlink(s, root / "link")
    os.symlink(s / "secret.txt", root / "a" / "secret")
    os.link(s / "hard.txt", root / "a" / "hard")
    before = syn.snapshot(s)
    assert atomic.read_inside(root, root / "a" / "f", 10) == b"ok"
    for bad in (root / "link" / "secret.txt", root / ".." / "sentinel" / "secret.txt", s / "secret.txt"):
        with pytest.raises(UnsafeOutput):  # through a link, or out of the root by ``..`` or by an absolute path
            atomic.read_inside(root, bad, 100)
    with pytest.raises(atomic.NotRegular, match="symbolic link"):
        atomic.read_inside(root, root / "a" / "secret", 100)
    with pytest.raises(atomic.NotRegular, match="larger than 1 bytes"):
        atomic.read_inside(root, root / "a" / "f", 1)
    os.mkfifo(root / "a" / "fifo")  # opened without blocking and refused: no hang
    with pytest.raises(atomic.NotRegular, match="not a regular file"):
        atomic.read_inside(root, root / "a" / "fifo", 100)
    # a write replaces a hard link by rename (never through it); through a link or out of the root: refused
    atomic.replace_inside(root, root / "a" / "hard", "new")
    assert (root / "a" / "hard").read_text() == "new" and (s / "hard.txt").read_text() == "hard-linked into the site\n"
    for bad in (root / "link" / "x", root / ".." / "x"):
        with pytest.raises(UnsafeOutput):
            atomic.replace_inside(root, bad, "x")
    with pytest.raises(UnsafeOutput):
        atomic.remove_inside(root, root / "link" / "secret.txt")
    assert atomic.remove_inside(root, root / "link") and atomic.remove_inside(root, root / "a")  # links go as links
    assert sorted(os.listdir(root)) == [] and syn.snapshot(s) == before
    with atomic.opened_regular(tmp_path, s / "secret.txt", 100) as fd:  # the inode read is the one linked
        atomic.replace_inside(root, root / "copy", link_fd=fd)
    assert (root / "copy").read_text() == "private key\n" and os.listdir(root) == ["copy"]


# ---------------------------------------------------------------- forms, JSON, records


@pytest.mark.parametrize("value", ["../../x", "/etc", "k21-fig3/../../x", "K21-FIG3", "k21-nope", "", None, 3,
                                   "k21-fig3\n", "k21-fig3\x00"])
def test_figure_ids_are_registered_ones(value):
    assert readback.figure_id(value) is None
    assert readback.figure_id("k21-fig3") == "k21-fig3"


@pytest.mark.parametrize("value", ["../../../x", "0123456789AB", "0123456789a", "0123456789abc", "0123456789a/",
                                   "/tmp/abcdefab", "012345678 9a", None, 123456789012])
def test_content_hashes_have_their_exact_form(value):
    assert readback.content_hash(value) is None
    assert readback.content_hash("0123456789ab") == "0123456789ab"


@pytest.mark.parametrize("text, why", [
    ("[" * 100_000 + "]" * 100_000, "nested deeper"), ('{"a":' * 40 + "1" + "}" * 40, "nested deeper"),
    ("", "not valid JSON"), ('{"a": 1', "not valid JSON"), ("\xff\xfe", "not valid JSON"),
    ('{"n": ' + "9" * 5000 + "}", "not valid JSON")])
def test_json_read_back_is_bounded(text, why):
    with pytest.raises(readback.BadRecord, match=why):
        readback.load_json(text.encode("utf-8", "surrogateescape") if text != "\xff\xfe" else b"\xff\xfe", "f.json")


def _record(tmp_path, **edit):
    info = syn.make_site(tmp_path)
    folder = info["site"] / "figures" / syn.FIG / info["old"]
    rec = json.loads((folder / "provenance.json").read_text())
    for k, v in edit.items():
        rec[k] = v
    return info, folder, rec


@pytest.mark.parametrize("edit, why", [
    ({"figure": {"id": "../../sentinel"}}, "figure.id"), ({"content_hash": "ABCDEF012345"}, "content_hash"),
    ({"models": ["x"]}, "models/datasets"), ({"max_reconstruction_error": "1e-7"}, "max_reconstruction_error"),
    ({"permalink": "javascript:alert(1)//figures/k21-fig3/x/"}, "permalink"),
    ({"device": {"a": 1}}, "shown field"),
    ({"error_bound": "x"}, "error_bound"), ({"error_bound": None}, "error_bound"),  # the version page's float()
    ({"chunk_rule": ["gpu"]}, "chunk_rule")])
def test_a_record_the_site_shows_is_validated(tmp_path, edit, why):
    _, folder, rec = _record(tmp_path, **edit)
    (folder / "provenance.json").write_text(json.dumps(rec))
    with pytest.raises(readback.BadRecord, match=why):
        readback.read_record(folder)


# ---------------------------------------------------------------- reproduce and diff: one line, exit 2


@pytest.mark.parametrize("variant", ["traversal id", "traversal hash", "upper-case hash", "unknown roles key",
                                     "missing role", "display types", "deep", "200 MB", "fifo", "link", "folder link",
                                     "not a dict"])
def test_reproduce_refuses_a_hostile_recipe_in_one_line(tmp_path, capsys, variant):
    info, folder, rec = _record(tmp_path)
    case = tmp_path / "case"
    shutil.copytree(folder, case)
    prov = case / "provenance.json"
    edits = {"traversal id": ("figure", {"id": "../../../sentinel"}), "traversal hash": ("content_hash", "../../../x"),
             "upper-case hash": ("content_hash", rec["content_hash"].upper()),
             "unknown roles key": ("roles", {**rec["roles"], "evil": "x"}),
             "missing role": ("roles", {k: v for k, v in rec["roles"].items() if k != "variants"}),
             "display types": ("display", {"tiny": {"style": ["x"], "causal": "yes"}})}
    if variant in edits:
        k, v = edits[variant]
        prov.write_text(json.dumps({**rec, k: v}))
    elif variant == "deep":
        prov.write_text('{"a": ' + "[" * 50_000 + "]" * 50_000 + "}")
    elif variant == "200 MB":
        with open(prov, "r+b") as f:
            f.truncate(200 << 20)  # sparse: nothing written, 200 MB long
    elif variant == "fifo":
        prov.unlink()
        os.mkfifo(prov)
    elif variant == "link":
        prov.unlink()
        os.symlink(folder / "provenance.json", prov)
    elif variant == "folder link":
        shutil.rmtree(case)
        os.symlink(folder, case)
    else:
        prov.write_text("[1, 2]")
    why = {"traversal id": "figure.id", "traversal hash": "content_hash", "upper-case hash": "content_hash",
           "unknown roles key": "roles has keys other than", "missing role": "roles lacks variants",
           "display types": "display is not", "deep": "nested deeper", "200 MB": "larger than",
           "fifo": "not a regular file", "link": "symbolic link", "folder link": "symbolic link",
           "not a dict": "not a JSON object"}[variant]
    _one_error(capsys, ["reproduce", str(case), "--cache", str(tmp_path / "rc"), "--no-progress"], 2, why)
    assert not (tmp_path / "rc").exists()  # refused before anything is written


@pytest.mark.parametrize("key", ["bogus", "k21", "models"])
def test_an_unknown_key_of_the_recipes_configuration_is_one_line_exit_3(tmp_path, capsys, key):
    info, folder, rec = _record(tmp_path)
    conf = {"bogus": {**rec["config"], "bogus": 1}, "k21": {**rec["config"], "k21": {"bogus": 1}},
            "models": {**rec["config"], "models": [{"name": "tiny", "source": "tiny-a", "bogus": 2}]}}[key]
    (folder / "provenance.json").write_text(json.dumps({**rec, "config": conf}))
    _one_error(capsys, ["reproduce", str(folder), "--cache", str(tmp_path / "rc"), "--no-progress"], 3,
               "the recipe's configuration is not valid here", "bogus: unknown key")


def test_diff_reads_bounded_and_follows_no_link(tmp_path, capsys):
    info = syn.make_site(tmp_path)
    a, b = (info["site"] / "figures" / syn.FIG / h for h in (info["old"], info["new"]))
    os.symlink(a, tmp_path / "link")
    _one_error(capsys, ["diff", str(tmp_path / "link"), str(b)], 2, "symbolic link")
    (b / "data.csv").unlink()
    os.mkfifo(b / "data.csv")  # no hang: the data are not comparable
    assert cli.main(["diff", str(a), str(b)]) == 0
    assert "not comparable" in capsys.readouterr().out
    os.symlink(tmp_path, info["site"] / "figures" / "k21-tab2")  # a link among the figures: not a figure
    assert cli.main(["diff", str(info["site"]), str(info["site"])]) == 0
    assert "k21-tab2" not in capsys.readouterr().out


def _two_sites(tmp_path):
    """The synthetic site with each figure's current files in ``figures/<id>/`` (as a build leaves them)
    and an identical copy of it: (old site, new site)."""
    info = syn.make_site(tmp_path)
    old = info["site"]
    for fig, h in ((syn.FIG, info["new"]), (syn.OTHER, info["other"])):
        for name in ("provenance.json", "data.csv", "spec.json", "chart.svg"):
            (old / "figures" / fig / name).unlink(missing_ok=True)
            shutil.copy(old / "figures" / fig / h / name, old / "figures" / fig / name)
    new = tmp_path / "new"
    shutil.copytree(old, new)
    return old, new


@pytest.mark.parametrize("damage", ["link", "dangling link", "fifo", "not json", "another figure"])
def test_a_site_diff_names_a_damaged_figure_and_compares_the_others(tmp_path, capsys, damage):
    """One damaged figure of an earlier site stopped the whole site diff (one line, exit 2; a dangling link
    made the figure 'added'); now it is listed as not comparable, with why, and the other figures compared."""
    old, new = _two_sites(tmp_path)
    prov = old / "figures" / syn.OTHER / "provenance.json"
    text = prov.read_text()
    prov.unlink()
    if damage == "link":
        os.symlink(old / "figures" / syn.FIG / "provenance.json", prov)
    elif damage == "dangling link":
        os.symlink(tmp_path / "nowhere", prov)
    elif damage == "fifo":
        os.mkfifo(prov)
    elif damage == "not json":
        prov.write_text("{")
    else:
        prov.write_text(text.replace(f'"id": "{syn.OTHER}"', f'"id": "{syn.FIG}"'))
    d = api.diff(old, new)
    assert d["unchanged"] == [syn.FIG] and not d["added"] and not d["removed"] and not d["changed"]
    assert [u["figure"] for u in d["unreadable"]] == [syn.OTHER]
    assert cli.main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0] == "0 changed, 0 added, 0 removed, 1 unchanged, 1 not comparable (files unreadable)"
    assert lines[1].startswith(f"not comparable {syn.OTHER}: OLD: ") and str(prov) in lines[1], lines
    assert "Traceback" not in out.err and "error" not in out.err


def test_diff_of_two_different_figures_is_refused_in_one_line(tmp_path, capsys):
    """``diff`` of k21-fig3's and k21-fig2's versions printed 'code: figure.id k21-fig3 -> k21-fig2' as if it
    were one figure's change (exit 0)."""
    info = syn.make_site(tmp_path)
    a = info["site"] / "figures" / syn.FIG / info["new"]
    b = info["site"] / "figures" / syn.OTHER / info["other"]
    _one_error(capsys, ["diff", str(a), str(b)], 2, f"a version of {syn.FIG}", f"one of {syn.OTHER}",
               "two versions of one figure")
    _one_error(capsys, ["diff", str(b / "provenance.json"), str(a / "provenance.json")], 2, "two versions of one figure")


# ---------------------------------------------------------------- the indexes of an earlier site


@pytest.mark.parametrize("damage", ["missing", "empty", "truncated", "wrong types", "deeply nested", "link", "fifo",
                                    "emptied"])
def test_a_damaged_versions_index_keeps_every_version(tmp_path, damage):
    info, s = syn.make_site(tmp_path), syn.sentinel(tmp_path)
    site, vj = info["site"], info["site"] / "figures" / "versions.json"
    text = vj.read_text()
    vj.unlink()
    if damage == "empty":
        vj.write_text("")
    elif damage == "truncated":
        vj.write_text(text[: len(text) // 2])
    elif damage == "wrong types":
        vj.write_text('{"figures": [1, 2], "current": "x"}')
    elif damage == "deeply nested":
        vj.write_text('{"figures": ' + "[" * 1000 + "]" * 1000 + "}")
    elif damage == "link":
        (s / "versions.json").write_text('{"figures": {}}')
        os.symlink(s / "versions.json", vj)
    elif damage == "fifo":
        os.mkfifo(vj)
    elif damage == "emptied":
        vj.write_text('{"figures": {}, "current": {}}')
    said: list[str] = []
    index = earlier_site.load_versions(site, said.append)
    assert {(v.figure, v.hash) for v in index.all()} == {(syn.FIG, info["old"]), (syn.FIG, info["new"]),
                                                         (syn.OTHER, info["other"])}
    assert index.current == {syn.FIG: info["new"], syn.OTHER: info["other"]} or damage in ("emptied", "missing")
    if damage != "missing":
        assert len(said) == 1 and "versions.json" in said[0] and "3" in said[0], said
    assert all(earlier_site.check_version(site, v) is None for v in index.all())


def test_a_hostile_versions_index_names_nothing_outside_its_folders(tmp_path):
    info, s = syn.make_site(tmp_path), syn.sentinel(tmp_path)
    site, index = info["site"], info["index"]
    good = index["figures"][syn.FIG][info["old"]]
    index["figures"].update({"../../sentinel": {"aaaaaaaaaaaa": good}, str(s): {"aaaaaaaaaaaa": good},
                             "k21-nope": {"aaaaaaaaaaaa": good}})
    index["figures"][syn.FIG].update({"../../../sentinel": good, "AAAAAAAAAAAA": good, "abc": good,
                                      "bbbbbbbbbbbb": {**good, "files": {**good["files"], "../../secret.txt": "0" * 64}},
                                      "cccccccccccc": {**good, "files": {**good["files"], "index.html": "0" * 64}},
                                      "dddddddddddd": {**good, "files": {**good["files"], "data.csv": "ABC"}}})
    (site / "figures" / "versions.json").write_text(json.dumps(index))
    said: list[str] = []
    got = earlier_site.load_versions(site, said.append)
    assert {(v.figure, v.hash) for v in got.all()} == {(syn.FIG, info["old"]), (syn.FIG, info["new"]),
                                                       (syn.OTHER, info["other"])}
    assert len(said) == 1 and "9 malformed entries ignored" in said[0]


@pytest.mark.parametrize("hostile, why", [
    ({"added": [{"id": syn.FIG, "title": "x", "hash": "0123456789ab", "permalink": "javascript:alert(1)//"}]}, "added"),
    ({"changed": "nope"}, "changed is not a list"), ({"models": [1]}, "models/datasets"),
    ({"date": {"x": 1}}, "shown field"), ("not an entry", "not a JSON object")])
def test_a_malformed_history_entry_is_skipped_with_one_warning_and_kept(tmp_path, hostile, why):
    info = syn.make_site(tmp_path)
    hj = info["site"] / "history.json"
    hist = json.loads(hj.read_text())
    bad = hostile if isinstance(hostile, str) else {**hist["entries"][0], **hostile}
    hist["entries"].append(bad)
    hj.write_text(json.dumps(hist))
    from report_builder.citations import history

    said: list[str] = []
    past = history.read(info["site"], said.append)
    assert len(past.entries) == 1 and past.raw[-1] == bad  # left out of the page, kept in the file
    assert len(said) == 1 and "entry 2" in said[0] and why in said[0]
    html = history.history_html(past.entries, set())
    assert "javascript" not in html


def test_a_chart_path_or_hash_out_of_form_is_not_an_entry(tmp_path):
    info = syn.make_site(tmp_path)
    hist = json.loads((info["site"] / "history.json").read_text())
    for chart, digest in (("../sentinel/page.svg", syn.sha(syn.SVG)), (info["chart"], "../x")):
        hist["entries"][0]["changed"][0].update(chart=chart, chart_sha256=digest)
        assert earlier_site.check_entry(hist["entries"][0]) is not None


@pytest.mark.parametrize("damage", ["truncated", "link", "deep"])
def test_an_unreadable_history_is_kept_as_it_was(tmp_path, damage):
    info, s = syn.make_site(tmp_path), syn.sentinel(tmp_path)
    hj = info["site"] / "history.json"
    if damage == "truncated":
        hj.write_text(hj.read_text()[:40])
    elif damage == "deep":
        hj.write_text('{"entries": ' + "[" * 500 + "]" * 500 + "}")
    else:
        hj.unlink()
        os.symlink(s / "secret.txt", hj)
    past = earlier_site.read_history(info["site"])
    assert past.damaged and not past.entries
    assert (past.raw_bytes == hj.read_bytes()) if damage != "link" else past.raw_bytes is None  # a link is not read


def test_the_manifest_read_back_keeps_only_valid_ids_and_hashes(tmp_path):
    info = syn.make_site(tmp_path)
    mj = info["site"] / "figures" / "manifest.json"
    mj.write_text(json.dumps({"figures": {"../../x": {"hash": "0123456789ab"}, syn.FIG: {"hash": "../x", "title": 3}},
                              "base": [1], "date": {"a": 1}}))
    m = earlier_site.read_manifest(info["site"])
    assert m["figures"] == {syn.FIG: {"hash": None}} and m["base"] is None and "date" not in m
    mj.write_text("[" * 10_000)
    assert earlier_site.read_manifest(info["site"]) is None
