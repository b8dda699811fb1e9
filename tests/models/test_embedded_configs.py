"""The embedded models' architectures recorded as data (`Embedded.config`) are the real ones, so the
random-weight stand-ins the GPU check makes without the wheels (`bench.shapes`) have their shapes."""
from __future__ import annotations

import pytest

from report_builder.bench.shapes import SHAPES, stand_in_config
from report_builder.models.embedded import EMBEDDED

RECORDED = [e for e in EMBEDDED.values() if e.config]


def _value(config, key):
    if key == "rope_theta":
        params = getattr(config, "rope_parameters", None) or {}
        return params.get("rope_theta", getattr(config, "rope_theta", None))
    return getattr(config, key)


@pytest.mark.parametrize("e", RECORDED, ids=[e.name for e in RECORDED])
def test_recorded_config_is_the_real_one(e):
    from report_builder.models.loading import config_and_tokenizer

    if not e.installed():
        pytest.skip(f"{e.distribution} is not installed")
    real, _ = config_and_tokenizer(e.name)
    assert real.model_type == e.config["model_type"]
    for key, value in e.config.items():
        if key in ("model_type", "architectures"):
            continue
        got = _value(real, key)
        assert got == pytest.approx(value), (e.name, key, got, value)


def test_every_recorded_architecture_is_a_bench_shape():
    assert {e.name for e in RECORDED} <= set(SHAPES) and len(RECORDED) >= 2
    for e in RECORDED:
        family, over = stand_in_config(e)
        assert SHAPES[e.name][:2] == (family, over) and "model_type" not in over
    assert SHAPES["llama-small"][1]["max_position_embeddings"] >= 4096  # the GPU check's n = 4096
