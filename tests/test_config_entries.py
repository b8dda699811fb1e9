"""`config_entries`: the models: and datasets: entries and their checks, moved out of `config` (then at its
500-line limit) with every message unchanged; `config` re-exports what callers import from it."""

from __future__ import annotations

import pytest

from report_builder import config, config_entries
from report_builder.config import ConfigError, from_dict


def test_config_re_exports_the_entries():
    for name in ("ROLES", "ModelConfig", "DatasetConfig", "COUNT_MAX"):
        assert getattr(config, name) is getattr(config_entries, name)


def test_config_keeps_room_under_the_module_limit():
    lines = len(open(config.__file__, encoding="utf-8").read().splitlines())
    assert lines <= 450, f"config.py has {lines} lines: move a concept out before the 500-line limit"


M = [{"name": "a", "source": "minilm", "role": "primary_encoder"}]
D = [{"id": "wiki", "n": 2}]


@pytest.mark.parametrize("models, datasets, message", [
    ([{"name": "a", "source": "minilm", "role": "boss"}], D,
     "models[0].role: 'boss' is not one of primary_encoder, primary_causal, variant, seed_group"),
    ([*M, {"name": "b", "source": "minilm", "role": "primary_encoder"}], D,
     "models: 'a', 'b' all have role primary_encoder; a report has one (give the others role variant)"),
    ([*M, {"name": "a", "source": "smollm2", "role": "variant"}], D, "models: model names must be unique"),
    ([{"name": " ", "source": "minilm"}], D, "models[0].name: must not be empty"),
    ([{"name": "a", "source": ""}], D, "models[0].source: must not be empty"),
    (M, [*D, {"id": "wiki"}], "datasets[0].id: 'wiki' is listed twice; dataset ids must be unique"),
    (M, [{"id": "wiki", "max_length": 3}], "datasets[0].max_length: expected an integer >= 4 and <= 2147483647, got 3"),
    (M, [{"id": "wiki", "k24_n": 0}], "datasets[0].k24_n: expected an integer >= 1 and <= 2147483647, got 0"),
])
def test_entry_messages_are_unchanged(models, datasets, message):
    with pytest.raises(ConfigError) as e:
        from_dict({"models": models, "datasets": datasets})
    assert str(e.value) == message
