"""`report-builder cite` on a site whose index or versions were damaged or tampered with (docs/cite.md):
it cites only what verifies, recovers from a damaged index the way a build does, and says so in one line."""
from __future__ import annotations

import json

import pytest

from report_builder import cli
from report_builder.citations.citing import cite
from report_builder.citations.version_files import permalink
from report_builder.errors import UsageError
from tests.citations import synthetic as syn

URL = "https://example.org/r/"  # the site_url the synthetic records name in their permalink


def _damage(info: dict, how: str) -> None:
    vj = info["site"] / "figures" / "versions.json"
    if how == "deleted":
        vj.unlink()
    else:
        vj.write_text({"truncated": vj.read_text()[:100], "wrong types": "[1, 2]", "empty": ""}[how])


@pytest.mark.parametrize("how", ["truncated", "wrong types", "empty", "deleted"])
@pytest.mark.parametrize("manifest", [True, False])
def test_cite_recovers_from_a_damaged_index_as_a_build_does(tmp_path, capsys, how, manifest):
    """A damaged versions.json made `cite` exit 2 ("cannot be used") though every version folder verified and
    a build recovers from it: the versions are the folders that verify, the current one the manifest's (else
    the history's), the url the version's own record's, and one warning line says so."""
    info = syn.make_site(tmp_path)
    _damage(info, how)
    if not manifest:
        (info["site"] / "figures" / "manifest.json").unlink()
    assert cli.main(["cite", syn.FIG, "--dir", str(info["site"]), "--json"]) == 0
    out, err = capsys.readouterr()
    got = json.loads(out)
    assert (got["hash"], got["current"]) == (info["new"], True), got
    assert got["url"] == URL + permalink(syn.FIG, info["new"]) and f"url          = {{{got['url']}}}" in got["bibtex"]
    warn = [ln for ln in err.splitlines() if ln.strip()]
    assert len(warn) == 1 and warn[0].startswith("warning:") and "versions.json cannot be used" in warn[0], err
    assert "cited from the 3 version folders that verify" in warn[0] and "rebuild the index" in warn[0], warn
    assert cite(syn.FIG, info["old"], site_dir=info["site"], log=lambda _: None).current is False


@pytest.mark.parametrize("forgery", ["edited", "edited with its index", "record of another hash"])
def test_a_version_whose_bytes_are_not_the_published_ones_is_not_cited(tmp_path, forgery):
    """`cite` read only the version's provenance.json: a folder whose data.csv was edited after it was published
    (or edited with the SHA-256 its index records, or holding a record of another version) was cited as that
    version, hash and permalink, exit 0. Its bytes are checked as a build checks them before carrying it."""
    info = syn.make_site(tmp_path)
    site, h = info["site"], info["old"]
    folder = site / permalink(syn.FIG, h)
    if forgery == "record of another hash":
        (folder / "provenance.json").write_bytes((site / permalink(syn.FIG, info["new"]) / "provenance.json").read_bytes())
    else:
        (folder / "data.csv").write_text("layer,value (%)\n1,99.5\n")
    if forgery != "edited":  # the index rewritten to match: the content hash still does not
        idx = json.loads((site / "figures" / "versions.json").read_text())
        idx["figures"][syn.FIG][h]["files"] = {n: syn.sha((folder / n).read_bytes()) for n in idx["figures"][syn.FIG][h]["files"]}
        (site / "figures" / "versions.json").write_text(json.dumps(idx))
    with pytest.raises(UsageError, match=f"not the version {h} of {syn.FIG} as published"):
        cite(syn.FIG, h, site_dir=site)
    assert cite(syn.FIG, site_dir=site).hash == info["new"]  # the others still cite


@pytest.mark.parametrize("where", ["long name", "long path", "through a file"])
def test_a_site_folder_no_command_could_use_is_one_line(tmp_path, capsys, where):
    """`cite --dir` with a folder name over the filesystem's limit was "internal error: OSError: [Errno 36] File
    name too long" (exit 1); it is one line naming --dir, exit 2, as `diff` and `reproduce` say of their paths."""
    (tmp_path / "notes.txt").write_text("x")
    d = {"long name": tmp_path / ("x" * 300), "long path": tmp_path.joinpath(*["y" * 200] * 30),
         "through a file": tmp_path / "notes.txt" / "site"}[where]
    assert cli.main(["cite", syn.FIG, "--dir", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cite --dir: ") and len(err.splitlines()) == 1 and "internal error" not in err, err
