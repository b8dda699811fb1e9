"""Published bytes that survive float noise, citations that follow ``site_url``, verification that checks
the bytes it is given (issues #30, #31), through the API and the CLI as a user meets them.

One tiny BERT, three figures, three builds of one site: (1) the plain CPU build; (2) a rebuild into
another results cache on the batched (padded) path with another batch size, and the GPU class's chunk
rule where the configuration has one: the same bytes; (3) a rebuild that sets ``site_url`` from results
moved across rounding boundaries: every citation absolute, every version kept, the hashed files
unchanged. Then ``cite``, ``reproduce`` (identical; equal within tolerance when the numbers move below
the precision; a forged folder refused with exit 7) and ``diff`` (data compared, not recorded hashes).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from report_builder import api, engine
from report_builder.config import Config
from report_builder.errors import EXIT_CODES, UsageError

ROOT = Path(__file__).resolve().parents[1]
FIGS = ["k21-fig3", "k21-tab2", "k24-ctx-ff", "k24-ffamp-example"]  # the last: FF-amp, a difference
FIG = "k21-fig3"  # its data moved on the batched path before numbers were rounded
SITE_URL = "https://example.org/report/"
HASHED = ("chart.png", "chart.svg", "data.csv", "paper_vs_ours.csv", "provenance.json", "spec.json")
CHUNK_RULE = "chunk_rule" in getattr(Config, "__dataclass_fields__", {})


def _versions(site: Path) -> dict:
    return json.loads((site / "figures" / "versions.json").read_text())


def _hashed_bytes(site: Path) -> dict[str, bytes]:
    """Every version's files that its hash or index covers (not cite.bib and index.html: derived)."""
    idx = _versions(site)
    return {f"{fid}/{h}/{name}": (site / "figures" / fid / h / name).read_bytes()
            for fid, vs in idx["figures"].items() for h in vs for name in HASHED
            if (site / "figures" / fid / h / name).is_file()}


def _batched(plain):
    def run(*a, **k):
        return plain(*a, **{**k, "batched": True})
    return run


def _noisy(plain, rel: float):
    """The engine with every ratio and map moved by ``rel`` (another device class's last bits)."""
    def run(*a, **k):
        for s, layer, r in plain(*a, **k):
            yield s, layer, dataclasses.replace(r, ratios={m: v * (1 + rel) for m, v in r.ratios.items()},
                                                maps={m: v * (1 + rel) for m, v in r.maps.items()})
    return run


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from tests.test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("verify")
    model = tiny_bert_dir(tmp / "tiny", 0)
    site = tmp / "site"
    cfg = {"models": [{"name": "tiny", "source": str(model), "role": "primary_encoder"}],
           "datasets": [{"id": "wiki", "n": 6, "k24_n": 3, "max_length": 128}],  # lengths differ: padding
           "k24": {"top_k": 5, "examples": 1}, "figures": FIGS, "out_dir": str(site),
           "cache_dir": str(tmp / "c1"), "threads": 1}
    rep1, _ = api.build(dict(cfg), log=None, progress=False)
    first = _hashed_bytes(site)
    again = {**cfg, "cache_dir": str(tmp / "c2"), "batch_size": 3, **({"chunk_rule": "gpu"} if CHUNK_RULE else {})}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "decompose_sequences", _batched(engine.decompose_sequences))
        rep2, _ = api.build(again, log=None, progress=False)
    second = _hashed_bytes(site)
    logs: list[str] = []  # (3): site_url set, and results moved across rounding boundaries (a new cache)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "decompose_sequences", _noisy(engine.decompose_sequences, 4e-7))
        api.build({**cfg, "cache_dir": str(tmp / "c3"), "site_url": SITE_URL}, log=logs.append, progress=False)
    return SimpleNamespace(tmp=tmp, model=model, site=site, cfg=cfg, rep1=rep1, rep2=rep2, first=first,
                           second=second, third=_hashed_bytes(site), logs=logs)


def test_a_rebuild_in_other_batches_and_chunks_publishes_the_same_bytes(built):
    moved = [n for n, t in built.rep1.tables.items() if isinstance(t, pd.DataFrame) and n in built.rep2.tables
             and not t.equals(built.rep2.tables[n])]
    assert moved, "the batched path changed no result: nothing was tested"
    assert built.second == built.first
    assert all(len(vs) == 1 for vs in _versions(built.site)["figures"].values())


def test_site_url_set_later_reaches_every_citation_and_changes_no_hashed_byte(built):
    site, idx = built.site, _versions(built.site)
    assert built.third == built.first  # the versions published before site_url: byte for byte
    # ... also those whose numbers moved across a rounding boundary: kept within the precision
    assert any("kept (" in line and "equal within the published precision" in line for line in built.logs)
    assert idx["site_url"] == SITE_URL
    assert any("site_url is now " + SITE_URL in line and "earlier versions" in line for line in built.logs)
    for fid, h in idx["current"].items():
        url = f"{SITE_URL}figures/{fid}/{h}/"
        assert f"url          = {{{url}}}" in (site / "figures" / fid / h / "cite.bib").read_text()
        assert f"url          = {{{url}}}" in (site / "figures" / fid / "cite.bib").read_text()
        assert url in (site / "figures" / fid / h / "index.html").read_text()  # the version page
    for page in ("k21.html", "k24.html"):  # every Cite box
        text = (site / page).read_text()
        assert 'class="quote rb-cite"' in text
        assert f"url          = {{{SITE_URL}figures/" in text and "url          = {figures/" not in text
    import html
    import re

    report = html.unescape(re.sub(r"<[^>]+>", "", (site / "cite.html").read_text()))  # highlighted BibTeX
    assert f"url          = {{{SITE_URL}}}" in report  # the report's own citation: its address too (it had none)
    c = api.cite(FIG, site_dir=site)
    assert c.current and c.url == f"{SITE_URL}figures/{FIG}/{idx['current'][FIG]}/" and c.url in c.bibtex
    with pytest.raises(UsageError, match="did you mean k21-fig3"):
        api.cite("k21-fig33", site_dir=site)
    with pytest.raises(UsageError, match="holds no version 0123456789ab"):
        api.cite(FIG, "0123456789ab", site_dir=site)


def _folder(built) -> Path:
    return built.site / "figures" / FIG / _versions(built.site)["current"][FIG]


def test_reproduce_a_genuine_folder_is_identical(built):
    res = api.reproduce(_folder(built), cache_dir=built.tmp / "c1", models=[f"tiny={built.model}"], log=lambda *_: None,
                        progress=False)
    assert (res.status, res.exit_code) == ("identical", 0), res.line()
    assert {"data.csv", "spec.json", "chart.svg", "chart.png"} <= set(res.folder_files)
    assert Path(res.files).name == f"{FIG}-{res.reproduced}"  # a name it derived itself
    assert res.drawings == [] and "drawn here" not in res.line()  # the same machine draws the same bytes


def test_a_drawing_forged_with_its_recipe_is_named_though_spec_and_data_are_identical(built, tmp_path):
    """Before: a chart.png/chart.svg (what a reader looks at; the content hash covers neither for a chart) was
    checked only against the SHA-256 the recipe records, so a forger who rewrote the recipe's ``files`` and
    its seal with the drawing got "identical" and nothing else. Now the folder's drawings are compared with
    the ones drawn here from the same spec.json, and the line names those that differ (exit 0 still: the
    verdict is about spec and data, and other fonts draw other bytes)."""
    import hashlib
    import json

    from report_builder.citations import recipe

    forged = tmp_path / _folder(built).name
    shutil.copytree(_folder(built), forged)
    for p in forged.iterdir():
        p.chmod(0o644)
    (forged / "chart.png").write_bytes((forged / "chart.png").read_bytes() + b"forged")
    rec = json.loads((forged / "provenance.json").read_text())
    rec["files"]["chart.png"] = hashlib.sha256((forged / "chart.png").read_bytes()).hexdigest()
    (forged / "provenance.json").write_text(recipe.dumps(recipe.seal(rec)))
    res = api.reproduce(forged, cache_dir=built.tmp / "c1", models=[f"tiny={built.model}"], log=lambda *_: None,
                        progress=False)
    assert (res.status, res.exit_code, res.drawings) == ("identical", 0, ["chart.png"]), res.line()
    assert "chart.png is not the bytes drawn here from the same spec.json" in res.line(), res.line()
    assert res.files in res.line()


def test_reproduce_below_the_precision_is_equal_within_tolerance_and_says_what_moved(built, monkeypatch):
    monkeypatch.setattr(engine, "decompose_sequences", _noisy(engine.decompose_sequences, 4e-7))
    res = api.reproduce(_folder(built), cache_dir=built.tmp / "c3", models=[f"tiny={built.model}"],
                        log=lambda *_: None, progress=False)
    assert (res.status, res.exit_code) == ("within", 0), res.line()
    line = res.line()
    assert "equal within tolerance" in line and "largest change" in line and res.reproduced != res.recorded
    assert res.data["values_changed"] >= 1 and res.data["largest_abs"]["where"]["model"] == "tiny"
    d = _drawn_folder_verifies(built, res, built.tmp / "c3")
    assert d["inputs"] == [], d["inputs"]  # the same device and code: only the numbers moved, within the precision


def _drawn_folder_verifies(built, res, cache: Path, **kw) -> dict:
    """The folder ``reproduce`` drew (``res.files``) is a version of its own: its provenance.json records its
    content hash, its files' SHA-256 and the version it reproduces (not that version's permalink), it verifies,
    a diff against the cited folder names no check, only data within the precision, and reproducing it again
    (with the same run's conditions) says identical. Before, it held the cited recipe: "altered" (exit 7), and
    ``diff`` said "NEW's files are not the version its record claims". Returns the diff."""
    from report_builder import precision
    from report_builder.citations import readback, verify

    cited, drawn = _folder(built), Path(res.files)
    rec, _ = readback.read_recipe(drawn)
    assert rec.content_hash == res.reproduced and "permalink" not in rec.data
    assert rec.data["reproduces"] == {"figure": FIG, "content_hash": res.recorded,
                                      "permalink": f"figures/{FIG}/{res.recorded}/"}
    assert set(rec.data["files"]) >= {"spec.json", "data.csv", "chart.svg", "chart.png"}
    assert verify.check_folder(drawn, rec.data).mismatches == []
    d = api.diff(cited, drawn)
    assert d["checks"] == [] and "check:" not in api.format_diff(d), api.format_diff(d)
    assert d["old"] == res.recorded and d["new"] == res.reproduced
    if res.status == "within":
        assert d["data"]["values_changed"] >= 1
        assert precision.frames_within(pd.read_csv(cited / "data.csv"), pd.read_csv(drawn / "data.csv"))
    again = api.reproduce(drawn, cache_dir=cache, models=[f"tiny={built.model}"], log=lambda *_: None,
                          progress=False, **kw)
    assert (again.status, again.exit_code) == ("identical", 0), again.line()
    return d


@pytest.mark.skipif(not CHUNK_RULE, reason="the configuration has no chunk_rule yet")
def test_reproduce_with_the_other_chunk_rule_exits_0(built):
    res = api.reproduce(_folder(built), cache_dir=built.tmp / "c4", models=[f"tiny={built.model}"], chunk_rule="gpu",
                        log=lambda *_: None, progress=False)
    assert res.exit_code == 0 and res.status in ("identical", "within"), res.line()
    rec = json.loads((Path(res.files) / "provenance.json").read_text())
    assert rec["chunk_rule"] == "gpu" and rec["config"]["chunk_rule"] == "gpu"  # this run's, not the recipe's
    d = _drawn_folder_verifies(built, res, built.tmp / "c4")  # no --chunk-rule: its recipe records gpu
    assert {r["what"] for r in d["inputs"]} >= {"chunk_rule"}, d["inputs"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=cwd)


def test_a_forged_folder_does_not_reproduce_and_names_what_does_not_match(built, tmp_path):
    forged = tmp_path / "forged"
    shutil.copytree(_folder(built), forged)
    for name in ("data.csv", "chart.svg"):  # a version's files are read-only (copytree keeps the mode)
        (forged / name).chmod(0o644)
    lines = (forged / "data.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[-2] = "12.5"  # one number of the first row
    lines[1] = ",".join(cells)
    (forged / "data.csv").write_text("\n".join(lines) + "\n")
    (forged / "chart.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><text>forged</text></svg>')
    r = _cli("reproduce", str(forged), "--cache", str(tmp_path / "cache"), "--model", f"tiny={built.model}",
             "--no-progress", cwd=tmp_path)
    assert r.returncode == EXIT_CODES["altered"] == 7, r.stderr[-2000:]
    err = r.stderr
    assert "not the figure its recipe names" in err and "data.csv" in err and "chart.svg" in err
    assert not (tmp_path / "cache").exists()  # stopped before anything was computed


def test_diff_compares_the_data_not_the_recorded_hashes(built, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(_folder(built), a)
    shutil.copytree(_folder(built), b)
    same = api.diff(a, b)
    assert same["identical"] and not same["checks"]
    df = pd.read_csv(b / "data.csv")
    col = [c for c in df.columns if c.startswith("value")][0]
    df.loc[0, col] = df.loc[0, col] + 1.0
    df.to_csv(b / "data.csv", index=False)  # the record still claims the same hash
    d = api.diff(a, b)
    assert d["old"] == d["new"] and not d["identical"]
    assert any("NEW's files are not the version its record claims" in c for c in d["checks"])
    assert d["data"]["values_changed"] == 1 and abs(d["data"]["largest_abs"]["difference"] - 1.0) < 1e-9
    assert "changed" in api.format_diff(d).splitlines()[0]


def test_diff_never_calls_files_it_cannot_read_identical(built, tmp_path):
    """A side whose data.csv is a FIFO or a link (to the genuine file, even), or a bare provenance.json: the
    records may claim the same hash, the verdict is not "identical" (nothing waited on, nothing followed)."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(_folder(built), a)
    shutil.copytree(_folder(built), b)
    (b / "data.csv").unlink()
    os.mkfifo(b / "data.csv")
    d = api.diff(a, b)
    assert not d["identical"] and d["verdict"] == "unverified", d
    assert any("NEW has no readable spec.json and data.csv" in c for c in d["checks"])
    assert api.format_diff(d).splitlines()[0].endswith(": the same recorded hash, files not compared")
    (b / "data.csv").unlink()
    (b / "data.csv").symlink_to(a / "data.csv")
    assert api.diff(a, b)["verdict"] == "unverified"
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(a / "provenance.json", bare / "provenance.json")
    d = api.diff(a / "provenance.json", bare / "provenance.json")
    assert not d["identical"] and d["verdict"] == "unverified"
    sites = {}
    for name, folder in (("old", a), ("new", b)):
        site = tmp_path / f"{name}-site"
        (site / "figures").mkdir(parents=True)
        shutil.copytree(folder, site / "figures" / FIG, symlinks=True)
        sites[name] = site
    s = api.diff(sites["old"], sites["new"])
    assert s["unchanged"] == [] and s["changed"] == [] and [c["figure"] for c in s["unverified"]] == [FIG]
    assert "1 not comparable (files unreadable)" in api.format_diff(s).splitlines()[0]
    assert api.diff(sites["old"], sites["old"])["unchanged"] == [FIG]


def test_a_recipe_from_a_gpu_asks_for_device_cpu_on_a_machine_without_one(built, monkeypatch):
    """A figure built on CUDA, reproduced where torch has no CUDA device: one line naming ``--device cpu``
    (the recipe's device was an internal error from inside torch); with ``--device cpu`` it runs here."""
    import torch

    from report_builder.citations import reproduce

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rec = json.loads((_folder(built) / "provenance.json").read_text())
    rec["config"]["device"] = "cuda"
    from report_builder.errors import cli_vocabulary

    with cli_vocabulary(), pytest.raises(UsageError, match=r"^the recipe ran on 'cuda', which this machine cannot "
                                                           r"run \(.*\): add --device cpu"):
        reproduce._config(rec, built.tmp / "c5", {}, {}, None)
    with pytest.raises(UsageError, match=r": add device=cpu \("):  # through the API, its keyword
        reproduce._config(rec, built.tmp / "c5", {}, {}, None)
    assert reproduce._config(rec, built.tmp / "c5", {}, {}, "cpu").device == "cpu"
