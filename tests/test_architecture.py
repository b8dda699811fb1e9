"""The house as ARCHITECTURE.md draws it: one folder per stage, imports only downwards, no cycles.

Reads the package's source (no import): every ``import``/``from ... import`` of a ``report_builder``
module, at module level or inside a function, is an edge. Checked here:
- no import cycle between modules;
- no stage imports a stage above it (`STAGES`, bottom first);
- no module over 500 lines, and `api.py` (the thin front) at most 250;
- no benchmark module at the package root, no site source (`.j2`, `mkdocs.yml`) inside the package;
- no bare ``"pre"``/``"post"`` layout comparison outside `schema.py` (layouts are `schema.Layout` rows).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "report_builder"

# Bottom first. A module may import its own stage and the stages below it, never one above.
# A stage is the first component under report_builder/ (a folder or a root module), or a module of such a
# folder named here on its own ("citations.reproduce": the citation stage's one module above the site).
STAGES: list[set[str]] = [
    # vocabulary and file safety; "" is the package's lazy __init__ (only `__version__` at import time)
    {"schema", "errors", "extras", "papers", "tokens", "atomic", "filehash", "guard", "site_marker", "precision", ""},
    {"config", "config_entries", "overrides", "values", "yamlsafe", "cache", "cache_lock", "caches"},  # configuration; the results store(s)
    {"stats", "decompose", "data"},                                       # torch-free statistics; maths; eval sets
    {"models"},                                                           # adapters (declare decompose's weights), loading
    {"engine"},                                                           # models x sequences -> layer results
    {"analyses"},                                                         # declarations, plan, their passes
    {"executors", "costs", "provenance", "last_build"},                   # run a plan; price a plan; what a build
                                                                          # used; its record (entries -> tables)
    {"figures"},                                                          # pure Altair builders
    {"citations"},                                                        # what a published figure is: versions,
                                                                          # history, recipe, diff (read by the site)
    {"site", "bench", "envinfo", "housekeeping", "listing"},              # pages + mkdocs; the benchmark; `env`;
                                                                          # checks before any work, `clean`; `list`
    {"citations.reproduce"},                                              # rebuild one figure version from its
                                                                          # recipe: plans, runs and draws it
    {"api"},                                                              # the thin front
    {"cli", "cli_citations", "logsetup", "notebook", "__main__"},                          # what users call; the CLI's log
]
RANK = {name: i for i, names in enumerate(STAGES) for name in names}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return name or None


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("report_builder")]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod.startswith("report_builder"):
                    targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
            for t in targets:
                r = _resolve(t)
                if r and r != m:
                    edges[m].add(r)
    return edges


EDGES = _edges()


def _stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in RANK:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else ""


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles():
    assert _cycles(EDGES) == []


def test_every_stage_is_ranked():
    unranked = sorted({_stage(m) for m in MODULES} - set(RANK))
    assert not unranked, f"stages missing from STAGES (add them where they belong): {unranked}"


def test_stages_import_only_downwards():
    upward = sorted(f"{a} -> {b}" for a, targets in EDGES.items() for b in targets
                    if _stage(a) in RANK and _stage(b) in RANK and RANK[_stage(b)] > RANK[_stage(a)])
    assert not upward, "imports of a higher stage:\n" + "\n".join(upward)


COMPUTE = {"decompose", "models", "engine", "analyses", "executors", "costs", "data", "bench"}
RENDER = {"stats", "figures", "citations", "site"}


def test_render_never_imports_compute():
    """Statistics, figures, the citation records and the site read tidy tables; they never reach into the
    compute stages (`citations.reproduce`, ranked above the site, does)."""
    bad = sorted(f"{a} -> {b}" for a, targets in EDGES.items() for b in targets
                 if _stage(a) in RENDER and _stage(b) in COMPUTE)
    assert not bad, "\n".join(bad)


def test_no_module_over_500_lines_and_a_thin_front():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, f"modules over 500 lines: {long}"
    assert len((PKG / "api.py").read_text(encoding="utf-8").splitlines()) <= 250


def test_no_tooling_or_site_sources_inside_the_package():
    assert not sorted(p.name for p in PKG.glob("bench*.py")), "benchmarks belong to report_builder/bench/"
    inside = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*") if p.suffix == ".j2" or p.name == "mkdocs.yml")
    assert not inside, f"site sources belong at the top level (templates/, mkdocs.yml): {inside}"


def _bare_layout_comparisons(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            consts = [side] if isinstance(side, ast.Constant) else (
                list(side.elts) if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [])
            if any(isinstance(c, ast.Constant) and c.value in ("pre", "post") for c in consts):
                lines.append(node.lineno)
    return lines


def test_no_bare_pre_post_comparison_outside_schema():
    found = {m: ls for m, p in MODULES.items() if m != "report_builder.schema"
             and (ls := _bare_layout_comparisons(ast.parse(p.read_text(encoding="utf-8"))))}
    assert not found, f"compare with schema's Layout rows instead: {found}"


@pytest.mark.parametrize("src, expected", [("x == 'pre'", [1]), ("x in ('pre', 'post')", [1]), ("x == 'pref'", [])])
def test_the_layout_comparison_check_can_fail(src, expected):
    assert _bare_layout_comparisons(ast.parse(src)) == expected


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _adhoc_escapes(tree: ast.AST) -> list[int]:
    """Lines that escape text for the terminal by hand: ``repr(c)[1:-1]`` or a ``"".join`` over the
    characters that tests ``isprintable()`` (`errors.for_terminal` is the one escaper)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "repr" \
                and isinstance(node.slice, ast.Slice) and node.slice.lower is not None:
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
                and any(isinstance(n, ast.Attribute) and n.attr == "isprintable" for a in node.args for n in ast.walk(a)):
            lines.append(node.lineno)
    return lines


def test_one_terminal_escaper():
    found = {m: ls for m, p in MODULES.items() if m != "report_builder.errors"
             and (ls := _adhoc_escapes(ast.parse(p.read_text(encoding="utf-8"))))}
    assert not found, f"escape terminal text with errors.for_terminal: {found}"


@pytest.mark.parametrize("src, expected", [
    ("''.join(c if c.isprintable() else repr(c)[1:-1] for c in t)", [1, 1]),
    ("x = repr(v)[1:-1]", [1]), ("ok = s.isprintable()", []), ("x = repr(v)", [])])
def test_the_escaper_check_can_fail(src, expected):
    assert _adhoc_escapes(ast.parse(src)) == expected
