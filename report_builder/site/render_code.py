"""Which of the package's code a figure depends on: the render wing's imports, followed with `ast`.

A figure's files are made by ``figures/`` and ``site/`` and by every ``report_builder`` module they
import (the vocabulary, the statistics, the results store's hashing), transitively; the compute
stages and the benchmark are not among them. `files_digest` hashes exactly those files (and the
package's data files), so the figure cache (`figure_cache.code_digest`) keeps every stored figure
when a benchmark or a torch pass is edited, and rebuilds them when anything they run is.

Pitfall: an import the source does not spell out (``importlib.import_module`` with a computed name)
is not followed; the render wing names its imports (a test checks the closure holds the modules a
figure runs).
"""
from __future__ import annotations

import ast
import hashlib
from pathlib import Path

RENDER_PACKAGES = ("figures", "site")
"""The packages that make a figure's files; the code digest follows their imports."""
DATA_SUFFIXES = (".yaml", ".yml", ".json", ".csv", ".txt")
PAGE_SOURCES = "_site"
"""The site's sources inside an installed package (`site.paths`): pages only, never in the digest."""


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the package folder ``root`` (``__init__`` as its package)."""
    mods = {}
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        parts = [root.name, *p.relative_to(root).with_suffix("").parts]
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return mods


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (module level or inside a
    function), each resolved to the longest module name that exists."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets.add(mod)
            targets.update(f"{mod}.{a.name}" for a in node.names)
    out = set()
    for t in targets:
        while t and t not in modules:
            t = t.rpartition(".")[0]
        if t:
            out.add(t)
    return out


def render_files(root: Path) -> list[Path]:
    """The ``.py`` files of the package folder ``root`` that a figure's files can depend on: every
    module of `RENDER_PACKAGES` and every module of the package they import, transitively, with the
    packages holding each (their ``__init__`` runs on import). Read with `ast`; nothing is imported."""
    modules = _modules(root)
    todo = [m for m in modules if m.split(".")[1:2] and m.split(".")[1] in RENDER_PACKAGES]
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:k]) for k in range(1, len(parts))]
        todo += _imported(m, modules[m], modules)
    return sorted(modules[m] for m in seen)


def files_digest(root: Path) -> str:
    """SHA-256 over `render_files` and the package's data files (relative path and bytes; the page
    sources and caches excluded) of the package folder ``root``."""
    data = [p for p in root.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES
            and "__pycache__" not in p.parts and p.relative_to(root).parts[0] != PAGE_SOURCES]
    h = hashlib.sha256()
    for p in sorted({*render_files(root), *data}):
        h.update(p.relative_to(root).as_posix().encode("utf-8") + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()
