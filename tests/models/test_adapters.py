"""Contract of every registered architecture adapter (parametrised from `models.registry`)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from report_builder import schema
from report_builder.errors import UnsupportedArchitecture
from report_builder.models import registry
from report_builder.models.capture import forward_capture
from tests.tiny_models import FAMILIES, tiny

ADAPTERS = registry.ADAPTERS
# the tiny random models of tests/tiny_models.py, by the adapter that serves them
TINY_BY_FAMILY = {a.family: [k for k in FAMILIES if k in a.model_types] for a in ADAPTERS}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.family)
def test_adapter_declares_a_known_layout_and_its_check_points(adapter):
    assert adapter.layout in schema.LAYOUTS
    assert set(adapter.probes) == set(adapter.layout.checks)
    assert isinstance(adapter.causal, bool)
    assert adapter.class_names and adapter.model_types
    for name in adapter.class_names:
        assert registry.for_class_name(name) is adapter
    for t in adapter.model_types:
        assert registry.for_model_type(t) is adapter


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.family)
def test_every_family_has_a_tiny_model(adapter):
    assert TINY_BY_FAMILY[adapter.family], f"add a tiny {adapter.family} model to tests/tiny_models.py"


@pytest.mark.parametrize("kind", FAMILIES)
def test_tiny_model_reconstructs_every_check_point_within_the_bound(kind):
    lm = tiny(kind)
    assert lm.adapter.family in TINY_BY_FAMILY and kind in TINY_BY_FAMILY[lm.adapter.family]
    assert lm.causal == lm.adapter.causal
    facts = lm.facts()
    assert set(facts) == set(schema.MODELS) and facts["ln_position"] == lm.adapter.layout.id
    ids = torch.tensor([[5, 17, 33, 8, 61, 2]])
    caps = forward_capture(lm.model, lm.adapter, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    from report_builder.decompose.layer import decompose_layer

    for layer, cap in enumerate(caps):
        lw = lm.layer_weights(layer)
        assert lw.layout is lm.adapter.layout
        r = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, refs={k: v[0] for k, v in cap.refs.items()})
        assert set(r.errors) == set(lw.layout.checks)
        assert max(r.errors.values()) <= schema.ERROR_BOUND, (kind, layer, r.errors)


def test_unknown_model_type_names_the_supported_ones():
    with pytest.raises(UnsupportedArchitecture, match="no adapter.*bert"):
        registry.for_model_type("opt")


def test_adapter_base_module_imports_no_family():
    code = ("import sys, report_builder.models.adapter; "
            "print([m for m in ('bert', 'gpt2', 'llama') if 'report_builder.models.' + m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
