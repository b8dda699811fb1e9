"""``report-builder diff OLD NEW``: what changed between two figure versions, two provenance files or two sites.

Each side is a version folder (``figures/<id>/<hash>/``, or a figure's current folder ``figures/<id>/``),
a ``provenance.json`` (its ``data.csv`` is read from the same folder when it is there), or a built
site (its ``figures/<id>/`` current versions, figure by figure). The summary is `citations.figure_diff`'s,
the same the Changes page shows: the inputs that differ and the numeric change of the data.

Two versions are "identical" when their own files say so: the content hash is recomputed from each
side's ``spec.json`` and ``data.csv`` (`readback.content_hashes`), never taken from the records alone; a
side whose files do not give the hash its record claims is named (``checks``) and never identical, and
the numeric change of the data is shown either way. A side without readable files (a bare
``provenance.json``, or a ``data.csv`` that is a link, a FIFO or too large) is never identical either:
``verdict`` is then ``unverified`` when the records claim the same hash, else ``changed``. Two versions of
different figures are refused (one line, exit 2: there is no "change" from one figure to another). In a
site comparison a figure whose record cannot be read on one side (a link, a FIFO, malformed, naming
another figure) is listed as not comparable, with why, and the other figures are compared (exit 0, as
for any diff). Every file is read through `readback` (bounded,
regular files only, no link followed, the record validated). Pitfall: every value printed comes from files a user may have downloaded from anywhere: the
CLI prints them through its terminal escaping; nothing here evaluates them.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from report_builder import atomic
from report_builder.citations import figure_diff, readback
from report_builder.errors import ReportBuilderError, UsageError, for_terminal
from report_builder.values import check_path


def _side(path: Path) -> tuple[str, Path]:
    """("site" | "version", folder or provenance file) of one argument; `UsageError` when neither."""
    check_path(str(path), "diff", error=UsageError)
    p = Path(path).expanduser()
    if p.is_symlink():
        raise UsageError(f"{path}: a symbolic link; give the folder or file itself")
    if p.is_file() and p.name.endswith(".json"):
        return "version", p
    if p.is_dir() and (p / "provenance.json").is_file():
        return "version", p / "provenance.json"
    if p.is_dir() and (p / "figures").is_dir():
        return "site", p
    raise UsageError(f"{path}: not a figure version folder, a provenance.json or a built site "
                     f"(expected figures/<id>/<hash>/, a provenance.json or a folder holding figures/)")


def _record(prov_file: Path) -> dict[str, Any]:
    """The record of a provenance file, read and validated by `readback` (bounded, no link followed);
    `readback.BadRecord` (a `UsageError`) naming what is wrong."""
    try:
        data = readback.read_bytes(prov_file.parent, prov_file.name, readback.CAPS["recipe"])
    except FileNotFoundError:
        raise UsageError(f"{prov_file}: no such file") from None
    return readback.record_from(data, prov_file, linked=False).data


def version_diff(old_prov: Path, new_prov: Path) -> dict[str, Any]:
    """The summary of two versions given by their provenance files."""
    a, b = _record(old_prov), _record(new_prov)
    fa, fb = (a.get("figure") or {}).get("id"), (b.get("figure") or {}).get("id")
    if fa != fb:
        raise UsageError(f"{old_prov.parent} is a version of {for_terminal(fa)} and {new_prov.parent} one of "
                         f"{for_terminal(fb)}: diff compares two versions of one figure (or two sites)")
    return _compared(old_prov, new_prov, a, b)


def _compared(old_prov: Path, new_prov: Path, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """`version_diff` of two provenance files whose records ``a`` and ``b`` are read (and of one figure)."""
    fa, fb = (a.get("figure") or {}).get("id"), (b.get("figure") or {}).get("id")
    old_df = readback.read_data(old_prov.parent)
    new_df = readback.read_data(new_prov.parent)
    pa, pb = _actual(old_prov.parent), _actual(new_prov.parent)
    checks = [line for side, rec, got in (("OLD", a, pa), ("NEW", b, pb)) for line in [_check(side, rec, got)] if line]
    ha, hb = _hashes(pa), _hashes(pb)
    forged = any(got is not None and rec.get("content_hash") not in got for rec, got in ((a, ha), (b, hb)))
    verified = ha is not None and hb is not None  # the data themselves decide, not what the records claim
    same = verified and bool(ha & hb) and not forged
    recorded_same = a.get("content_hash") is not None and a.get("content_hash") == b.get("content_hash")
    verdict = "identical" if same else "unverified" if recorded_same and not verified and not forged else "changed"
    return {"figure": fb or fa, "old_figure": fa, "old": a.get("content_hash"), "new": b.get("content_hash"),
            "identical": same, "verdict": verdict, "checks": checks, "inputs": figure_diff.inputs_diff(a, b),
            "data": figure_diff.data_summary(old_df, new_df) if old_df is not None and new_df is not None else
            {"comparable": False, "reason": "no readable data.csv beside a provenance.json"}}


def _actual(folder: Path) -> tuple[str, str | None] | None:
    """The content hashes a version folder's own ``spec.json`` and ``data.csv`` give, without and with its
    ``chart.svg`` (`readback.content_hash_pair`, bounded); None when they are not there or cannot be read."""
    try:
        return readback.content_hash_pair(folder)
    except (OSError, readback.BadRecord):
        return None


def _hashes(pair: tuple[str, str | None] | None) -> set[str] | None:
    """The hashes a folder's files can stand for (`readback.content_hashes`), from `_actual`'s pair."""
    return None if pair is None else {h for h in pair if h is not None}


def _check(side: str, rec: dict[str, Any], actual: tuple[str, str | None] | None) -> str | None:
    """What a side's files say against its record's claim (None: they agree)."""
    claim = rec.get("content_hash")
    if actual is None:
        return (f"{side} has no readable spec.json and data.csv beside its provenance.json: its files cannot be "
                f"compared, only what its record claims")
    if claim not in _hashes(actual):
        plain, drawn = actual
        return (f"{side}'s files are not the version its record claims: its spec.json and data.csv give "
                f"{plain}" + (f" (with its chart.svg: {drawn})" if drawn else "")
                + f", its provenance.json records {claim}")
    return None


def _figures(site: Path) -> dict[str, Path]:
    """Each figure's current provenance.json of a site: a registered id's real folder (links are skipped)."""
    try:
        found = atomic.entries(site, site / "figures")
    except ReportBuilderError as e:
        raise UsageError(f"{site}: {e}") from None
    # lexists: a planted link (even a dangling one) as a figure's provenance.json is that figure, not comparable
    return {name: site / "figures" / name / "provenance.json" for name, is_dir in found
            if is_dir and readback.figure_id(name) is not None
            and os.path.lexists(site / "figures" / name / "provenance.json")}


def _site_figure(fid: str, old_prov: Path, new_prov: Path) -> dict[str, Any]:
    """`version_diff` of one figure of two sites; ``verdict: "unreadable"`` with ``reason`` when a side's
    record cannot be read or names another figure (the figure is not comparable; the others still are)."""
    records = []
    for side, prov in (("OLD", old_prov), ("NEW", new_prov)):
        try:
            rec = _record(prov)
        except UsageError as e:
            return {"figure": fid, "verdict": "unreadable", "identical": False, "reason": f"{side}: {e}"}
        got = rec.get("figure", {}).get("id")
        if got != fid:
            return {"figure": fid, "verdict": "unreadable", "identical": False,
                    "reason": f"{side}: {prov} names figure {got}, not the figure of its folder"}
        records.append(rec)
    return _compared(old_prov, new_prov, *records)  # each record read once


def diff(old: str | Path, new: str | Path) -> dict[str, Any]:
    """Compare ``old`` and ``new`` (two versions or two sites; see the module docstring).

    Returns for two versions `version_diff`'s dict (``kind: "version"``); for two sites ``kind: "site"``,
    ``added``/``removed``/``unchanged`` figure ids and ``changed``: one `version_diff` per changed figure.
    """
    ka, pa = _side(Path(old))
    kb, pb = _side(Path(new))
    if ka != kb:
        raise UsageError(f"diff compares two versions or two sites, not a {ka} with a {kb}")
    if ka == "version":
        return {"kind": "version", **version_diff(pa, pb)}
    fa, fb = _figures(pa), _figures(pb)
    out: dict[str, Any] = {"kind": "site", "old": str(old), "new": str(new),
                           "added": sorted(set(fb) - set(fa)), "removed": sorted(set(fa) - set(fb)),
                           "unchanged": [], "changed": [], "unverified": [], "unreadable": []}
    for fid in sorted(set(fa) & set(fb)):
        d = _site_figure(fid, fa[fid], fb[fid])
        if d["identical"]:
            out["unchanged"].append(fid)
        else:
            out[d["verdict"] if d["verdict"] in ("unverified", "unreadable") else "changed"].append(d)
    return out


def format_diff(d: dict[str, Any]) -> str:
    """The text form of `diff`'s result."""
    if d["kind"] == "version":
        return _format_version(d)
    apart = len(d["unverified"]) + len(d.get("unreadable", []))
    lines = [f"{len(d['changed'])} changed, {len(d['added'])} added, {len(d['removed'])} removed, "
             f"{len(d['unchanged'])} unchanged" + (f", {apart} not comparable (files unreadable)" if apart else "")]
    for u in d.get("unreadable", []):
        lines.append(f"not comparable {for_terminal(u['figure'])}: {for_terminal(u['reason'])}")
    for fid in d["added"]:
        lines.append(f"added   {for_terminal(fid)}")
    for fid in d["removed"]:
        lines.append(f"removed {for_terminal(fid)}")
    for c in d["changed"] + d["unverified"]:
        lines.append(_format_version(c))
    return "\n".join(lines)


def _format_version(d: dict[str, Any]) -> str:
    p = for_terminal
    verdict = {"identical": "identical", "unverified": "the same recorded hash, files not compared"}.get(
        d["verdict"], "changed")
    head = f"{p(d['figure'])} {p(d['old'])} -> {p(d['new'])}: {verdict}"
    lines = [head] + [f"  check: {p(c)}" for c in d.get("checks", [])]
    if not d["inputs"]:
        lines.append("  inputs: no recorded input differs")
    for r in d["inputs"]:
        lines.append("  " + figure_diff.describe_input(r))
    lines.append("  numbers: " + figure_diff.describe_data(d["data"]))
    return "\n".join(lines)
