"""The layouts sub-package: one row of mathematics per `schema.Layout`, and modules that share only
public names (no module of decompose/ or models/ imports another's ``_private`` name)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from report_builder import schema
from report_builder.decompose import layouts

PKG = Path(__file__).resolve().parents[2] / "report_builder"


def test_every_layout_has_its_mathematics():
    assert set(layouts.MATHS) == set(schema.LAYOUTS)


def test_a_layout_without_mathematics_is_refused_by_name():
    import dataclasses

    import torch

    from tests.tiny_models import tiny

    lw = tiny("bert").layer_weights(0)
    odd = dataclasses.replace(lw, layout=dataclasses.replace(schema.POST_LN, id="odd"))
    with pytest.raises(ValueError, match="layout 'odd' has no mathematics"):
        layouts.decompose_layer(odd, torch.zeros(3, 32), torch.full((4, 3, 3), 1 / 3))


def _private_imports(folder: str) -> list[str]:
    found = []
    for p in sorted((PKG / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("report_builder")):
                found += [f"{p.relative_to(PKG)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
    return found


@pytest.mark.parametrize("folder", ["decompose", "models"])
def test_no_module_imports_another_modules_private_names(folder):
    assert _private_imports(folder) == []
