"""Compare two builds: cache keys, every parquet table (by content and bytes) and every figure hash.

Usage: python tests/tools/compare_builds.py BEFORE_DIR AFTER_DIR
Each DIR holds ``cache/`` (``results/<analysis>/<key>/<table>.parquet``), ``site/figures/<id>/provenance.json``
and optionally ``log.txt`` (lines ``site: <id> built (<hash>)``). Exit status 0 when identical.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pandas as pd


def _entries(root: Path) -> dict[tuple[str, str], dict[str, Path]]:
    out = {}
    for d in sorted((root / "cache" / "results").glob("*/*")):
        if d.is_dir() and not d.name.startswith(".tmp"):
            out[(d.parent.name, d.name)] = {p.stem: p for p in sorted(d.glob("*.parquet"))}
    return out


def _figure_hashes(root: Path) -> dict[str, str]:
    hashes = {}
    log = root / "log.txt"
    if log.exists():
        for m in re.finditer(r"site: (\S+) built \((\w+)\)", log.read_text(errors="replace")):
            hashes[m.group(1)] = m.group(2)
    for p in sorted((root / "site" / "figures").glob("*/provenance.json")):
        prov = json.loads(p.read_text())
        h = prov.get("content_hash")
        if h:
            hashes.setdefault(p.parent.name, h)
            if hashes[p.parent.name] != h:
                hashes[p.parent.name] += f" (provenance.json says {h})"
    return hashes


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def compare(before: Path, after: Path) -> list[str]:
    """Human-readable differences (empty when the builds agree); prints a summary as it goes."""
    problems: list[str] = []
    eb, ea = _entries(before), _entries(after)
    if set(eb) != set(ea):
        problems.append(f"cache keys differ: only before {sorted(set(eb) - set(ea))}, only after {sorted(set(ea) - set(eb))}")
    n_tables = n_bytes = 0
    for k in sorted(set(eb) & set(ea)):
        tb, ta = eb[k], ea[k]
        if set(tb) != set(ta):
            problems.append(f"{k}: tables differ {sorted(tb)} vs {sorted(ta)}")
        for name in sorted(set(tb) & set(ta)):
            n_tables += 1
            if _sha(tb[name]) == _sha(ta[name]):
                n_bytes += 1
                continue
            try:
                pd.testing.assert_frame_equal(pd.read_parquet(tb[name]), pd.read_parquet(ta[name]), check_exact=True)
                problems.append(f"{k}/{name}: same content, different parquet bytes")
            except AssertionError as e:
                problems.append(f"{k}/{name}: content differs: {str(e).splitlines()[0]}")
    print(f"cache entries: {len(eb)} before, {len(ea)} after, {len(set(eb) & set(ea))} with identical keys")
    print(f"tables: {n_tables} compared, {n_bytes} byte-identical")
    fb, fa = _figure_hashes(before), _figure_hashes(after)
    if set(fb) != set(fa):
        problems.append(f"figures differ: only before {sorted(set(fb) - set(fa))}, only after {sorted(set(fa) - set(fb))}")
    same = [f for f in sorted(set(fb) & set(fa)) if fb[f] == fa[f]]
    for f in sorted(set(fb) & set(fa)):
        if fb[f] != fa[f]:
            problems.append(f"figure {f}: {fb[f]} before, {fa[f]} after")
    print(f"figures: {len(fb)} before, {len(fa)} after, {len(same)} with equal hashes")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems = compare(Path(argv[0]), Path(argv[1]))
    for p in problems:
        print("DIFF", p)
    print("IDENTICAL" if not problems else f"{len(problems)} difference(s)")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
