"""One reader of an earlier site (issue #30): in the citation stage and the site's publishing step, only
`citations.readback` and `citations.earlier_site` open the files the tool reads back (and
`version_files`, the CSV format they read through); every other module gets validated objects from them
and writes, removes and links only through `atomic`'s root-confined functions. So no string read from
``versions.json``, ``history.json`` or a version folder is joined into a path anywhere else. Read with
`ast`, nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "report_builder"
READERS = {"readback.py", "earlier_site.py", "version_files.py"}
CHECKED = sorted(p for p in (PKG / "citations").glob("*.py") if p.name not in READERS) + [PKG / "site" / "publish.py"]

FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "unlink", "rmdir", "rename", "iterdir",
                "rglob", "glob", "mkdir", "touch", "symlink_to", "hardlink_to", "link_to", "readlink"}
"""Path methods that read, list, write or remove a file."""
MODULE_CALLS = {"os": {"open", "link", "symlink", "listdir", "scandir", "walk", "remove", "unlink", "rename", "replace",
                       "rmdir", "removedirs", "makedirs", "mkdir", "readlink"},
                "shutil": None, "json": {"load", "dump"}, "pd": {"read_csv", "read_json", "read_parquet"},
                "pandas": {"read_csv", "read_json", "read_parquet"}, "io": {"open"}}
"""Functions of these modules that touch files (None: every function of the module)."""
READER_MODULES = {"readback", "earlier_site", "atomic"}
"""Their functions of the same names (``readback.read_text``) are the bounded, root-confined ones."""


def file_access(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, call) of every call that opens, lists, writes or removes a file other than through
    `atomic`/`readback`/`earlier_site`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            found.append((node.lineno, "open"))
        elif isinstance(f, ast.Attribute):
            owner = f.value.id if isinstance(f.value, ast.Name) else None
            if owner in MODULE_CALLS:
                names = MODULE_CALLS[owner]
                if names is None or f.attr in names:
                    found.append((node.lineno, f"{owner}.{f.attr}"))
            elif owner in READER_MODULES or (f.attr == "rename" and node.keywords):  # the readers; DataFrame.rename
                continue
            elif f.attr in FILE_METHODS:
                found.append((node.lineno, f".{f.attr}"))
    return found


def test_only_the_readers_touch_the_files_of_an_earlier_site():
    bad = {str(p.relative_to(PKG)): calls for p in CHECKED
           if (calls := file_access(ast.parse(p.read_text(encoding="utf-8"))))}
    assert not bad, f"read through citations.readback/earlier_site, write through atomic.*_inside: {bad}"


@pytest.mark.parametrize("src, expected", [
    ("json.loads((site / 'figures' / fid / 'x').read_text())", [".read_text"]), ("shutil.rmtree(out / fid)", ["shutil.rmtree"]),
    ("os.link(a, b)", ["os.link"]), ("open(p)", ["open"]), ("pd.read_csv(p)", ["pd.read_csv"]),
    ("(d / 'index.html').write_text(t)", [".write_text"]), ("atomic.replace_inside(r, p, t)", []),
    ("readback.read_json(r, p, 9)", []), ("readback.read_text(r, 'cite.bib')", []), ("json.loads(canonical(x))", []),
    ("s.replace('a', 'b')", []), ("df.rename(columns=f)", []), ("p.rename(q)", [".rename"])])
def test_the_check_can_fail(src, expected):
    assert [c for _, c in file_access(ast.parse(src))] == expected
