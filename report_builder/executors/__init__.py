"""Executors: who runs a build's plan, chosen by name (``--executor NAME``) from one registry.

Each module named in `MODULES` defines ``EXECUTOR``, a class with ``name`` (its ``--executor``
value), ``summary`` (what it does, for ``--help``), ``options`` (its own command-line options,
`base.Option` rows: the CLI adds them all, and a build passes the given ones to its executor only)
and ``from_options(*, log, progress, **options)`` (the executor for a build; None for the local one,
which `api.analyze` makes over the build's cache).
Adding an executor is one module here defining ``EXECUTOR`` and its name in `MODULES`.

Pitfall: importing an executor module must stay light (Ray is imported inside its functions only),
since the command line reads every executor's options to build its parser.
"""
from __future__ import annotations

import argparse
import importlib
from typing import Any, Callable

from report_builder.errors import UsageError, option, shown
from report_builder.executors.base import Executor, Option, Registered

__all__ = ["DEFAULT", "MODULES", "Executor", "Option", "add_arguments", "create", "executors", "options_of"]

MODULES: tuple[str, ...] = ("local", "ray")
"""Executor modules under `report_builder.executors`, each defining ``EXECUTOR``; the first is the default."""
DEFAULT = MODULES[0]


def executors() -> dict[str, Registered]:
    """Every registered executor class by its name, in `MODULES` order (an option's flag and keyword
    belong to one executor: checked here)."""
    out: dict[str, Registered] = {}
    seen: dict[str, str] = {}
    for module in MODULES:
        cls = importlib.import_module(f"report_builder.executors.{module}").EXECUTOR
        for o in cls.options:
            for k in (o.flag, o.dest):
                if k in seen:
                    raise RuntimeError(f"executor option {k!r} is declared by both {seen[k]} and {cls.name}")
                seen[k] = cls.name
        out[cls.name] = cls
    return out


def _choices(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The "execution" group: ``--executor`` and every executor's own options (default None: not given)."""
    reg = executors()
    g = parser.add_argument_group("execution")
    g.add_argument("--executor", choices=list(reg), default=None,  # None: not given (`build --plan` refuses it)
                   help="; ".join(f"{name}: {cls.summary}" for name, cls in reg.items()))
    for cls in reg.values():
        for o in cls.options:
            g.add_argument(o.flag, dest=o.dest, type=o.type, metavar=o.metavar, help=o.help)


def options_of(args: argparse.Namespace) -> dict[str, Any]:
    """Every executor option's value in parsed ``args`` (None where not given), by keyword."""
    return {o.dest: getattr(args, o.dest, None) for cls in executors().values() for o in cls.options}


def create(name: str = DEFAULT, *, log: Callable[[str], Any] = print, progress: bool = True,
           **options: Any) -> Executor | None:
    """The executor ``name`` names, made from ``options`` (None values: not given). Raises `UsageError`
    for an unknown name or an option that belongs to another executor."""
    reg = executors()
    if name not in reg:
        raise UsageError(f"unknown executor {shown(name)}; choose {_choices(list(reg))}")
    cls = reg[name]
    known = {o.dest for c in reg.values() for o in c.options}
    if set(options) - known:
        raise TypeError(f"unknown executor option(s): {', '.join(sorted(set(options) - known))}")
    for other in reg.values():
        if other is not cls and any(options.get(o.dest) is not None for o in other.options):
            raise UsageError(f"{' and '.join(o.named() for o in other.options)} need "
                             f"{option('executor', other.name)}")
    own = {o.dest for o in cls.options}
    return cls.from_options(log=log, progress=progress, **{k: v for k, v in options.items() if k in own})
