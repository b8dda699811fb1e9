"""Command-line overrides of a configuration: ``--set key=value`` (any key, Hydra-style) and ``--model``
(``NAME=SOURCE`` swaps one configured model's source and keeps its name; a bare ``SOURCE`` makes a report
of only the given models).

Keys are dotted paths into the configuration mapping, with list items by index:
``k24.top_k=5``, ``device=cuda``, ``datasets.0.n=16`` (or ``datasets[0].n=16``), ``figures=[k21-tab2]``.
Values are read as YAML scalars or flow collections, so ``5`` is an integer, ``true`` a boolean,
``null`` nothing and ``[a, b]`` a list; quote a string that would read otherwise (``name='007'``).
The result goes through the same validation as a YAML file, so an unknown key or a bad value is
refused with the key's name. Pitfall: overrides apply to the *resolved* configuration (after the
preset and the config file), so ``--set preset=paper`` does not switch presets; use ``--preset``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from report_builder.errors import ConfigError, for_terminal, option, shown
from report_builder.yamlsafe import load_yaml

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.config import Config

_INDEX = re.compile(r"\[(\d+)\]")
MAX_KEY = 200
"""The longest ``--set`` key read (the longest real one is a few dozen characters)."""


def _key(key: str) -> str:
    return for_terminal(key)


def parse_assignment(item: str) -> tuple[list[str | int], Any]:
    """``"k24.top_k=5"`` -> ``(["k24", "top_k"], 5)``.

    Raises:
        ConfigError: No ``=``, an empty key or part, or a value that is not valid YAML.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {shown(item)}: expected KEY=VALUE, e.g. --set k24.top_k=5")
    if len(key) > MAX_KEY or not key.isprintable():
        raise ConfigError(f"--set {shown(key, 60)}: not a configuration key (letters, digits, `_`, `.` and "
                          "[index]; `report-builder list` and docs/examples/config.yaml name them)")
    parts: list[str | int] = []
    for part in _INDEX.sub(r".\1", key).split("."):
        if not part:
            raise ConfigError(f"--set {shown(item)}: empty part in the key {shown(key)}")
        parts.append(int(part) if part.isascii() and part.isdigit() and len(part) < 10 else part)
    value = load_yaml(raw, f"--set {_key(key)}") if raw.strip() else ""  # one error line; alias bombs refused
    return parts, value


def apply_assignments(data: dict, items: list[str]) -> dict:
    """A copy of the configuration mapping ``data`` with every ``KEY=VALUE`` of ``items`` applied, in order.

    Raises:
        ConfigError: A path that crosses a value that is not a mapping or list, or a list index out of
            range (unknown *names* are left to the configuration's own validation, which names them).
    """
    import copy

    out = copy.deepcopy(data)
    for item in items:
        parts, value = parse_assignment(item)
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(str(p) for p in parts[: depth + 1])
            if isinstance(node, list):
                if not isinstance(part, int) or not 0 <= part < len(node):
                    raise ConfigError(f"--set {_key(item.partition('=')[0])}: {_key(where)} needs an index 0..{len(node) - 1}")
            elif isinstance(node, dict):
                if isinstance(part, int):
                    raise ConfigError(f"--set {_key(item.partition('=')[0])}: {_key(where)} is a key, not a list index")
            else:
                raise ConfigError(f"--set {_key(item.partition('=')[0])}: "
                                  f"{_key('.'.join(str(p) for p in parts[:depth]))} is not a mapping or list")
            if last:
                node[part] = value
            else:
                if isinstance(node, dict) and node.get(part) is None:
                    node[part] = {}
                node = node[part]
    return out


def with_assignments(cfg, items: list[str]):
    """The ``Config`` ``cfg`` with ``--set`` items applied and validated again.

    Args:
        cfg: A resolved ``report_builder.config.Config``.
        items: ``KEY=VALUE`` strings.

    Returns:
        A new ``Config`` (``cfg`` itself when ``items`` is empty).
    """
    if not items:
        return cfg
    from report_builder.config import from_dict

    return from_dict(apply_assignments(cfg.to_dict(), items), source="--set")


# ------------------------------------------------------------------ --model


def split_named(item: str, names: Any) -> tuple[str, str, str]:
    """``NAME=VALUE`` as ``str.partition("=")`` gives it, except that a known name holding ``=`` itself (a
    model named ``a=b``) is matched whole: the longest of ``names`` (strings; a recipe's may be anything) that
    ``item`` starts with, then ``=``."""
    known = max((n for n in names if isinstance(n, str) and item.startswith(n + "=")), key=len, default=None)
    return (known, "=", item[len(known) + 1:]) if known else item.partition("=")


def split_model_items(items: list[str] | tuple[str, ...], cfg: "Config") -> tuple[dict[str, str], list[str]]:
    """CLI ``--model`` items as ``(swaps, sources)``: ``NAME=SOURCE`` items swap a configured model's
    source (``swaps``: name -> source), bare ``SOURCE`` items make a report of only those models.

    An item with ``=`` is a swap unless the whole item is an existing local path; a configured name holding
    ``=`` itself (``a=b``) is matched whole, else the item splits at its first ``=``. Raises `UsageError`
    for both kinds at once, an empty name or source, a name given twice, or a name that is not
    configured (one line: "did you mean" and the configured names).
    """
    import difflib
    import os

    from report_builder.errors import UsageError

    swaps: dict[str, str] = {}
    bare: list[str] = []
    names = [m.name for m in cfg.models]
    for item in items:
        item = str(item)
        name, sep, source = split_named(item, names)
        if not sep or os.path.exists(os.path.expanduser(item)):
            bare.append(item)
            continue
        name, source = name.strip(), source.strip()
        if not name or not source:
            raise UsageError(f"{option('models')} {shown(item)}: expected NAME=SOURCE (a configured model's name, then the "
                             "embedded name, local folder or hub id to analyse under that name)")
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6) or difflib.get_close_matches(
                name.lower(), [n.lower() for n in names], n=1, cutoff=0.6)
            guess = next((n for n in names if n.lower() == close[0]), close[0]) if close else None
            raise UsageError(f"{option('models')} {shown(name)}=...: no configured model is named {shown(name)}"
                             + (f"; did you mean {for_terminal(guess)}?" if guess else "")
                             + f" (configured: {', '.join(for_terminal(n) for n in names)})")
        if name in swaps:
            raise UsageError(f"{option('models')} {shown(name)}=...: given twice; swap each model once")
        swaps[name] = source
    if swaps and bare:
        raise UsageError(f"{option('models')}: give either NAME=SOURCE items (swap a configured model's source, keeping its "
                         "name and figures) or bare SOURCE items (a report of only those models), not both")
    return swaps, bare


def with_sources(cfg: "Config", swaps: dict[str, str]) -> "Config":
    """``cfg`` with each model named in ``swaps`` reading another source (CLI ``--model NAME=SOURCE``): its
    name and role stay, so its figures, cache keys of the other models, the Changes page and ``diff``
    compare its numbers with the earlier build's. A pinned ``revision`` belonged to the old source and is
    dropped. Names must be configured (`split_model_items` checks them)."""
    from dataclasses import replace as _replace

    from report_builder.config import validate

    ms = tuple(_replace(m, source=swaps[m.name], revision=None) if m.name in swaps else m for m in cfg.models)
    return validate(_replace(cfg, models=ms))


def with_model_items(cfg: "Config", items: list[str] | tuple[str, ...], causal: Callable[[str], bool]) -> "Config":
    """``cfg`` with the CLI's ``--model`` items applied: ``NAME=SOURCE`` swaps (`with_sources`), or bare
    sources (`with_models`). ``causal(source)`` says whether a source is a causal model (its adapter):
    a primary encoder is swapped only for an encoder and a primary causal model for a causal one
    (`UsageError` otherwise)."""
    from report_builder.errors import UsageError

    swaps, bare = split_model_items(items, cfg)
    if bare:
        return with_models(cfg, bare, [causal(s) for s in bare])
    roles = {m.name: m.role for m in cfg.models}
    for name, source in swaps.items():
        want = {"primary_encoder": False, "primary_causal": True}.get(roles[name])
        if want is not None and causal(source) != want:
            kind = "an encoder" if want is False else "a causal model"
            raise UsageError(f"{option('models')} {for_terminal(name)}={shown(source)}: {for_terminal(name)} is the "
                             f"{roles[name].replace('_', ' ')}, so its source must be {kind}; swap another model, "
                             f"or give bare {option('models', 'SOURCE')} items for a report of other models")
    return with_sources(cfg, swaps)


def with_models(cfg: "Config", sources: list[str], causal: list[bool]) -> "Config":
    """Replace the configured models (CLI bare ``--model SOURCE``): a report of only these models, each
    named by its source (a local folder by its folder name); each becomes the primary encoder or the
    primary causal model by its causality (``causal``, from its adapter), later ones of the same kind
    variants. To keep the configured models and swap one's source, see `with_sources`."""
    import os

    def name(s: str) -> str:  # a local path is named by its folder (no local path in the report)
        return os.path.basename(os.path.normpath(s)) if os.path.exists(os.path.expanduser(s)) else s

    roles, seen = [], set()
    for c in causal:
        kind = "primary_causal" if c else "primary_encoder"
        roles.append(kind if kind not in seen else "variant")
        seen.add(kind)
    from dataclasses import replace as _replace

    from report_builder.config import ModelConfig, validate

    ms = tuple(ModelConfig(name=name(s), source=s, role=r) for s, r in zip(sources, roles))
    named: dict[str, Any] = {}
    for m in ms:  # every table and figure tells models apart by name
        first = named.setdefault(m.name, m)
        if first is not m:
            from report_builder.errors import UsageError

            raise UsageError(f"{option('models')}: {for_terminal(first.source)} and {for_terminal(m.source)} would both be named "
                             f"{shown(m.name)} in the report; rename a folder, or name each model in a configuration "
                             "file (models: - {name: ..., source: ...})")
    return validate(_replace(cfg, models=ms))
