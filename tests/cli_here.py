"""`report-builder` run in the test process: `cli.main` with its returncode, stdout and stderr, as a subprocess
gives them, without an interpreter start that imports pandas, torch and transformers (0.5-3 s of CPU each, ms
here). For commands whose output is the point, not a fresh process's state (a traceback on `--debug`, what a
finished process leaves behind: those stay subprocesses)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace


def cli_here(capsys, *args: str, monkeypatch=None, cwd: Path | None = None) -> SimpleNamespace:
    """``report-builder ARGS`` through `cli.main` (from ``cwd`` when given: ``monkeypatch`` changes into it),
    as ``SimpleNamespace(returncode, stdout, stderr)``. The CPU engine's worker count, which `check` and
    `reproduce` set, is put back for the tests after."""
    from report_builder import cli, engine

    if cwd is not None:
        monkeypatch.chdir(cwd)
    workers = engine.cpu_workers()
    capsys.readouterr()
    try:
        code = cli.main(list(args))
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    finally:
        engine.set_cpu_workers(workers)
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)
