"""Validated configuration and one clear `error:` line per expected failure, with documented exit codes
(2 usage, 3 config/data/output, 4 model, 5 reconstruction, 130 interrupted, 143 terminated)."""
from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from report_builder import api, cli
from report_builder.config import ConfigError, from_dict, parse_size, replace
from report_builder.errors import EXIT_CODES
from report_builder.housekeeping import check_ids
from cli_here import cli_here

ROOT = Path(__file__).resolve().parents[1]
SMOKE = {"preset": "smoke"}


def _cli(*args, cwd=None, timeout=600):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def _here(capsys, *args) -> SimpleNamespace:
    """`_cli` in this process (`cli_here`), for commands refused before any work (`check` on a broken model folder:
    3 s of CPU each as a process; a config or path refused: 1-2 s). A YAML bomb, a huge file, an offline hub
    probe stay subprocesses (a timeout, the hub's settings read at import)."""
    return cli_here(capsys, *args)


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


# ------------------------------------------------------------------ point 5: validated configuration


@pytest.mark.parametrize("override, key, allowed", [
    ({"device": "cdua"}, "device", "cpu, cuda"),
    ({"dtype": "float8"}, "dtype", "float32, bfloat16, float16"),
    ({"k21": {"mask_rate": 2.0}}, "k21.mask_rate", "between 0 and 1"),
    ({"k21": {"mask_rate": 0}}, "k21.mask_rate", "between 0 and 1"),
    ({"ig": {"steps": -1}}, "ig.steps", ">= 1"),
    ({"ig": {"method": "trapezoid"}}, "ig.method", "closed, numerical"),
    ({"batch_size": 0}, "batch_size", ">= 1"),
    ({"threads": 0}, "threads", ">= 1"),
    ({"k24": {"top_k": 0}}, "k24.top_k", ">= 1"),
    ({"max_memory": "2G"}, "max_memory", "GiB"),
    ({"max_memory": "lots"}, "max_memory", "KiB, MiB, GiB"),
    ({"max_memory": "-1GB"}, "max_memory", "GiB"),
    ({"datasets": [{"id": "wikipedia", "n": 2}]}, "datasets[0].id", "wiki, sentiment-sample"),
    ({"datasets": [{"id": "wiki", "n": 0}]}, "datasets[0].n", "at least 1"),
    ({"datasets": [{"id": "wiki", "max_length": 1}]}, "datasets[0].max_length", ">= 4"),
    ({"figures": ["k21-tab1", "k99-fig1"]}, "figures[1]", "list figures"),
])
def test_every_value_is_checked_with_key_and_allowed_values(override, key, allowed):
    """`config.validate` checks every value; dataset and figure ids against their registries, which
    sit above the configuration, are checked by the front before any work (`housekeeping.check_ids`)."""
    with pytest.raises(ConfigError) as exc:
        check_ids(from_dict({**SMOKE, **override}))
    msg = str(exc.value)
    assert msg.startswith(f"{key}:") and allowed in msg, msg


@pytest.mark.parametrize("override, message", [
    ("datasets.0.id=wikipedia", "error: datasets[0].id: 'wikipedia' is not a built-in dataset (wiki, "),
    ("figures=[k21-tab1, k99-fig1]", "error: figures[1]: unknown figure id 'k99-fig1'; `report-builder list figures`"),
])
def test_unknown_ids_fail_in_the_front_before_any_work(override, message, tmp_path, capsys, monkeypatch):
    """The command line (and `api.configure`/`with_overrides`, `analyze`, `render`, `build`, `plan`)
    refuses an unknown dataset or figure id with one line and exit code 3, as a bad YAML value."""
    monkeypatch.setattr(api, "analyze", lambda *a, **k: pytest.fail("an analysis ran"))
    code = cli.main(["build", "--preset", "smoke", "--set", override, "--cache", str(tmp_path / "c"),
                     "--out", str(tmp_path / "site"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_CODES["config"] == 3 and _one_error_line(err).startswith(message), err
    cfg = from_dict({**SMOKE, "cache_dir": str(tmp_path / "c"), "out_dir": str(tmp_path / "site")})
    bad = from_dict({**SMOKE, "datasets": [{"id": "wikipedia", "n": 2}], "out_dir": str(tmp_path / "site")})
    for call in (lambda: api.render(bad, {}, {}), lambda: api.plan(bad), lambda: api.build(bad, progress=False)):
        with pytest.raises(ConfigError, match="not a built-in dataset"):
            call()
    assert check_ids(cfg) is cfg


def test_cli_options_are_validated_like_yaml_keys(tmp_path, capsys, monkeypatch):
    cfg = from_dict(SMOKE)
    with pytest.raises(ConfigError, match="device: 'cdua' is not one of"):
        replace(cfg, device="cdua")
    r = _here(capsys, "analyze", "--preset", "smoke", "--device", "cdua", "--cache", str(tmp_path / "c"))
    assert r.returncode == EXIT_CODES["config"] == 3
    assert "device: 'cdua'" in _one_error_line(r.stderr)
    for flag, key in (("--out", "out_dir"), ("--cache", "cache_dir")):  # `--out ""` quietly built ./site
        r = cli_here(capsys, "build", "--preset", "smoke", flag, "", "--cache" if flag == "--out" else "--out",
                     str(tmp_path / ("c" if flag == "--out" else "s")), monkeypatch=monkeypatch, cwd=tmp_path)
        assert r.returncode == EXIT_CODES["config"] and _one_error_line(r.stderr) == f"error: {key}: expected a path, got ''"
    assert not (tmp_path / "site").exists()


def test_one_size_parser_gb_is_decimal_gib_is_binary():
    from report_builder.bench.memory import parse_bytes

    assert parse_size("2GB") == 2 * 10**9 and parse_size("2GiB") == 2 * 2**30
    assert parse_size("512MiB") == 512 * 2**20 and parse_size("1.5 gb") == 1_500_000_000
    assert parse_size(4096) == 4096 and parse_size("4096") == 4096
    for v in ("2GB", "2GiB", "512MiB", "1.5GB", "10kB", "3TiB"):
        assert parse_bytes(v) == parse_size(v)  # `bench --max-memory` reads sizes the same way
    assert from_dict({**SMOKE, "max_memory": "2GB"}).budget_bytes() == 2 * 10**9


def test_figures_key_builds_only_the_listed_ids(tmp_path, monkeypatch):
    import report_builder.site.build as build_mod

    seen = {}

    def fake_render_site(tables, roles, prov, **kw):
        seen["ids"] = None if kw["figures"] is None else [f.id for f in kw["figures"]]

    monkeypatch.setattr(build_mod, "render_site", fake_render_site)
    cfg = from_dict({**SMOKE, "figures": ["k24-maps", "k21-tab4"], "out_dir": str(tmp_path / "site"),
                     "cache_dir": str(tmp_path / "cache")})
    api.render(cfg, {}, {}, log=lambda *_: None)
    assert seen["ids"] == ["k21-tab4", "k24-maps"]  # registry (paper) order
    api.render(from_dict({**SMOKE, "out_dir": str(tmp_path / "site")}), {}, {}, log=lambda *_: None)
    assert seen["ids"] is None  # `all` (the default): render_site builds every registered figure


# ------------------------------------------------------------------ point 6: one line, distinct exit codes


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tests.test_pipeline import tiny_bert_dir

    return tiny_bert_dir(tmp_path_factory.mktemp("m") / "tiny", 0)


def _copy_model(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_truncated_and_missing_weights_are_model_errors(tmp_path, tiny_dir, capsys):
    bad = _copy_model(tiny_dir, tmp_path / "truncated")
    w = bad / "model.safetensors"
    w.write_bytes(w.read_bytes()[:5000])
    r = _here(capsys, "check", "--model", str(bad))
    assert r.returncode == EXIT_CODES["model"] == 4, r.stderr
    line = _one_error_line(r.stderr)
    assert "truncated or damaged" in line and "truncated" in line
    none = _copy_model(tiny_dir, tmp_path / "noweights")
    (none / "model.safetensors").unlink()
    r = _here(capsys, "check", "--model", str(none))
    assert r.returncode == 4 and "no weights" in _one_error_line(r.stderr)
    r = _cli("--debug", "check", "--model", str(none))  # --debug: the traceback is shown
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_a_model_folder_without_its_tokenizer_is_a_model_error(tmp_path, tiny_dir, capsys):
    """`model.save_pretrained(dir)` without `tokenizer.save_pretrained(dir)`: transformers builds a tokenizer
    of the special tokens alone, every word became [UNK] and `check` (and a build) went on, exit 0."""
    bare = _copy_model(tiny_dir, tmp_path / "no-tokenizer")
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (bare / f).unlink()
    r = _here(capsys, "check", "--model", str(bare))
    assert r.returncode == EXIT_CODES["model"] == 4, r.stdout + r.stderr
    line = _one_error_line(r.stderr)
    assert "tokenizer" in line and "30522" in line and "save_pretrained" in line, line


def test_a_check_text_longer_than_the_positions_is_a_usage_line(tiny_dir, capsys):
    """`check --text` over the model's positions was exit 4 (a model error) advising "the dataset's
    max_length in the config", which `check` has neither of; now a usage line naming --text, exit 2."""
    r = _here(capsys, "check", "--model", str(tiny_dir), "--text", "word " * 200)
    line = _one_error_line(r.stderr)
    assert r.returncode == EXIT_CODES["usage"] == 2, r.stderr
    assert line == f"error: --text: text 1 has 202 tokens, more than {tiny_dir}'s 128 positions; give a shorter text", line


def test_non_utf8_config_is_a_config_error(tmp_path, capsys):
    p = tmp_path / "latin1.yaml"
    p.write_bytes("preset: smoke\n# réglages\n".encode("latin-1"))
    r = _here(capsys, "analyze", "--config", str(p))
    assert r.returncode == 3 and "not UTF-8" in _one_error_line(r.stderr)


def test_unwritable_output_or_cache_is_reported_before_any_work(tmp_path, capsys):
    # /proc refuses new entries even for root (a chmod would not stop root)
    r = _here(capsys, "build", "--preset", "smoke", "--out", "/proc/rb-no/site", "--cache", str(tmp_path / "c"))
    assert r.returncode == 3 and "not writable" in _one_error_line(r.stderr), r.stderr
    assert "--out" in r.stderr and "computed" not in r.stdout + r.stderr
    r = _here(capsys, "build", "--preset", "smoke", "--cache", "/proc/rb-no/cache", "--out", str(tmp_path / "site"))
    assert r.returncode == 3 and "--cache" in _one_error_line(r.stderr), r.stderr


def test_disk_full_is_one_line_and_leaves_no_partial_entry(tmp_path, tiny_dir, monkeypatch, capsys):
    cfg = {"models": [{"name": "tiny", "source": str(tiny_dir), "role": "primary_encoder"}],
           "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 32}],
           "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    real = pd.DataFrame.to_parquet

    def full(self, path, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    rc = cli.main(["analyze", "--config", str(p), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 3 and "disk is full" in _one_error_line(err)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", real)
    from report_builder.cache import Cache

    assert Cache(tmp_path / "cache").stale_temp() == []


def test_serve_on_a_busy_port_is_a_usage_error(tmp_path, capsys):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>hi</p>")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        rc = cli.main(["serve", "--dir", str(site), "--port", str(s.getsockname()[1])])
    finally:
        s.close()
    assert rc == EXIT_CODES["usage"] == 2
    assert "already in use" in _one_error_line(capsys.readouterr().err)


def test_exit_codes_are_documented():
    readme = "".join((ROOT / "docs" / "guide" / p).read_text() for p in ("configuration.md", "safety.md"))
    for name, code in EXIT_CODES.items():
        assert f"| {code} |" in readme, (name, code)
    assert "GiB" in readme and "10⁹" in readme and ".report_builder-site" in readme


# ------------------------------------------------------------------ issue #23: errors that help

TYPO_PROBE = """
import socket, sys
def no_network(*a, **k):
    raise AssertionError("a network connection was attempted")
socket.create_connection = no_network
from report_builder.cli import main
code = main(sys.argv[1:])
heavy = {"torch", "transformers"} & set(sys.modules)
assert not heavy, f"imported before refusing: {heavy}"
raise SystemExit(code)
"""


@pytest.mark.parametrize("name, guess", [("minilmm", "minilm"), ("MiniLM", "minilm"), ("smollm", "smollm2"),
                                         ("gemma3", "gemma3-270m")])
def test_a_typo_of_an_embedded_name_is_refused_before_any_hub_probe(name, guess, tmp_path):
    """`--model minilmm`: exit 4, "did you mean minilm?", with no network connection and no torch or
    transformers import (what made it take ~6 s), and with the hub not offline."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp_path / "hub")}
    r = subprocess.run([sys.executable, "-c", TYPO_PROBE, "build", "--model", name, "--cache", str(tmp_path / "c"),
                        "--out", str(tmp_path / "s")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == EXIT_CODES["model"] == 4, r.stderr
    assert f"unknown model {name!r}: did you mean {guess}?" in _one_error_line(r.stderr)
    assert not (tmp_path / "c").exists()


def test_names_that_are_no_typo_get_no_suggestion(tmp_path):
    from report_builder.models.sources import near_miss

    assert [near_miss(s) for s in ("minilm", "org/minilmm", "gpt2", "bert-base-uncased", str(tmp_path))] == [None] * 5
    r = _cli("build", "--model", "someone/minilmm", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "s"))
    assert r.returncode == 4 and "did you mean" not in r.stderr and "HF_HUB_OFFLINE=1" in _one_error_line(r.stderr)


@pytest.mark.parametrize("text, where", [
    ("models:\n  - {name: a, source: minilm\ndatasets: []\n", ":3:9: not valid YAML: expected ',' or '}'"),
    ("models:\n  - name: a\n   source: x\n", ":3:4: not valid YAML: expected <block end>"),
    ("preset: smoke\nk24:\n\ttop_k: 3\n", ":3:1: not valid YAML: found character '\\t'"),
    ("preset: smoke\n---\npreset: default\n", ":2:1: not valid YAML: expected a single document in the stream, "
                                              "but found another document"),
    ("preset: smoke\nsite_url: \"https://x/\x1b[31m\"\n", ":2:22: not valid YAML: character #x001b is not allowed"),
])
def test_a_yaml_syntax_error_names_file_line_and_column_in_one_line(text, where, tmp_path, capsys):
    p = tmp_path / "my config.yaml"
    p.write_text(text)
    r = _here(capsys, "list", "models", "--config", str(p))
    line = _one_error_line(r.stderr)
    assert r.returncode == 3 and line.startswith(f"error: {p}{where}"), line
    assert "<unicode string>" not in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_yaml_key_given_twice_is_refused(tmp_path, capsys):
    """YAML has no duplicate keys; PyYAML kept the last silently, so a second `k24:` added at the end of a
    long file dropped the first one's settings without a word. Now one line naming both places, exit 3."""
    p = tmp_path / "twice.yaml"
    p.write_text("preset: smoke\nk24: {top_k: 5}\ndatasets:\n  - {id: wiki, n: 3}\nk24: {top_k: 7}\n")
    r = _here(capsys, "list", "models", "--config", str(p))
    line = _one_error_line(r.stderr)
    assert r.returncode == 3 and line == f"error: {p}:5:1: key 'k24' is given twice (first on line 2); keep one", line
    p.write_text("preset: smoke\ndatasets:\n  - {id: wiki, n: 3, n: 4}\n")
    line = _one_error_line(_here(capsys, "list", "models", "--config", str(p)).stderr)
    assert line == f"error: {p}:3:22: key 'n' is given twice (first on line 3); keep one", line
    ok = tmp_path / "merge.yaml"  # a merge key (<<) and the same key in two mappings stay fine
    ok.write_text("preset: smoke\nbase: &b {n: 2, max_length: 40}\n"
                  "datasets: [{<<: *b, id: wiki}, {<<: *b, id: sentiment-sample, n: 3}]\n")
    from report_builder.yamlsafe import load_yaml

    assert load_yaml(ok.read_text(), "merge.yaml")["datasets"][1] == {"n": 3, "max_length": 40, "id": "sentiment-sample"}


def test_a_config_file_is_read_bounded(tmp_path):
    """``--config /dev/zero`` read until the memory ran out (the process was killed); a file over 16 MiB is
    no configuration: one line, exit 3, after reading 16 MiB (a sparse 17 MiB file stands for the device)."""
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(17 << 20)
    r = _cli("list", "models", "--config", str(big), timeout=120)
    assert r.returncode == 3 and "more than 16 MiB, not a configuration file" in _one_error_line(r.stderr)


def _bomb(levels: int, width: int = 10) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for k in range(1, levels):
        lines.append(f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]")
    return "\n".join(lines) + f"\nmodels: *a{levels - 1}\n"


def test_a_yaml_alias_bomb_is_refused_unexpanded(tmp_path):
    """A few hundred bytes whose aliases expand to billions of values: refused before expansion, exit 3, a
    short line (it produced a 351 MB error line and 1.5 GB of memory); a few aliases stay fine."""
    p = tmp_path / "bomb.yaml"
    p.write_text(_bomb(9))
    assert p.stat().st_size < 600
    r = _cli("list", "models", "--config", str(p), timeout=120)
    line = _one_error_line(r.stderr)
    assert r.returncode == 3 and "YAML aliases expand to" in line and "alias bomb" in line and len(line) < 300
    flow = "{" + ", ".join(_bomb(8).strip().splitlines()) + "}"  # the same bomb as one --set value
    r = _cli("list", "models", "--preset", "smoke", "--set", "k24.examples=" + flow, timeout=120)
    assert r.returncode == 3 and "YAML aliases expand to" in _one_error_line(r.stderr)
    (tmp_path / "rec.yaml").write_text("a: &a [1, *a]\n")
    r = _cli("list", "models", "--config", str(tmp_path / "rec.yaml"))
    assert r.returncode == 3 and "recursive alias" in _one_error_line(r.stderr)
    ok = tmp_path / "ok.yaml"  # aliases used as meant: a shared entry
    ok.write_text("preset: smoke\nmodels: [{name: M, source: minilm, role: primary_encoder}]\n"
                  "datasets: [{id: wiki, n: 2, max_length: &len 40}, {id: sentiment-sample, n: 2, max_length: *len}]\n")
    r = _cli("list", "datasets", "--config", str(ok), "--json")
    assert r.returncode == 0 and [x["size"] for x in json.loads(r.stdout)[:2]] == [2, 2], r.stderr


BLOCK_TORCH = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in ("torch", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from report_builder.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("args", [["check", "--model", "minilm"], ["-q", "analyze", "--preset", "smoke"]])
def test_a_missing_extra_names_the_extra_to_install(args, tmp_path):
    """Without torch, `check` and `analyze` say which extra to install (they said "internal error" and
    suggested a model wheel); one mechanism (`extras`), exit 3."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *args, *(["--cache", str(tmp_path / "c")]
                                                                  if "analyze" in args else [])],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    line = _one_error_line(r.stderr)
    assert r.returncode == 3 and "needs torch (the [compute] extra), which is not installed" in line, r.stderr
    assert "pip install -e '.[compute]'" in line and "internal error" not in line and "gt-all" not in line


def test_internal_error_is_kept_for_real_bugs():
    from report_builder.errors import MissingDependency

    msg, code = cli._describe(ModuleNotFoundError("No module named 'report_builder.nope'", name="report_builder.nope"))
    assert code == 1 and msg.startswith("internal error: ModuleNotFoundError")
    msg, code = cli._describe(RuntimeError("x"), "build")
    assert code == 1 and msg.startswith("internal error")
    try:  # a missing optional module deep inside another error is still named by its extra
        try:
            raise ModuleNotFoundError("No module named 'ray'", name="ray")
        except ImportError as inner:
            raise RuntimeError("could not start") from inner
    except RuntimeError as e:
        msg, code = cli._describe(e, "build")
    assert code == 3 and "[distributed] extra" in msg
    assert isinstance(__import__("report_builder.extras").extras.from_import_error(
        ModuleNotFoundError(name="altair")), MissingDependency)


def test_a_device_this_machine_cannot_run_is_one_usage_line(tmp_path, monkeypatch, capsys):
    """``--device cuda`` (or ``device: cuda`` in a config from a GPU machine) where torch has no CUDA, a device
    that is no device, or an index past the GPUs: one line, exit 2, before a model is built (they were
    "internal error" lines from inside torch)."""
    import torch

    from report_builder.models.device_plan import require_device

    cases = [(["check", "--model", "minilm", "--device", "tpu"], "device 'tpu' is not one of cpu, cuda, cuda:<index>"),
             (["bench", "--shape", "tiny", "--device", "vulkan"], "device 'vulkan' is not one of")]
    if not torch.cuda.is_available():
        cfg = tmp_path / "gpu.yaml"
        cfg.write_text("device: cuda\n")
        cases += [(["check", "--model", "minilm", "--device", "cuda"], "device cuda: "),
                  (["bench", "--shape", "tiny", "--device", "cuda:0"], "device cuda:0: "),
                  (["build", "--preset", "smoke", "--config", str(cfg), "--out", str(tmp_path / "site"),
                    "--cache", str(tmp_path / "cache"), "-q"], "device cuda: ")]
    for argv, want in cases:
        assert cli.main(argv) == EXIT_CODES["usage"], argv
        line = _one_error_line(capsys.readouterr().err)
        assert line.startswith(f"error: {want}") and "internal error" not in line, (argv, line)
    assert not (tmp_path / "site").exists()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    require_device("cuda:0")
    with pytest.raises(Exception, match=r"^device cuda:1: this machine has 1 visible CUDA device\(s\)"):
        require_device("cuda:1")


@pytest.mark.parametrize("flag", ["--seq-len", "--batch", "--repeats", "--threads", "--k24-pass", "--k21-pass"])
def test_bench_counts_below_one_are_refused(flag, capsys):
    # `--k24-pass 0` ran the side-by-side bench instead, `--k21-pass -1` printed negative rates, `--seq-len 0`
    # and `--batch 0` were internal errors from inside torch
    for value in ("0", "-2"):
        assert cli.main(["bench", "--shape", "tiny", flag, value]) == EXIT_CODES["usage"]
        assert _one_error_line(capsys.readouterr().err) == f"error: {flag}: expected a positive number, got {value}"


def test_a_misspelt_preset_given_as_a_config_names_the_preset(tmp_path, monkeypatch):
    # `rb.build("smok")` said only "config file smok does not exist"
    from report_builder.config import load_config

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^config file smok does not exist; did you mean the preset 'smoke'\?$"):
        load_config("smok")
    for name in ("smoke.yaml", "conf/smok", "nothing-like-it"):  # a file's name: no preset guessed
        with pytest.raises(ConfigError, match=r"does not exist$"):
            load_config(name)


def test_a_primary_role_given_twice_is_refused():
    # the second `primary_encoder` was quietly not primary: K21 Table 2 / Fig. 3 showed the first alone
    two = {"models": [{"name": "a", "source": "minilm", "role": "primary_encoder"},
                      {"name": "b", "source": "minilm", "role": "primary_encoder"}], "datasets": [{"id": "wiki"}]}
    with pytest.raises(ConfigError, match=r"^models: 'a', 'b' all have role primary_encoder; a report has one "
                                          r"\(give the others role variant\)$"):
        from_dict(two)
    two["models"][1]["role"] = "variant"
    assert [m.role for m in from_dict(two).models] == ["primary_encoder", "variant"]
