"""The manifest of figure content hashes and the comparison with the previous build ("Changes" page).

The previous manifest is read from the existing ``site/figures/manifest.json`` before ``site/`` is
replaced (or from the copy kept in the output's state folder, `site_state`). The "Changes" page compares with
`baseline`: the last build whose figures differed (a no-op rebuild keeps the page as it was). Pitfall: a figure that was not
configured has no hash; it is listed as "not configured", never as changed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Changes:
    """Figure ids by status relative to the previous build."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    previous: dict[str, Any] | None = None


def read_manifest(*candidates: Path) -> dict[str, Any] | None:
    """The first readable manifest (a JSON object) among ``candidates``, or None."""
    for path in candidates:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # nested too deeply: unreadable too
            continue
        if isinstance(data, dict):
            return data
    return None


def compare(current: dict[str, Any], previous: dict[str, Any] | None) -> Changes:
    """Compare two manifests (``{"figures": {id: {"hash": ...}}}``)."""
    out = Changes(previous=previous)
    prev = (previous or {}).get("figures", {})
    for fid, rec in current["figures"].items():
        h = rec.get("hash")
        if h is None:
            continue
        old = prev.get(fid, {}).get("hash")
        if old is None:
            out.new.append(fid)
        elif old != h:
            out.changed.append(fid)
        else:
            out.unchanged.append(fid)
    out.removed = [fid for fid, rec in prev.items()
                   if rec.get("hash") and current["figures"].get(fid, {}).get("hash") is None]
    return out


def _hashes(m: dict[str, Any] | None) -> dict[str, Any]:
    return {fid: rec.get("hash") for fid, rec in (m or {}).get("figures", {}).items()}


def baseline(current: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """The build the "Changes" page compares with: the previous build, or — when that one had exactly
    these figure hashes (a rebuild with nothing changed) — the build *it* was compared with, so an
    unchanged rebuild renders the same page (and the site can be kept as it is)."""
    if previous is None:
        return None
    if _hashes(previous) == _hashes(current):
        return previous.get("base")
    return {k: v for k, v in previous.items() if k != "base"}
