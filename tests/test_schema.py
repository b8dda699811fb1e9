"""The shared vocabulary (report_builder.schema) is consistent with itself and torch-free."""
import subprocess
import sys

import pytest

from report_builder import schema


@pytest.mark.parametrize("lay", schema.LAYOUTS, ids=lambda lay: lay.id)
def test_layout_rows_are_consistent(lay):
    assert len(lay.components) == len(lay.scopes) - 1
    assert lay.whole_layer == lay.scopes[-1]
    assert lay.ff_input in lay.checks and lay.ff_after == lay.scope_after("FF")
    if lay.ff_input in lay.scopes:  # sequential: FF reads a scope of the residual stream
        assert lay.ff_before == lay.ff_input
        assert lay.ff_scopes == lay.scopes[lay.scopes.index(lay.ff_input) + 1:]
        assert lay.attn_res in lay.checks and lay.checks.index(lay.attn_res) < lay.checks.index(lay.ff_input)
        assert set(lay.scopes) <= set(lay.checks)
    else:  # parallel: FF reads its own norm of the layer input, beside the attention block
        assert lay.ff_before == lay.scopes[0] == lay.attn_res and lay.ff_scopes == lay.scopes[1:]
        assert "ATTNRESLN-N" not in lay.k21_points
    assert lay.checks[-1] == lay.whole_layer
    assert set(lay.scope_labels) == set(lay.scopes)
    assert lay.pre_ff_checks[-1] == lay.ff_input
    norms = [lay.blocks[k] for k in lay.ln_positions]
    assert norms[0] == "LN1" and any(b.startswith("LN2") for b in norms)
    assert schema.layout(lay.id) is lay
    marks = lay.scope_block_indexes()  # each scope is read after a block, in forward order
    assert len(marks) == len(lay.scopes) and list(marks) == sorted(set(marks)) and marks[-1] == len(lay.blocks) - 1
    assert lay.blocks[marks[0]] in ("RES", "LN1")  # ATB ends with the residual addition (post-LN: its norm)
    assert schema.layout_for_scopes(lay.scopes) is lay
    assert len({lay, schema.layout(lay.id)}) == 1  # hashable (used as a key)


def test_unknown_layout_names_the_known_ones():
    with pytest.raises(KeyError, match="post, pre"):
        schema.layout("sandwich?")
    assert schema.layout_for_scopes(["ATB"]) is None


def test_tables_use_the_declared_methods():
    assert schema.TABLES["k21_tokens"][-5:] == list(schema.K21_METHODS)
    assert schema.ERROR_BOUND == 1e-4


def test_schema_imports_nothing_heavy():
    code = ("import sys, report_builder.schema; "
            "print(sorted(m for m in ('torch', 'pandas', 'altair', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
