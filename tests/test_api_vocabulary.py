"""The Python API speaks its own language: an error raised through ``rb.build``/``rb.render``/``api.*`` names
the keyword argument the caller passed (``out_dir``, ``cache_dir``, ``max_memory``, ...), never a command-line
flag a notebook user never typed; the same error through the CLI keeps naming the flag, byte for byte.
Every case is a refusal before any work (no model is loaded, no build runs)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import report_builder as rb
from report_builder import api, cli, errors
from report_builder.errors import ReportBuilderError

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def _refused(call, kind: type[BaseException] = ReportBuilderError) -> str:
    with pytest.raises(kind) as e:
        call()
    return str(e.value)


def _speaks_python(msg: str, *keywords: str) -> None:
    assert not FLAG.search(msg), msg
    for k in keywords:
        assert k in msg, (k, msg)


def test_an_output_that_is_a_file_names_out_dir(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    msg = _refused(lambda: rb.build("smoke", out_dir=str(tmp_path / "notes.txt"), cache_dir=str(tmp_path / "c"),
                                    log=None))
    _speaks_python(msg, "out_dir")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_cache_inside_the_output_names_both_keywords(tmp_path):
    msg = _refused(lambda: rb.build("smoke", out_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "s" / "c"),
                                    log=None))
    _speaks_python(msg, f"cache_dir={tmp_path / 's' / 'c'}", f"out_dir={tmp_path / 's'}")
    msg = _refused(lambda: rb.build("smoke", out_dir=str(tmp_path / "x"), cache_dir=str(tmp_path / "x"), log=None))
    _speaks_python(msg, "cache_dir=", "out_dir=")


def test_a_busy_cache_names_cache_dir(tmp_path, monkeypatch):
    """Another command (here: a second open of the lock file, as another process holds it) has the cache."""
    import fcntl
    import os

    from report_builder import guard

    monkeypatch.setenv("REPORT_BUILDER_LOCK_WAIT", "0")
    cache = tmp_path / "c"
    guard.mark_cache(cache)
    fd = os.open(cache / guard.CACHE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        msg = _refused(lambda: rb.build("smoke", out_dir=str(tmp_path / "s"), cache_dir=str(cache), log=None))
    finally:
        os.close(fd)
    assert "in use by" in msg, msg
    _speaks_python(msg, "cache_dir")


def test_a_foreign_cache_folder_names_cache_dir(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "thesis.tex").write_text("mine")
    msg = _refused(lambda: rb.build("smoke", out_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"), log=None))
    _speaks_python(msg, "cache_dir")


def test_render_without_a_build_names_cache_dir(tmp_path):
    msg = _refused(lambda: rb.render(cache_dir=str(tmp_path / "empty"), out_dir=str(tmp_path / "s"), log=None),
                   Exception)
    _speaks_python(msg, "cache_dir=")


def test_a_bad_max_memory_and_dtype_of_bench_name_the_keywords():
    _speaks_python(_refused(lambda: api.bench(shape="tiny", max_memory="2G")), "max_memory")
    _speaks_python(_refused(lambda: api.bench(shape="tiny", dtype="fp8")), "dtype")
    _speaks_python(_refused(lambda: api.bench(shape="tiny", chunk_rule="tpu")), "chunk_rule")
    _speaks_python(_refused(lambda: api.bench(shape="tiny", layers=0)), "layers")


def test_a_bad_port_and_site_dir_name_the_keywords(tmp_path):
    _speaks_python(_refused(lambda: api.serve(tmp_path, port=70000)), "port=70000")
    _speaks_python(_refused(lambda: api.serve("a\x00b", port=0)), "site_dir")


def test_a_bad_age_to_clean_names_versions_older_than(tmp_path):
    cfg = api.configure(preset="smoke", out_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"))
    _speaks_python(_refused(lambda: api.clean(cfg, versions_older_than="soon")), "versions_older_than")


def test_a_config_file_path_that_cannot_be_one_names_config():
    _speaks_python(_refused(lambda: rb.build("a\x00b.yaml", log=None)), "config")


def test_a_bad_gpu_to_plan_names_gpu(tmp_path):
    cfg = api.configure(preset="smoke", out_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c"))
    _speaks_python(_refused(lambda: api.plan(cfg, gpu="X9000")), "gpu", "gpu_flops=TFLOPS")
    _speaks_python(_refused(lambda: api.plan(cfg, gpus=0)), "gpus")


def test_the_cli_keeps_its_flags(tmp_path, capsys):
    """The same refusals through `report-builder` name the flags, as they always did."""
    (tmp_path / "notes.txt").write_text("mine")
    code = cli.main(["build", "--preset", "smoke", "--no-progress", "--out", str(tmp_path / "notes.txt"),
                     "--cache", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 3
    assert err.rstrip().endswith(f"refusing to replace the output directory {tmp_path / 'notes.txt'}: it is a file, "
                                 "not a directory; choose a new or empty directory with --out"), err
    code = cli.main(["build", "--preset", "smoke", "--no-progress", "--out", str(tmp_path / "s"),
                     "--cache", str(tmp_path / "s" / "c")])
    err = capsys.readouterr().err
    assert code == 3
    assert err.rstrip().endswith(f"--cache {tmp_path / 's' / 'c'} is inside --out {tmp_path / 's'}: the site swap "
                                 "would delete it; choose a cache outside the output"), err
    code = cli.main(["serve", "--port", "70000"])
    assert code == 2 and "--port 70000 is not a port number" in capsys.readouterr().err
    assert not errors.speaking_cli(), "the CLI's vocabulary ends with its command"


def test_executor_and_model_items_name_the_keywords():
    _speaks_python(_refused(lambda: api.executor("local", address="auto")), "address", "executor=ray")
    msg = _refused(lambda: api.configure(preset="smoke", models=["Nope=minilm"]))
    _speaks_python(msg, "models")


def test_every_option_of_the_vocabulary_is_the_clis():
    """`errors.OPTIONS` is the one declaration: each option it names exists on some `report-builder` command."""
    import argparse

    ap = cli.build_parser()
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)).choices
    flags = {f for p in subs.values() for f in p._option_string_actions}
    assert set(errors.OPTIONS.values()) <= flags, set(errors.OPTIONS.values()) - flags
    with pytest.raises(KeyError):
        errors.option("out")  # a keyword the vocabulary does not declare is a bug, not a message


def test_where_a_local_dataset_goes_names_data_dir():
    """A hub set not on this machine (`data.hub`) says where a local copy goes: ``data_dir=DIR`` from Python."""
    from report_builder.data.layout import data_dir_hint

    _speaks_python(data_dir_hint("sst2"), "data_dir=DIR with DIR/SST-2/dev.tsv")
    with errors.cli_vocabulary():
        assert data_dir_hint("sst2") == "--data-dir DIR (config key data_dir) with DIR/SST-2/dev.tsv"


def test_nothing_built_is_one_line_in_a_notebook(tmp_path):
    """``rb.render`` on a cache with no recorded build, ``rb.load_results`` on a folder holding neither a build nor a
    site, and ``api.serve`` on a folder with no site raised a bare ``FileNotFoundError``: a notebook drew the
    package's frames. Each is now the package's one-line error (still a ``FileNotFoundError`` for callers that
    catch it), naming the keyword, and the CLI's line and exit code are as before."""
    from report_builder.site.serve import make_server

    calls = {
        "render": lambda: rb.render("smoke", out_dir=str(tmp_path / "s"), cache_dir=str(tmp_path / "c")),
        "load_results": lambda: rb.load_results(tmp_path / "empty"),
        "serve": lambda: make_server(tmp_path / "nosite"),
    }
    (tmp_path / "empty").mkdir()
    for name, call in calls.items():
        with pytest.raises(ReportBuilderError) as e:
            call()
        assert isinstance(e.value, FileNotFoundError), name
        lines = e.value._render_traceback_()
        assert len(lines) == 1 and lines[0].startswith("NotBuilt: "), (name, lines)
        _speaks_python(str(e.value))
