"""A results cache describes itself (`last_build`): `render --cache` from another directory, without the
configuration file, the data file or the model folder, rebuilds the same site (same figure hashes);
`load_results` reads it from anywhere; a configuration that disagrees with the build is refused in one
line naming the keys; missing entries are named; the kept data copy lets the build run again elsewhere.

The build runs from its project folder (a relative config and data file, a model folder in it), as a user
would; the render runs from an unrelated folder where none of them exist."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cli_here import cli_here
from conftest import figure_hashes

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # one small build and three renders (a few figures each)

FIGURES = ["k21-tab1", "k21-tab2", "k21-tab4", "k24-models", "k24-ctx-ff"]
"""Figures that read the user's data (datasets table), the model's public source and the results."""


def _cli(*argv, cwd, timeout=900):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "report_builder", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from test_pipeline import tiny_bert_dir

    proj = tmp_path_factory.mktemp("project")
    tiny_bert_dir(proj / "models" / "tiny", 0)
    (proj / "notes.txt").write_text("The cat sat on the mat.\nA dog barked at the mailman.\n"
                                    "Rain fell all night over the quiet town.\nShe read the letter twice.\n")
    (proj / "my.yaml").write_text(yaml.safe_dump({
        # an absolute model path inside the project: published as models/tiny (relative to where the build ran)
        "models": [{"name": "tiny", "source": str(proj / "models" / "tiny"), "role": "primary_encoder"}],
        "datasets": [{"id": "notes", "path": "notes.txt", "n": 4, "k24_n": 1, "max_length": 32}],
        "k24": {"top_k": 3, "examples": 1}, "figures": FIGURES}))
    r = _cli("-q", "build", "--config", "my.yaml", "--cache", "C", "--out", "S", cwd=proj)
    assert r.returncode == 0, r.stderr[-3000:]
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    return proj, elsewhere


def test_render_from_another_directory_is_the_same_site(project):
    proj, elsewhere = project
    r = _cli("-q", "render", "--cache", str(proj / "C"), "--out", "site", cwd=elsewhere)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    want, got = figure_hashes(proj / "S"), figure_hashes(elsewhere / "site")
    assert got == want and sum(h is not None for h in got.values()) == len(FIGURES)
    for page in ("k21.html", "k24.html"):  # the user's models and data, not the default preset's
        assert "notes" in (elsewhere / "site" / page).read_text(encoding="utf-8")
    models = (elsewhere / "site" / "figures" / "k21-tab4" / "data.csv").read_text(encoding="utf-8")
    assert "models/tiny" in models and "<local>" not in models and str(proj) not in models
    resolved = yaml.safe_load((elsewhere / "site" / "config.resolved.yaml").read_text())
    assert [m["name"] for m in resolved["models"]] == ["tiny"] and resolved["figures"] == FIGURES
    rec = json.loads((proj / "C" / "last_build.json").read_text())
    kept = proj / "C" / rec["inputs"]["notes"]["kept"]
    assert kept.read_bytes() == (proj / "notes.txt").read_bytes() and rec["inputs"]["notes"]["kind"] == "file"


def test_render_without_out_writes_site_here_never_the_recorded_output(project, tmp_path, capsys, monkeypatch):
    proj, _ = project
    before = sorted(p.relative_to(proj / "S").as_posix() for p in (proj / "S").rglob("*"))
    mtime = (proj / "S" / "index.html").stat().st_mtime_ns
    # as --help says: ./site (in this process, tests/cli_here.py: its log line is the point)
    r = cli_here(capsys, "render", "--cache", str(proj / "C"), "--set", "figures=[k21-tab1]", monkeypatch=monkeypatch,
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert f"render: writing site/ (the recorded build wrote S/" in r.stderr, r.stderr[-2000:]
    assert sorted(p.relative_to(proj / "S").as_posix() for p in (proj / "S").rglob("*")) == before
    assert (proj / "S" / "index.html").stat().st_mtime_ns == mtime  # the build's own site untouched


def test_load_results_from_another_directory(project, monkeypatch):
    import report_builder as rb

    proj, elsewhere = project
    monkeypatch.chdir(elsewhere)
    t = rb.load_results(str(proj / "C"))
    assert "k21_tokens" in t and t["datasets"]["dataset"].tolist() == ["notes"], sorted(t)


def test_a_configuration_that_disagrees_with_the_build_is_refused(project, capsys, monkeypatch):
    proj, elsewhere = project
    cases = [(["--preset", "smoke"], "on preset, models (2 entries, the build had 1)"),
             (["--set", "k24.top_k=5"], "on k24.top_k;"),
             (["--config", str(proj / "my.yaml"), "--set", "datasets.0.n=3"], "on datasets[0].n;")]
    for extra, keys in cases:  # refused before any work: in this process (tests/cli_here.py)
        r = cli_here(capsys, "render", "--cache", str(proj / "C"), "--out", "refused", *extra, monkeypatch=monkeypatch,
                     cwd=elsewhere)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 3 and len(lines) == 1 and keys in lines[0], r.stderr
        assert "render: the configuration differs from the build recorded in" in lines[0]
        assert not (elsewhere / "refused").exists()
    # the render-time keys may differ: the site's address and which figures
    r = cli_here(capsys, "-q", "render", "--config", "my.yaml", "--cache", "C", "--out", str(elsewhere / "addr"), "--set",
                 "site_url=https://example.org/report/", "--set", "figures=[k21-tab1, k24-models]", monkeypatch=monkeypatch,
                 cwd=proj)
    assert r.returncode == 0, r.stderr
    assert "https://example.org/report/" in (elsewhere / "addr" / "index.html").read_text(encoding="utf-8")
    got = figure_hashes(elsewhere / "addr")
    assert got["k21-tab1"] == figure_hashes(proj / "S")["k21-tab1"] and got.get("k21-tab2") is None


def test_missing_entries_are_named_and_the_kept_data_rebuilds_elsewhere(project, tmp_path, capsys, monkeypatch):
    proj, elsewhere = project
    from report_builder import last_build

    moved = tmp_path / "C"
    shutil.copytree(proj / "C", moved)
    os.chdir(tmp_path)  # the data file is not where the build read it (notes.txt here): the kept copy is used
    try:
        cfg = last_build.recorded_config(moved)
    finally:
        os.chdir(ROOT)
    assert Path(cfg.datasets[0].path).read_bytes() == (proj / "notes.txt").read_bytes()
    assert Path(cfg.datasets[0].path).is_relative_to(moved / "inputs")
    entry = next(p for p in (moved / "results" / "k21_mixing").iterdir() if p.is_dir() and not p.name.startswith("."))
    shutil.rmtree(entry)
    r = cli_here(capsys, "render", "--cache", str(moved), "--out", "partial", monkeypatch=monkeypatch, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 3 and len(lines) == 1 and f"k21_mixing/{entry.name}" in lines[0], r.stderr
    assert "lacks 1 of the" in lines[0] and not (tmp_path / "partial").exists()
    (moved / "inputs" / "not-ours").mkdir()  # `clean` removes the kept copies it can prove, names the rest
    r = cli_here(capsys, "clean", "--cache", str(moved), "--out", str(tmp_path / "no-site"), monkeypatch=monkeypatch,
                 cwd=tmp_path)
    assert r.returncode == 0 and "1 kept data files from" in r.stdout and "not-ours" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in (moved / "inputs").iterdir()) == ["not-ours"]
