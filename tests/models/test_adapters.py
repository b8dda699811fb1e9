"""Contract of every registered architecture adapter (parametrised from `models.registry`).

Exactness against the HF tensors per tiny model lives in tests/decompose/test_layer.py (the first
five families) and tests/test_layouts.py (the layouts and families of SPEC §7); this suite checks
the facts every adapter must declare consistently.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from report_builder import schema
from report_builder.errors import UnsupportedArchitecture
from report_builder.models import registry
from tests.tiny_models import CLASS_OF, TINY, tiny


@pytest.mark.parametrize("adapter", registry.ADAPTERS, ids=lambda a: a.family)
def test_adapter_declares_a_known_layout_and_is_found_by_its_names(adapter):
    assert adapter.layout in schema.LAYOUTS
    assert isinstance(adapter.causal, bool)
    assert adapter.class_names and adapter.model_types
    for name in adapter.class_names:
        assert registry.for_class_name(name) is adapter
    for t in adapter.model_types:
        assert registry.for_model_type(t) is adapter


@pytest.mark.parametrize("adapter", registry.ADAPTERS, ids=lambda a: a.family)
def test_every_family_has_a_tiny_model(adapter):
    assert any(registry.for_class_name(CLASS_OF[k]).family == adapter.family for k in TINY), (
        f"add a tiny {adapter.family} model to tests/tiny_models.py")


def test_layout_families_are_derived_from_every_variant_of_every_adapter():
    families = registry.layout_families()
    assert list(families) == list(schema.LAYOUTS)
    for lay, names in families.items():
        assert names, f"no family uses the {lay.label} layout: add an adapter or drop the layout"
    for a in registry.ADAPTERS:
        assert {v.family for v in a.variants} == {a.family}
        for v in a.variants:
            assert a.family in families[v.layout]
    assert families[schema.POST_LN][:2] == ("bert", "distilbert") and "opt" in families[schema.POST_LN]


@pytest.mark.parametrize("lay", schema.LAYOUTS, ids=lambda lay: lay.id)
def test_every_layout_has_a_tiny_model(lay):
    """Each layout is checked for exactness on at least one tiny model (read from its config alone)."""
    import transformers as tr

    def layout_of(t):
        return registry.for_config(getattr(tr, t.config)(**t.kwargs)).layout

    assert any(layout_of(t) == lay for t in TINY.values()), f"add a tiny model of the {lay.label} layout"


@pytest.mark.parametrize("kind", TINY)
def test_loaded_model_facts_follow_its_adapter(kind):
    lm = tiny(kind)
    assert lm.causal == lm.adapter.causal
    assert set(lm.adapter.probes) == set(lm.adapter.layout.checks)
    assert lm.layer_weights(0).layout is lm.adapter.layout
    facts = lm.facts()
    assert set(facts) == set(schema.MODELS) and facts["ln_position"] == lm.adapter.layout.id


def test_unknown_model_type_names_the_supported_ones():
    with pytest.raises(UnsupportedArchitecture, match="no adapter.*bert"):
        registry.for_model_type("no-such-type")


def test_adapter_base_module_imports_no_family():
    code = ("import sys, report_builder.models.adapter; "
            "print([m for m in sys.modules if m.startswith('report_builder.models.') "
            "and m.rsplit('.', 1)[1] in " + repr(registry.FAMILIES) + "])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_gemma_is_decomposed_with_the_activation_its_mlp_applies():
    """A Gemma (v1) config carrying a ``hidden_activation`` beside ``hidden_act`` was decomposed with the former while
    GemmaMLP applies the latter: `check` said 0.30 at ATBLNFF (bound 1e-4)."""
    import transformers as tr

    from report_builder.engine import Tokens, decompose_sequences
    from report_builder.models.loading import from_model

    cfg = tr.GemmaConfig(**TINY["gemma"].kwargs, hidden_act="gelu_pytorch_tanh", attn_implementation="eager")
    cfg.hidden_activation = "silu"  # stale: GemmaMLP reads hidden_act
    lm = from_model(tr.GemmaModel(cfg), None, name="gemma")
    assert lm.facts()["activation"] == "gelu_pytorch_tanh"
    for _, layer, r in decompose_sequences(lm, [Tokens(list(range(5, 17)))], maps=("ATBLNFF",)):
        assert max(r.errors.values()) <= 1e-5, (layer, r.errors)
