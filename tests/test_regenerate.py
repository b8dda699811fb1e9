"""Regenerate as a researcher does (issue #31), through the CLI: one results cache wherever you run, a swap of
one model's source that keeps its name and figures, and ``-q`` that prints nothing but warnings.

Tiny random BERTs (two configured: ``enc``, the primary encoder, and ``other``, a variant), one small
dataset, three figures: ``k21-tab2`` (the primary encoder), ``k21-tab5`` (the variant) and ``k21-tab8``
(every model). The user cache (``REPORT_BUILDER_CACHE``) is the test's own, so the default results cache
starts empty. Builds: the first from directory A without ``--cache``; the same configuration from
directory B (nothing new computed); then ``-q build --model enc=<other weights>`` from A.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from report_builder import guard

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ["k21-tab2", "k21-tab5", "k21-tab8"]


def _cli(*args: str, cwd: Path, ucache: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "REPORT_BUILDER_CACHE": str(ucache)}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd)


def _counts(stdout: str) -> tuple[int, int]:
    m = re.search(r"^analyses: (\d+) computed, (\d+) reused", stdout, re.M)
    assert m, stdout
    return int(m.group(1)), int(m.group(2))


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    from tests.test_pipeline import tiny_bert_dir

    tmp = tmp_path_factory.mktemp("regen")
    ucache = tmp / "ucache"
    ucache.mkdir()
    for memo in ("vendor", "evalsets", "freq"):  # derived data only (no results): saves rebuilding them
        src = guard.user_cache_dir() / memo
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, ucache / memo, symlinks=False)
    models = tmp / "models"
    a, b, c = (tiny_bert_dir(models / n, seed) for n, seed in (("tiny-a", 0), ("tiny-b", 1), ("tiny-c", 2)))
    cfg = {"models": [{"name": "enc", "source": str(a), "role": "primary_encoder"},
                      {"name": "other", "source": str(c), "role": "variant"}],
           "datasets": [{"id": "wiki", "n": 3, "k24_n": 1, "max_length": 32}],
           "k24": {"top_k": 5, "examples": 1}, "figures": FIGURES}
    work_a, work_b = tmp / "a", tmp / "b"
    for w in (work_a, work_b):
        w.mkdir()
        (w / "cfg.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    common = ("build", "--config", "cfg.yaml", "--out", "site", "--threads", "1")
    first = _cli(*common, "--no-progress", cwd=work_a, ucache=ucache)
    assert first.returncode == 0, first.stderr[-3000:]
    site = work_a / "site"
    before = {f: json.loads((site / "figures" / "versions.json").read_text())["current"][f] for f in FIGURES}
    elsewhere = _cli(*common, "--no-progress", cwd=work_b, ucache=ucache)
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    swap = _cli("-q", *common, "--model", f"enc={b}", cwd=work_a, ucache=ucache)
    assert swap.returncode == 0, swap.stderr[-3000:]
    return {"tmp": tmp, "ucache": ucache, "a": work_a, "b": work_b, "first": first, "elsewhere": elsewhere,
            "swap": swap, "before": before, "models": (a, b, c)}


def test_a_build_from_another_directory_computes_nothing_new(builds):
    computed, reused = _counts(builds["first"].stdout)
    assert computed > 0 and reused == 0
    assert _counts(builds["elsewhere"].stdout) == (0, computed)
    results = builds["ucache"] / "results"  # the default: the user cache's, not ./.cache of either directory
    assert (results / "last_build.json").is_file() and (results / guard.CACHE_MARKER).is_file()
    assert not (builds["a"] / ".cache").exists() and not (builds["b"] / ".cache").exists()
    assert (builds["b"] / "site" / "index.html").is_file()


def test_swapping_one_models_source_keeps_its_name_and_both_models_figures(builds, capsys, monkeypatch):
    swap, site = builds["swap"], builds["a"] / "site"
    assert swap.stderr == ""  # -q: nothing but warnings, a model load and the computation included
    enc_tasks = [x for x in builds["first"].stderr.splitlines() if re.match(r"\s+computed enc\b", x)]
    other_tasks = [x for x in builds["first"].stderr.splitlines() if re.match(r"\s+computed other\b", x)]
    assert enc_tasks and other_tasks
    assert _counts(swap.stdout) == (len(enc_tasks), len(other_tasks))  # only the swapped model's tasks
    current = json.loads((site / "figures" / "versions.json").read_text())["current"]
    tab8 = (site / "figures" / "k21-tab8" / "data.csv").read_text()
    assert re.search(r"^enc,", tab8, re.M) and re.search(r"^other,", tab8, re.M)  # both models, same names
    assert current["k21-tab5"] == builds["before"]["k21-tab5"]  # the other model's figure: same version
    entry = json.loads((site / "history.json").read_text())["entries"][-1]
    changed = {c["id"]: c for c in entry["changed"]}
    assert set(changed) == {"k21-tab2", "k21-tab8"} and not entry["added"] and not entry["removed"]
    for c in changed.values():
        d = c["data"]
        assert d["comparable"] and d["rows_added"] == 0 and d["rows_removed"] == 0 and d["values_changed"] > 0
        what = {r["what"] for r in c["inputs"]}
        assert "models.enc.fingerprint" in what and not any("other" in w for w in what)
    page = (site / "changes.html").read_text()
    assert "models.enc.fingerprint" in page and "rows added" not in page
    old, new = changed["k21-tab2"]["old_permalink"], changed["k21-tab2"]["new_permalink"]
    from cli_here import cli_here

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(builds["ucache"]))  # in this process: its output is the point
    r = cli_here(capsys, "diff", str(site / old), str(site / new), monkeypatch=monkeypatch, cwd=builds["a"])
    assert r.returncode == 0 and "models.enc.fingerprint" in r.stdout, r.stderr
    assert re.search(r"\d+ of \d+ values changed", r.stdout) and "rows added" not in r.stdout


def test_quiet_render_check_and_reproduce_print_nothing_but_results(builds, tmp_path, monkeypatch, capsys):
    from report_builder import cli

    a, ucache = builds["a"], builds["ucache"]
    r = _cli("-q", "render", "--out", "site-again", cwd=a, ucache=ucache)
    assert r.returncode == 0 and r.stderr == "" and (a / "site-again" / "index.html").is_file(), r.stderr[-2000:]
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(ucache))
    monkeypatch.chdir(a)  # check and reproduce in this process (the same code path, without a start-up)
    assert cli.main(["-q", "check", "--model", str(builds["models"][0]), "--text", "A short test."]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "max relative reconstruction error" in out
    version = next(p for p in (a / "site" / "figures" / "k21-tab5").iterdir() if p.is_dir())
    code = cli.main(["-q", "reproduce", str(version), "--cache", str(tmp_path / "rc"), "--model",
                     f"other={builds['models'][2]}"])  # the recipe names the model's folder, not its path
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and out.strip().endswith(": identical"), err[-2000:]


def test_render_without_a_recorded_build_names_the_caches_it_knows(builds, capsys, monkeypatch):
    from cli_here import cli_here

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(builds["ucache"]))  # refused before any work: in this process
    r = cli_here(capsys, "render", "--cache", "nothing-here", monkeypatch=monkeypatch, cwd=builds["b"])
    (line,) = r.stderr.splitlines()
    assert r.returncode == 3 and line.startswith("error: no previous build recorded in nothing-here")
    assert str(builds["ucache"] / "results") in line and "--cache DIR" in line
    assert not (builds["b"] / "nothing-here").exists()


# ------------------------------------------------------------------ the smaller items, without a build


def test_an_unknown_or_mixed_model_item_is_one_line(capsys, tmp_path):
    from report_builder import cli

    for args, want in ((["--model", "MiniLM=x"], "did you mean MiniLM-L6? (configured: MiniLM-L6, SmolLM2-135M)"),
                       (["--model", "nobody=x"], "no configured model is named 'nobody' (configured: MiniLM-L6"),
                       (["--model", "MiniLM-L6=minilm", "--model", "smollm2"], "not both"),
                       (["--model", "MiniLM-L6=a", "--model", "MiniLM-L6=b"], "given twice")):
        code = cli.main(["build", "--preset", "smoke", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "s"),
                         *args])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and want in err, err
    assert not (tmp_path / "c").exists() and not (tmp_path / "s").exists()


def test_bare_model_items_that_would_share_a_name_are_one_line(capsys, tmp_path):
    """Bare --model sources are named by their folder: `run1/final` and `run2/final` (or one source given
    twice) made two models named `final`, accepted, whose tables share one name. Refused, exit 2."""
    import shutil

    from report_builder import cli
    from tests.test_pipeline import MINILM

    for run in ("run1", "run2"):
        shutil.copytree(MINILM, tmp_path / run / "final")
    for args, want in (([str(tmp_path / "run1" / "final"), str(tmp_path / "run2" / "final")],
                        f"--model: {tmp_path / 'run1' / 'final'} and {tmp_path / 'run2' / 'final'} would both be "
                        "named 'final' in the report; rename a folder, or name each model in a configuration "
                        "file (models: - {name: ..., source: ...})"),
                       (["minilm", "minilm"], "--model: minilm and minilm would both be named 'minilm'")):
        code = cli.main(["plan", "--preset", "smoke", "--cache", str(tmp_path / "c"),
                         *[a for s in args for a in ("--model", s)]])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and want in err, err


def test_a_misspelt_config_key_or_preset_gets_did_you_mean(capsys, tmp_path):
    from report_builder import cli

    cfg = tmp_path / "my.yaml"
    cfg.write_text("model:\n  - {name: m, source: minilm, role: primary_encoder}\ndatasets: [{id: wiki}]\n")
    assert cli.main(["plan", "--config", str(cfg)]) == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: config.model: unknown key; did you mean `models`?")
    assert cli.main(["build", "--preset", "smok"]) == 2  # one line, not the whole usage
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "error: --preset 'smok': no such preset; did you mean smoke? (presets: default, smoke, paper)"


def test_list_models_keeps_configured_and_embedded_apart(capsys):
    from report_builder import cli

    assert cli.main(["list", "models", "--preset", "smoke"]) == 0
    out = capsys.readouterr().out
    mine, embedded = out.split("\n\n")
    assert mine.startswith("configured models") and "MiniLM-L6" in mine and "gemma3-270m" not in mine
    assert embedded.startswith("embedded models") and "gemma3-270m" in embedded and "MiniLM-L6 " not in embedded
    assert cli.main(["list", "models", "--preset", "smoke", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["configured"] for r in rows[:2]] == ["yes", "yes"] and {r["configured"] for r in rows[2:]} == {"no"}


def test_an_earlier_projects_cache_is_said_in_one_warning(tmp_path, monkeypatch):
    from report_builder import caches
    from report_builder.config import Config

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "u"))
    monkeypatch.chdir(tmp_path)
    assert Config().cache_dir == str(tmp_path / "u" / "results") and caches.legacy_note(Config().cache_dir) is None
    (tmp_path / ".cache" / "report_builder").mkdir(parents=True)
    assert caches.legacy_note(Config().cache_dir) is None  # not the tool's: nothing to say
    (tmp_path / ".cache" / "report_builder" / guard.CACHE_MARKER).write_text("")
    note = caches.legacy_note(Config().cache_dir)
    assert "--cache .cache/report_builder" in note and str(tmp_path / "u" / "results") in note
    assert caches.legacy_note(str(tmp_path / "elsewhere")) is None  # an explicit --cache: nothing to say


def test_the_gguf_conversion_is_quiet_with_q(caplog):
    """The GGUF tensor bar is a plain tqdm of transformers: `-q`/`--no-progress` turn it off for the
    conversion, and the conversion's line goes to the log (stderr; silent with -q), not to stdout."""
    from transformers import modeling_gguf_pytorch_utils as g
    from transformers.utils import logging as tl

    from report_builder.models import convert

    was, bar = tl.is_progress_bar_enabled(), g.tqdm
    try:
        tl.disable_progress_bar()
        with convert._gguf_bar():
            assert g.tqdm is not bar and g.tqdm(range(2)).disable
        assert g.tqdm is bar
        tl.enable_progress_bar()
        with convert._gguf_bar():
            assert g.tqdm is bar
    finally:
        (tl.enable_progress_bar if was else tl.disable_progress_bar)()
    source = Path(convert.__file__).read_text()
    assert not re.search(r"(?<![\w.])print\(", source) and "log.info(for_terminal(f\"converting" in source


def test_a_caption_names_the_model_of_each_role():
    from report_builder.figures.spec import Roles
    from report_builder.site.pages import named_caption

    roles = Roles(primary_encoder="MiniLM_L6", primary_causal="Smol<2>", encoders=(), variants=(), seed_group=(),
                  datasets=("wiki",))
    got = named_caption("Primary encoder on the primary dataset; rows: the primary encoder and the primary causal "
                        "model.", roles)
    assert got.startswith("Primary encoder (MiniLM\\_L6) on the primary dataset")  # Markdown-escaped, once
    assert got.count("MiniLM") == 1 and "primary causal model (Smol&lt;2&gt;)" in got
    assert named_caption("Primary encoder.", Roles(None, None, (), (), (), ())) == "Primary encoder."


def test_a_damaged_caches_index_names_no_cache(tmp_path, monkeypatch):
    """``<user cache>/caches.json`` is read back as untrusted: one nested too deeply, a FIFO in its place or
    a time of 400 digits was an internal error (RecursionError, OverflowError: `render` naming the caches
    it knows) or a hang; now it names no cache (and the next build writes it again)."""
    from report_builder import caches

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path))
    index = tmp_path / caches.INDEX
    for text in ("[" * 100_000 + "]" * 100_000, '{"caches": {"/x": 1' + "0" * 400 + ', "/y": true}}'):
        index.write_text(text)
        assert caches._read() == {}
    index.unlink()
    os.mkfifo(index)  # a reader opening it would wait for a writer
    assert caches._read() == {}
    index.unlink()
    index.write_text('{"caches": {"/y": 5}}')
    assert caches._read() == {"/y": 5.0}


def test_the_caches_index_is_located_once_per_read(tmp_path, monkeypatch):
    """`caches._read` asked `_index()` twice, for the folder and for the file: two answers could differ (the
    environment read twice), and the file was then refused as outside its folder. Now once."""
    from report_builder import caches

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / caches.INDEX).write_text(f'{{"caches": {{"/{d}": 5}}}}')
    asked = []

    def index():  # the user cache moves between two calls
        asked.append(1)
        return tmp_path / ("a" if len(asked) == 1 else "b") / caches.INDEX

    monkeypatch.setattr(caches, "_index", index)
    assert caches._read() == {"/a": 5.0} and len(asked) == 1
