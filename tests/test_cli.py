"""CLI conventions: documented commands and options, -v/-q with the log on stderr, --json, --set,
serve --host/--port, env."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from report_builder import api, cli

ROOT = Path(__file__).resolve().parents[1]


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _subparsers(ap):
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_command_and_option_is_documented():
    ap = cli.build_parser()
    assert ap.description
    subs = _subparsers(ap)
    assert {"build", "analyze", "render", "list", "check", "env", "clean", "serve", "bench"} <= set(subs)
    for name, p in subs.items():
        assert p.description and len(p.description) > 20, name
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)
    # `analyze` writes no site: it has no --out
    assert "--out" not in _subparsers(ap)["analyze"]._option_string_actions
    assert "--out" in _subparsers(ap)["build"]._option_string_actions


def test_analyze_rejects_out(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["analyze", "--out", "x"])
    assert e.value.code == 2
    assert "unrecognized arguments: --out" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    from test_pipeline import small_config, tiny_bert_dir

    tmp = tmp_path_factory.mktemp("cli")
    model = tiny_bert_dir(tmp / "tiny", 0)
    cfg = small_config(tmp, [{"name": "tiny", "source": str(model), "role": "primary_encoder"}])
    cfg["datasets"] = cfg["datasets"][:1]
    path = tmp / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, model


def test_log_goes_to_stderr_results_to_stdout_and_verbosity(capsys, tiny_config):
    path, _ = tiny_config
    code, out, err = _run(capsys, "analyze", "--config", str(path), "--no-progress", "-v")
    assert code == 0
    assert out.startswith("analyses: ") and "computed" in out and len(out.splitlines()) == 1
    assert "computed tiny" in err and "resolved configuration:" in err  # -v: the config at debug level
    code, out, err = _run(capsys, "-q", "analyze", "--config", str(path))
    assert code == 0 and "0 computed" in out and err == ""  # -q: no log, no progress bars
    code, out, err = _run(capsys, "analyze", "--config", str(path), "--no-progress")
    assert "reused   tiny" in err and "resolved configuration" not in err


def test_set_overrides_any_key(capsys, tiny_config):
    path, _ = tiny_config
    code, out, _ = _run(capsys, "list", "models", "--config", str(path), "--set", "models.0.name=Renamed", "--json")
    assert code == 0 and json.loads(out)[0]["name"] == "Renamed"
    code, out, err = _run(capsys, "list", "models", "--config", str(path), "--set", "k24.top_kk=5")
    assert code == 3 and out == "" and err.strip() == "error: k24.top_kk: unknown key; did you mean `top_k`? (known: top_k, examples, " \
                                                       "include_special, ffamp_normalise)"
    code, _, err = _run(capsys, "list", "models", "--set", "site_url=example.org")
    assert code == 3 and "site_url: expected the published address" in err


def test_json_for_list_and_check(capsys, tiny_config):
    _, model = tiny_config
    code, out, _ = _run(capsys, "list", "figures", "--json")
    figs = json.loads(out)
    assert code == 0 and {"k21-tab2", "k24-maps"} <= {f["id"] for f in figs} and set(figs[0]) >= {"id", "title"}
    code, out, _ = _run(capsys, "list", "datasets", "--json")
    assert {r["id"] for r in json.loads(out)} >= {"wiki", "sentiment-sample"}
    code, out, err = _run(capsys, "check", "--model", str(model), "--text", "A short test.", "--json")
    res = json.loads(out)
    assert code == 0 and res["ok"] is True and res["bound"] == 1e-4
    assert res["max_rel_error"] == max(r["max_rel_error"] for r in res["rows"]) <= 1e-4
    assert {r["layer"] for r in res["rows"]} == {1, 2}  # layers count from 1 (SPEC §8)


def test_env_text_and_json(capsys, tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.bin").write_bytes(b"0" * 2048)
    code, out, _ = _run(capsys, "env", "--cache", str(tmp_path / "c"), "--json")
    info = json.loads(out)
    assert code == 0 and info["caches"]["results"]["bytes"] == 2048 and info["versions"]["torch"]
    code, out, _ = _run(capsys, "env", "--cache", str(tmp_path / "c"))
    assert "versions:" in out and "2.0 KiB in 1 files" in out and "device:" in out


def test_serve_host_and_port(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<p>hello</p>")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "report_builder", "serve", "--dir", str(tmp_path / "site"),
                          "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert "http://127.0.0.1:" in line
        url = line.split(" at ")[1].split()[0]
        for _ in range(50):
            try:
                body = urllib.request.urlopen(url + "index.html", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert body == "<p>hello</p>"
    finally:
        p.terminate()
        p.wait(10)


def test_serve_passes_host(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(api, "serve", lambda d, port, host: seen.update(d=d, port=port, host=host))
    assert cli.main(["serve", "--dir", "x", "--host", "0.0.0.0", "--port", "9001"]) == 0
    assert seen == {"d": "x", "port": 9001, "host": "0.0.0.0"}


def test_plan_lists_tasks_and_what_is_cached(capsys, tiny_config):
    path, _ = tiny_config
    code, out, _ = _run(capsys, "plan", "--config", str(path), "--json")
    before = json.loads(out)["tasks"]
    assert code == 0 and before and {"analysis", "model", "dataset", "shard", "reduces", "sequences", "cached",
                                       "key"} <= set(before[0])
    assert {r["model"] for r in before} == {"tiny"} and "k21_mixing" in {r["analysis"] for r in before}
    _run(capsys, "-q", "analyze", "--config", str(path))
    code, out, _ = _run(capsys, "build", "--plan", "--json", "--config", str(path))
    after = json.loads(out)["tasks"]
    assert [r["key"] for r in after] == [r["key"] for r in before] and all(r["cached"] for r in after)
    assert all(r["flops"] == 0 and r["seconds"] == 0 for r in after)  # a cached task costs nothing
    code, out, _ = _run(capsys, "plan", "--config", str(path), "--set", "k24.top_k=2")
    total = next(ln for ln in out.splitlines() if ln.startswith("total: "))
    assert code == 0 and total.startswith(f"total: {len(after)} tasks (") and "to compute" in total
    assert " 0 to compute" not in total  # a changed parameter invalidates the K24 entries


# ------------------------------------------------------------------ issue #23: quiet is quiet, flags that apply


@pytest.fixture(scope="module")
def masked_lm_dir(tmp_path_factory) -> Path:
    """A tiny *ForMaskedLM checkpoint: loading it as the base model makes transformers write its LOAD
    REPORT (MISSING pooler.dense.weight, UNEXPECTED cls.*), in colour."""
    import shutil

    import torch
    from transformers import BertConfig, BertForMaskedLM

    from test_pipeline import MINILM

    path = tmp_path_factory.mktemp("mlm") / "tiny-mlm"
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, max_position_embeddings=128)).save_pretrained(path)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(MINILM / f, path / f)
    return path


def _cli(*argv, cwd=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("TRANSFORMERS_VERBOSITY", None)
    return subprocess.run([sys.executable, "-m", "report_builder", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def test_quiet_silences_the_libraries_and_verbose_shows_them_without_colour(masked_lm_dir):
    """-q: nothing on stderr (no "Loading weights" bar, no LOAD REPORT); default: no LOAD REPORT; -v: the
    report, without ANSI codes since stderr is not a terminal."""
    args = ["check", "--model", str(masked_lm_dir), "--text", "A short test."]
    quiet, default, verbose = _cli("-q", *args), _cli(*args), _cli("-v", *args)
    assert quiet.returncode == default.returncode == verbose.returncode == 0, verbose.stderr
    assert quiet.stderr == "" and "max relative reconstruction error" in quiet.stdout
    assert "LOAD REPORT" not in default.stderr and "Loading weights" in default.stderr
    assert "LOAD REPORT" in verbose.stderr and "pooler.dense.weight" in verbose.stderr
    assert "\x1b[" not in verbose.stderr + default.stderr + quiet.stderr


@pytest.mark.parametrize("argv, message", [
    (["build", "--json"], "--json applies to `build --plan` only"),
    (["build", "--gpu", "H100"], "--gpu applies to `build --plan` only"),
    (["build", "--gpus", "2"], "--gpus applies to `build --plan` only"),
    (["build", "--plan", "--no-progress"], "apply to a build, not to --plan"),
    (["build", "--plan", "--executor", "ray"], "apply to a build, not to --plan"),
    (["build", "--plan", "--executor", "local"], "apply to a build, not to --plan"),  # the default, given
    (["-v", "env", "-q"], "-v and -q contradict each other"),
    (["bench", "--shape", "tiny", "--model", "minilm"], "--shape and --model exclude each other"),
    (["bench", "--k24-pass", "2", "--repeats", "2"], "--repeats applies to the side-by-side benchmark"),
    (["list", "models", "--data-dir", "d"], "--data-dir applies to `list datasets` only"),
    (["render", "--data-dir", "d"], "unrecognized arguments: --data-dir"),
    (["list", "datasets", "--cache", "c"], "unrecognized arguments: --cache"),
    (["list", "figures", "--out", "o"], "unrecognized arguments: --out"),
    (["env", "--data-dir", "d"], "unrecognized arguments: --data-dir"),
    (["clean", "--data-dir", "d"], "unrecognized arguments: --data-dir"),
    (["list", "figures", "\x1b]0;title\x07\x1b[31m"], "unrecognized arguments: \\x1b]0;title\\x07\\x1b[31m"),
])
def test_an_option_that_does_not_apply_is_refused(argv, message, capsys, monkeypatch):
    """Refused with a usage error (exit 2), never silently ignored; nothing runs."""
    monkeypatch.setattr(api, "build", lambda *a, **k: pytest.fail("a build ran"))
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "\x1b" not in err  # an argument echoed escaped (for_terminal)


def test_list_datasets_and_figures_of_a_configuration(capsys, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("The first note.\nA second, longer note about nothing.\nThird.\n")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"preset": "smoke", "figures": ["k21-tab1", "k24-maps"], "datasets": [
        {"id": "notes", "path": str(notes), "n": 2}, {"id": "wiki", "n": 3}]}))
    code, out, _ = _run(capsys, "list", "datasets", "--config", str(cfg), "--json")
    rows = json.loads(out)
    assert code == 0 and [(r["id"], r["size"], r["configured"]) for r in rows[:2]] == [("notes", 2, "yes"),
                                                                                       ("wiki", 3, "yes")]
    assert {r["id"] for r in rows[2:]} >= {"sentiment-sample"} and {r["configured"] for r in rows[2:]} == {"no"}
    code, out, _ = _run(capsys, "list", "datasets", "--json")
    assert "notes" not in {r["id"] for r in json.loads(out)} and "configured" not in json.loads(out)[0]
    code, out, _ = _run(capsys, "list", "figures", "--config", str(cfg), "--json")
    assert [r["id"] for r in json.loads(out)] == ["k21-tab1", "k24-maps"]
