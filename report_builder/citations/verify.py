"""Verifying a figure version (SPEC §8 "Verification verdicts"), for `reproduce`: first the folder's own
files against the recipe that names them, then the rebuilt figure against the folder.

- `check_folder`: what of a version folder does not match its recipe (``provenance.json``): the
  recipe's seal (``recipe_sha256``, `recipe.sealed`); the folder's name, when it has a content hash's
  form, against the recorded hash; the content hash recomputed from the bytes on disk of ``spec.json``,
  ``data.csv`` and, for a diagram, ``chart.svg`` (`readback.content_hashes`, the one hashing rule
  `version_files.version_hash`); and every file the recipe records by SHA-256 (``files``: ``chart.svg``,
  ``chart.png`` and ``paper_vs_ours.csv``, which the content hash does not cover, as well as the two
  it does). Any mismatch is the verdict ``altered`` ("this folder is not the figure its recipe names"),
  with its own exit code, before anything is rebuilt.
- `compare`: the rebuilt figure against the folder: ``identical`` (the same content hash: the same
  bytes), ``within`` (other bytes, but equal within the published precision's tolerance:
  `same_version`), ``differs``; with the numeric change (`figure_diff.data_summary`: the largest
  difference and where).

Every file of the folder is read bounded through `readback` (regular files only, no link followed, size
caps). Pitfall: a folder with only its ``provenance.json`` (a downloaded recipe) has nothing to verify
but the recipe: `FolderCheck.given` says which files were there, and "equal within tolerance" needs the
folder's ``spec.json`` and ``data.csv``.
"""
from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from report_builder import precision
from report_builder.citations import figure_diff, readback, recipe, same_version
from report_builder.citations.version_files import FILES, HASH, OPTIONAL

VERDICTS = ("identical", "within", "differs", "altered")
"""What `reproduce` can conclude about a version folder (SPEC §8)."""

CONTENT = ("spec.json", "data.csv", "chart.svg")
"""The files whose text the content hash covers (``chart.svg`` for a diagram only)."""


@dataclass
class FolderCheck:
    """What `check_folder` found: ``given`` (the version's files present beside the recipe),
    ``mismatches`` (one line each: what does not match), ``texts`` (spec.json, data.csv, chart.svg as
    read, for `compare`), ``hashes`` (the content hashes the folder's own files give; empty when
    spec.json or data.csv is not there), ``drawn`` (chart.svg, chart.png as read, for `redrawn`)."""

    given: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    hashes: set[str] = field(default_factory=set)
    drawn: dict[str, bytes] = field(default_factory=dict)  # the drawings' bytes as read (`redrawn`)

    @property
    def altered(self) -> bool:
        return bool(self.mismatches)

    @property
    def complete(self) -> bool:
        """The folder holds what the content hash covers (so a rebuild can be compared with it)."""
        return {"spec.json", "data.csv"} <= set(self.texts)


def check_folder(folder: Path, rec: dict[str, Any]) -> FolderCheck:
    """Check the version folder ``folder`` against its recipe ``rec`` (validated by `readback`)."""
    out = FolderCheck()
    recorded = str(rec.get("content_hash"))
    if recipe.sealed(rec) is False:
        out.mismatches.append("the recipe (provenance.json) was edited after it was published: its recipe_sha256 "
                              "no longer matches")
    if HASH.fullmatch(folder.name) and folder.name != recorded:
        out.mismatches.append(f"the folder is named for version {folder.name}, its recipe records {recorded}")
    data: dict[str, bytes] = {}
    for name in FILES + OPTIONAL:
        if name == "provenance.json":
            continue
        try:
            data[name] = readback.read_bytes(folder, name, readback.CAPS["file"])
        except FileNotFoundError:
            continue
        except readback.BadRecord as e:
            out.mismatches.append(f"{name}: {str(e).split(': ', 1)[-1]}")
    out.given = sorted(data)
    out.drawn = {name: data[name] for name in DRAWINGS if name in data}
    for name in CONTENT:
        if name in data:
            try:
                out.texts[name] = data[name].decode("utf-8")
            except UnicodeDecodeError:
                out.mismatches.append(f"{name} is not UTF-8 text")
    if out.complete:
        from report_builder.citations.version_files import version_hashes

        out.hashes = version_hashes(out.texts["spec.json"], out.texts["data.csv"], out.texts.get("chart.svg"))
        if recorded not in out.hashes:
            out.mismatches.append(f"this folder is not the figure its recipe names: its spec.json and data.csv "
                                  f"give content hash {min(out.hashes)}, the recipe records {recorded}")
    elif {"spec.json", "data.csv"} & set(data):
        out.mismatches.append("spec.json or data.csv is missing beside the other: the content hash cannot be "
                              "recomputed")
    sums = rec.get("files")
    for name, digest in sorted(sums.items()) if isinstance(sums, dict) else []:
        if name in data and hashlib.sha256(data[name]).hexdigest() != digest:
            out.mismatches.append(f"{name} was changed after it was published (its SHA-256 is not the one its "
                                  f"recipe records)")
    return out


DRAWINGS = ("chart.svg", "chart.png")
"""A version's drawings: the hash covers them only for a diagram (its chart.svg); the recipe's SHA-256 of
them detects a changed file, not a forger who rewrites the recipe with it."""


_RENDER_IDS = re.compile(rb"\b(gradient_|clip)(\d+)\b")
"""Ids Vega's SVG renderer numbers by a counter of the process (the third gradient it ever drew is
``gradient_2``): the same figure drawn after others has other ids, the same picture."""


def _same_drawing(name: str, a: bytes, b: bytes) -> bool:
    """Whether two drawings are the same bytes, an SVG's renderer ids (`_RENDER_IDS`) numbered in order."""
    if name.endswith(".svg"):
        a, b = _numbered(a), _numbered(b)
    return a == b


def _numbered(svg: bytes) -> bytes:
    seen: dict[bytes, bytes] = {}
    return _RENDER_IDS.sub(lambda m: m.group(1) + seen.setdefault(m.group(0), str(len(seen)).encode()), svg)


def redrawn(check: FolderCheck, rebuilt: Path) -> list[str]:
    """The folder's drawings (as `check_folder` read them) that are not the same drawing as in the rebuilt
    folder ``rebuilt`` (read bounded; `_same_drawing`); a drawing either side lacks is not compared."""
    differ = []
    for name, theirs in check.drawn.items():
        try:
            mine = readback.read_bytes(rebuilt, name, readback.CAPS["file"])
        except (OSError, readback.BadRecord):
            continue
        if not _same_drawing(name, theirs, mine):
            differ.append(name)
    return differ


@dataclass
class Comparison:
    """The rebuilt figure against the folder: ``verdict`` (identical | within | differs), the numeric
    change of the data (`figure_diff.data_summary`, None without the folder's data.csv) and which part
    differs beyond the precision (``parts``: data.csv, spec.json, chart.svg)."""

    verdict: str
    data: dict[str, Any] | None = None
    parts: list[str] = field(default_factory=list)


def compare(recorded: str, rebuilt_hash: str, check: FolderCheck, rebuilt_texts: dict[str, str],
            tolerance: float = precision.TOLERANCE_STEPS) -> Comparison:
    """`Comparison` of a rebuilt figure (its content hash; its ``spec.json``, ``data.csv`` and, for a
    diagram, ``chart.svg`` texts) with the checked folder, within ``tolerance`` steps of the rule (the
    recipe's: `precision.recorded_tolerance`)."""
    import pandas as pd

    from report_builder.citations.version_files import read_csv

    if rebuilt_hash == recorded:
        return Comparison("identical")
    if not check.complete:
        return Comparison("differs")
    try:
        summary = figure_diff.data_summary(read_csv(io.StringIO(check.texts["data.csv"])),
                                           read_csv(io.StringIO(rebuilt_texts["data.csv"])))
    except (KeyError, ValueError, pd.errors.ParserError):
        summary = None
    theirs = {k: v for k, v in check.texts.items() if k != "chart.svg" or "chart.svg" in rebuilt_texts}
    if same_version.same_content(theirs, rebuilt_texts, tolerance):
        return Comparison("within", summary)
    parts = [name for name, one in (("data.csv", {"data.csv"}), ("spec.json", {"spec.json"}),
                                    ("chart.svg", {"chart.svg"}))
             if one & set(rebuilt_texts) and not same_version.same_part(name, theirs, rebuilt_texts, tolerance)]
    return Comparison("differs", summary, parts)
