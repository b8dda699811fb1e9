"""Executors are chosen by name from one registry; each adds its own command-line options (no Ray needed)."""
from __future__ import annotations

import argparse

import pytest

from report_builder import api, cli, executors
from report_builder.errors import UsageError
from report_builder.executors.local import LocalExecutor


def _subparser(name: str) -> argparse.ArgumentParser:
    ap = cli.build_parser()
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def test_the_registry_names_every_executor_module():
    reg = executors.executors()
    assert list(reg) == ["local", "ray"] == list(executors.MODULES)
    assert reg["local"] is LocalExecutor and executors.DEFAULT == "local"
    for name, cls in reg.items():
        assert cls.name == name and cls.summary and all(o.flag.startswith("--") and o.help for o in cls.options)


@pytest.mark.parametrize("command", ["build", "analyze"])
def test_the_cli_takes_executor_choices_and_options_from_the_registry(command):
    p = _subparser(command)
    executor = p._option_string_actions["--executor"]
    # not given: None (so `build --plan --executor local` is refused too); the CLI then runs the default one
    assert executor.choices == list(executors.executors()) and executor.default is None
    assert executors.DEFAULT == "local" and "local: this process (default)" in executor.help
    for cls in executors.executors().values():
        for o in cls.options:
            assert p._option_string_actions[o.flag].dest == o.dest
    args = p.parse_args(["--executor", "ray", "--address", "auto"])
    assert executors.options_of(args) == {"address": "auto", "num_cpus": None}


def test_an_option_of_another_executor_is_refused_with_the_same_lines():
    """The same line from the API and the CLI, each in its own words: keywords there, options here."""
    from report_builder.errors import cli_vocabulary

    with pytest.raises(UsageError, match=r"^address and num_cpus need executor=ray$"):
        api.executor("local", address="auto")
    with cli_vocabulary(), pytest.raises(UsageError, match=r"^--address and --ray-num-cpus need --executor ray$"):
        executors.create("local", num_cpus=2)
    with pytest.raises(UsageError, match=r"^unknown executor 'dask'; choose local or ray$"):
        api.executor("dask")
    with pytest.raises(UsageError, match=r"^num_cpus sizes a Ray started here; a cluster joined with "
                                         r"address has its own$"):
        api.executor("ray", address="auto", num_cpus=2)
    with cli_vocabulary(), pytest.raises(UsageError, match=r"^--ray-num-cpus sizes a Ray started here; a cluster "
                                                           r"joined with --address has its own$"):
        api.executor("ray", address="auto", num_cpus=2)
    assert api.executor("local", address=None, num_cpus=None) is None  # the default: `analyze` makes it


def test_cli_local_with_ray_options_is_one_usage_line(capsys, tmp_path):
    code = cli.main(["analyze", "--preset", "smoke", "--cache", str(tmp_path / "c"), "--ray-num-cpus", "2",
                     "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --address and --ray-num-cpus need --executor ray"], err
