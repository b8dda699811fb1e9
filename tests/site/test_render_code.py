"""The figure cache's code digest (`site.render_code`): the code a figure depends on and nothing else.

Editing a benchmark or a compute module keeps every stored figure; editing a figure module, or a
module the render wing imports (the vocabulary, the statistics), changes the digest.
"""
from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from report_builder.site.render_code import files_digest, render_files

PKG = Path(__file__).resolve().parents[2] / "report_builder"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "report_builder"
    shutil.copytree(PKG, root, ignore=shutil.ignore_patterns("__pycache__", "_site"))
    return root


def _edit(p: Path) -> None:
    p.write_text(p.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")


def test_compute_and_bench_edits_keep_the_digest_figure_edits_change_it(tmp_path):
    root = _copy(tmp_path)
    render = set(render_files(root))
    base = files_digest(root)
    outside = [root / "bench" / "run.py", root / "bench" / "naive.py", root / "engine" / "__init__.py",
               *sorted((root / "decompose").rglob("*.py"))[:2], *sorted((root / "models").rglob("*.py"))[:2]]
    for p in outside:
        assert p.is_file() and p not in render, p
        _edit(p)
        assert files_digest(root) == base, f"editing {p.relative_to(root)} changed the figures' code digest"
    (root / "_site").mkdir()  # the installed package's page sources: pages only
    (root / "_site" / "mkdocs.yml").write_text("site_name: x\n")
    assert files_digest(root) == base

    # a module of figures/ itself, the vocabulary, and a statistics module the figures import
    stats = sorted(p for p in render if len(p.relative_to(root).parts) > 1
                   and p.relative_to(root).parts[0] not in ("figures", "site") and p.name != "__init__.py")
    assert stats, "figures/ and site/ import no statistics module?"
    for p in (root / "figures" / "spec.py", root / "schema.py", stats[0]):
        assert p in render, p
        before = files_digest(root)
        _edit(p)
        assert files_digest(root) != before, p.relative_to(root)
    before = files_digest(root)
    _edit(next((root / "resources").glob("*.yaml")))  # the papers' reported numbers
    assert files_digest(root) != before


def test_the_closure_holds_every_module_the_render_wing_loads():
    """Every report_builder module loaded by importing all of figures/ and site/ is in the closure
    (the closure reads imports with ast; this imports them for real)."""
    code = ("import importlib, json, pkgutil, sys\n"
            "import report_builder.figures, report_builder.site\n"
            "for pkg in (report_builder.figures, report_builder.site):\n"
            "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
            "        importlib.import_module(m.name)\n"
            "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()\n"
            "                        if n.split('.')[0] == 'report_builder' and getattr(m, '__file__', None))))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       cwd=PKG.parent, timeout=300)
    loaded = {Path(f).resolve() for f in json.loads(r.stdout.strip().splitlines()[-1])}
    closure = {p.resolve() for p in render_files(PKG)}
    # `import report_builder` binds the empty `decompose/` package before defining `rb.decompose`
    # (report_builder/__init__.py); that file holds no code, so no figure can depend on it
    bound = PKG / "decompose" / "__init__.py"
    assert not [n for n in ast.walk(ast.parse(bound.read_text(encoding="utf-8")))
                if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign))]
    assert loaded and loaded - {bound.resolve()} <= closure, sorted(str(p) for p in loaded - closure)
    assert not {p for p in closure if p.relative_to(PKG).parts[0] in ("bench", "decompose", "models", "engine.py")}
