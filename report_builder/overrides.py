"""``--set key=value``: override any configuration key from the command line (Hydra-style).

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
from typing import Any

import yaml

from report_builder.errors import ConfigError, clip, for_terminal, shown

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
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        first = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--set {_key(key)}: cannot read the value {shown(raw)} ({clip(for_terminal(first), 200)})") from None
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
