"""A configuration's list entries: models (`ModelConfig`) and evaluation sets (`DatasetConfig`), and their checks.

`config.from_dict` runs `check_models` on the ``models:`` list as read (roles, one primary model of each
kind, unique names); `config.validate` runs `check_entries` on every `Config` (YAML, ``--set``, CLI swaps,
the Python API). `need` and `count` are the one way a configuration value is refused. Pitfall: each
message names the entry by its index (``models[1].role``), as the user wrote it; keep those keys stable,
tests and the guide quote them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from report_builder.errors import ConfigError, shown
from report_builder.values import plain_text

ROLES = ("primary_encoder", "primary_causal", "variant", "seed_group")

COUNT_MAX = 2**31 - 1
"""The largest count a key takes (sequences, tokens, threads, steps, ...): beyond any build."""


@dataclass(frozen=True)
class ModelConfig:
    """A model: report ``name``, ``source`` (embedded name, local dir or hub id) and ``role``; a hub
    id may pin ``revision`` (branch, tag or commit; default: the cached ``main``)."""

    name: str
    source: str
    role: str = "variant"
    revision: str | None = None


@dataclass(frozen=True)
class DatasetConfig:
    """An evaluation set: ``id``, sequences for K21 (``n``) and for the K24 full-layer analyses
    (``k24_n``), an optional local ``path``, and ``max_length`` in tokens.

    An id that is not built in is the user's own data: ``path`` to a ``.txt`` (one text per line),
    ``.jsonl`` or ``.csv``/``.tsv`` file (with ``column`` and optionally ``pair_column``), or
    ``hub`` (a ``datasets`` id, with ``column``, optional ``subset`` and ``split``); ``name``,
    ``domain`` and ``licence`` fill its datasheet (see ``report_builder.data.custom``)."""

    id: str
    n: int | None = None
    k24_n: int | None = 16
    path: str | None = None
    max_length: int = 128
    column: str | None = None
    pair_column: str | None = None
    hub: str | None = None
    subset: str | None = None
    split: str | None = None
    name: str | None = None
    domain: str | None = None
    licence: str | None = None


def need(ok: bool, key: str, msg: str) -> None:
    """Raise `ConfigError` ``key: msg`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}: {msg}")


def count(v: Any, key: str, low: int = 1, optional: bool = False, high: int = COUNT_MAX) -> None:
    """Refuse ``v`` unless it is an integer in ``[low, high]`` (or None, when ``optional``)."""
    if v is None and optional:
        return
    need(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high, key,
         f"expected an integer >= {low} and <= {high}, got {shown(v)}")


def check_models(ms: Sequence[ModelConfig]) -> None:
    """The ``models:`` list as read: known roles, at most one primary model of each kind, unique names."""
    for k, m in enumerate(ms):
        if m.role not in ROLES:
            raise ConfigError(f"models[{k}].role: {shown(m.role)} is not one of {', '.join(ROLES)}")
    for role in ("primary_encoder", "primary_causal"):  # a second one was quietly not primary (no Fig. 3 for it)
        if len(given := [shown(m.name) for m in ms if m.role == role]) > 1:
            raise ConfigError(f"models: {', '.join(given)} all have role {role}; a report has one (give the others role variant)")
    names = [m.name for m in ms]
    if len(set(names)) != len(names):
        raise ConfigError("models: model names must be unique")


def check_entries(models: Sequence[ModelConfig], datasets: Sequence[DatasetConfig]) -> None:
    """Every value of each entry: plain text, a known role, a non-empty name and source; counts in range,
    unique dataset ids. (Their paths are `config.validate`'s, with the other path keys.)"""
    for k, m in enumerate(models):
        for f in ("name", "source", "revision"):
            plain_text(getattr(m, f), f"models[{k}].{f}")
        need(m.role in ROLES, f"models[{k}].role", f"{shown(m.role)} is not one of {', '.join(ROLES)}")
        need(bool(str(m.name).strip()), f"models[{k}].name", "must not be empty")
        need(bool(str(m.source).strip()), f"models[{k}].source", "must not be empty")
    ids = [d.id for d in datasets]
    for k, d in enumerate(datasets):
        for f in ("id", "path", "column", "pair_column", "hub", "subset", "split", "name", "domain", "licence"):
            plain_text(getattr(d, f), f"datasets[{k}].{f}")
        count(d.n, f"datasets[{k}].n", optional=True)
        count(d.k24_n, f"datasets[{k}].k24_n", optional=True)
        count(d.max_length, f"datasets[{k}].max_length", low=4)
        need(ids.count(d.id) == 1, f"datasets[{k}].id", f"{shown(d.id)} is listed twice; dataset ids must be unique")
