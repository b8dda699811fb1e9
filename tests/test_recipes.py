"""ARCHITECTURE.md's recipes, enforced where a test can: a registration is declared once.

Read from the source with `ast` (nothing imported): every module of a registered kind (an analysis
defining ``ANALYSIS``, a family defining ``ADAPTER``, an executor defining ``EXECUTOR``) is named in its
registry and every registry name is such a module; an analysis id, a family's module name and an
executor's name appear as a string literal in the package only in its own module, its registry, and
the few stages that legitimately name it (listed below with the reason) — a second table keyed by the
name is what this test stops.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "report_builder"


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == name for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
        for n in tree.body)


def _tuple_literal(path: Path, name: str) -> tuple[str, ...]:
    for n in ast.parse(path.read_text(encoding="utf-8")).body:
        target = n.targets[0] if isinstance(n, ast.Assign) else (n.target if isinstance(n, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == name:
            return tuple(ast.literal_eval(n.value))
    raise AssertionError(f"{path} defines no {name}")


# (folder, the name each module defines, registry file, registry tuple)
KINDS = [
    ("analyses", "ANALYSIS", "analyses/registry.py", "MODULES"),
    ("models", "ADAPTER", "models/registry.py", "FAMILIES"),
    ("executors", "EXECUTOR", "executors/__init__.py", "MODULES"),
]


@pytest.mark.parametrize("folder, symbol, registry, names", KINDS)
def test_every_declaration_is_registered_and_every_registration_declared(folder, symbol, registry, names):
    declared = {p.stem for p in (PKG / folder).glob("*.py") if _defines(p, symbol)}
    registered = _tuple_literal(PKG / registry, names)
    assert len(set(registered)) == len(registered), f"{registry}: a name twice"
    assert declared == set(registered), (f"{folder}/: modules defining {symbol} {sorted(declared)} vs "
                                         f"{registry}:{names} {sorted(registered)}")


def _string_literals(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


LITERALS = {p.relative_to(PKG).as_posix(): _string_literals(p) for p in sorted(PKG.rglob("*.py"))}

# Where a registered name may also be spelled, and why (anything else is a second registration).
ALLOWED = {
    # analyses: the registry; an analysis' needs name the analysis they read; the K21 expansion
    # table is named after its analysis (schema.TABLES, the figures reading it, the headline numbers)
    "analyses": {"analyses/registry.py", "analyses/k21_frequency.py", "schema.py", "stats/headlines.py",
                 "figures/k21/expansion.py", "figures/k21/declarations.py"},
    # families: the registry; the paper preset and the benchmark's shapes name real model families
    "models": {"models/registry.py", "models/adapter.py", "models/embedded.py", "papers.py", "bench/shapes.py"},
    # executors: the registry (the default) and the local Ray's `address="local"` (Ray's own word)
    "executors": {"executors/__init__.py", "executors/ray_local.py", "envinfo.py"},
}


@pytest.mark.parametrize("folder, symbol, registry, names", KINDS)
def test_a_registered_name_is_spelled_only_where_it_is_declared(folder, symbol, registry, names):
    found = {}
    for name in _tuple_literal(PKG / registry, names):
        own = f"{folder}/{name}.py"
        where = sorted(f for f, lits in LITERALS.items() if name in lits and f != own and f not in ALLOWED[folder])
        if where:
            found[name] = where
    assert not found, f"{folder} names spelled outside their module and registry (a second table?): {found}"
