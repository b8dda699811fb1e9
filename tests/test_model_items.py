"""`--model NAME=SOURCE` of a configured model whose name holds ``=`` (a configuration accepts any text but
control characters): the item split at its first ``=`` and such a model could not be swapped."""
from __future__ import annotations

from report_builder.config import from_dict
from report_builder.overrides import split_model_items


def test_a_configured_name_holding_an_equals_sign_is_swapped_whole():
    cfg = from_dict({"models": [{"name": "run=1", "source": "minilm", "role": "primary_encoder"},
                                {"name": "run", "source": "smollm2", "role": "primary_causal"}],
                     "datasets": [{"id": "wiki"}]})
    assert split_model_items(["run=1=/ckpt/a"], cfg) == ({"run=1": "/ckpt/a"}, [])
    assert split_model_items(["run=/ckpt/b=c"], cfg) == ({"run": "/ckpt/b=c"}, [])
