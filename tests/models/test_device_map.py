"""Models larger than one device: a tiny model spread by a device map decomposes exactly as on one device.

There is no second GPU here, so the multi-device path runs on CPU the way accelerate runs an
offloaded model: layers kept "on disk" (read straight from the safetensors file) have meta
parameters and hooks that stream their weights in for each forward pass; the engine decomposes each
layer inside the forward pass on its execution device and materialises its weights again for that
(`placement.onloaded`). The results must be those of the single-device load.
"""
from __future__ import annotations

import pytest
import torch

from report_builder import config as config_mod
from report_builder.analyses.base import Subject
from report_builder.engine import Tokens, decompose_sequences
from report_builder.errors import ConfigError, ModelError, UsageError
from report_builder.models import device_plan, loading, placement
from report_builder.models.capture import capture_hooks
from tests.tiny_models import save_tiny

LAYERS = 4
MAPS = {
    "llama": {"embed_tokens": "cpu", "rotary_emb": "cpu", "layers.0": "cpu", "layers.1": "disk", "layers.2": "cpu",
              "layers.3": "disk", "norm": "disk"},
    "bert": {"embeddings": "disk", "encoder.layer.0": "cpu", "encoder.layer.1": "disk", "encoder.layer.2": "disk",
             "encoder.layer.3": "cpu", "pooler": "cpu"},
}
SEQS = [Tokens([1, 17, 230, 45, 9, 2]), Tokens([1, 301, 77, 2]), Tokens([1, 5, 6, 7, 8, 9, 10, 11, 2])]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return {k: save_tiny(k, tmp_path_factory.mktemp(k), layers=LAYERS) for k in MAPS}


def _results(lm, **kw):
    out = {}
    scopes = lm.adapter.layout.scopes
    for k, layer, r in decompose_sequences(lm, SEQS, maps=scopes, ratios=True, extras=True, **kw):
        out[(k, layer)] = r
    return out


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        ra, rb = a[key], b[key]
        for part in ("maps", "ratios", "sums", "extras", "bias"):
            da, db = getattr(ra, part), getattr(rb, part)
            assert da.keys() == db.keys(), (key, part)
            for name in da:
                assert db[name].device.type == "cpu"
                torch.testing.assert_close(db[name], da[name], rtol=0, atol=1e-6, equal_nan=True,
                                           msg=f"{key} {part} {name}")
        assert ra.errors.keys() == rb.errors.keys()
        assert max(rb.errors.values()) <= 1e-4


@pytest.mark.parametrize("kind", sorted(MAPS))
def test_multi_device_map_decomposes_exactly(saved, kind):
    one = loading.load(str(saved[kind]), name="one")
    spread = loading.load(str(saved[kind]), name="spread", device_map=MAPS[kind])
    p = spread.placement
    # the multi-device path is really taken: accelerate hooks, weights off the execution device
    assert one.placement is None and not placement.dispatched(one.model)
    assert placement.dispatched(spread.model)
    storage = tuple(MAPS[kind][k] for k in MAPS[kind] if ".layer" in f".{k}")
    assert p.layer_storage == storage and p.layer_devices == ("cpu",) * LAYERS
    assert p.offloaded == tuple(s == "disk" for s in storage)
    layers = spread.adapter.layers(spread.model)
    for k in range(LAYERS):
        on_meta = {q.device.type for q in layers[k].parameters()} == {"meta"}
        assert on_meta == p.offloaded[k]
        assert any(placement.is_offloaded(m) for m in layers[k].modules()) == p.offloaded[k]
    assert "disk" in p.describe() and spread.device.type == "cpu"

    want = _results(one)
    _assert_same(want, _results(spread))
    _assert_same(_results(one, batched=True, batch_size=2), _results(spread, batched=True, batch_size=2))
    # offloaded weights were materialised for the decomposition only: back on meta, not kept
    for k in range(LAYERS):
        assert ({q.device.type for q in layers[k].parameters()} == {"meta"}) == p.offloaded[k]
    assert not set(spread._weights) & {k for k in range(LAYERS) if p.offloaded[k] or
                                       (k + 1 < LAYERS and p.offloaded[k + 1])}
    assert torch.equal(spread.layer_weights(1).attn.w_o, one.layer_weights(1).attn.w_o)


def test_capture_streams_one_layer_at_a_time(saved):
    """With ``on_layer`` the forward pass never holds more than one layer's captured tensors."""
    lm = loading.load(str(saved["llama"]), name="spread", device_map=MAPS["llama"])
    held, box = [], {}

    def count(pos, c):
        live = [x for x in box["cap"].sink.caps if x is not None and x.x is not None]
        held.append(len(live) + 1)  # + the one handed over (already out of the sink)
        return pos

    with capture_hooks(lm.model, lm.adapter, on_layer=count) as cap:
        box["cap"] = cap
        out = cap.run({"input_ids": torch.tensor([SEQS[0].input_ids])})
    assert out == list(range(LAYERS)) and held == [1] * LAYERS


def test_auto_map_offloads_what_does_not_fit(saved):
    """``device_map: auto`` on a CPU with a small weights budget keeps the rest on disk, same results."""
    cfg = config_mod.replace(config_mod.Config(), device_map="auto", device_memory="1MB")
    opts = device_plan.placement_options(cfg)
    assert opts["device_map"] == "auto" and opts["device_memory"] == 10**6
    planned = device_plan.planned_placement(str(saved["llama"]), cfg)
    spread = loading.load(str(saved["llama"]), name="spread", **opts)
    assert spread.placement.layer_storage == planned.layer_storage
    assert "disk" in spread.placement.layer_storage
    _assert_same(_results(loading.load(str(saved["llama"]), name="one")), _results(spread))


def test_bad_maps_fail_in_one_line(saved):
    path = str(saved["llama"])
    with pytest.raises(ModelError, match="places no device.*embed_tokens") as e:
        loading.load(path, device_map={"layers": "cpu"})
    assert "\n" not in str(e.value)
    with pytest.raises(ModelError, match="'layers.0' -> 'gpu7' is not a device"):
        loading.load(path, device_map={**MAPS["llama"], "layers.0": "gpu7"})
    with pytest.raises(ModelError, match="not one of"):
        loading.load(path, device_map="everywhere")
    if not torch.cuda.is_available():  # refused before the map is made: this machine has no CUDA device
        with pytest.raises(UsageError, match="^device cuda: .*use device cpu here") as e:
            loading.load(path, device="cuda", device_map="auto")
        assert "\n" not in str(e.value)


def test_config_refuses_what_cannot_work():
    base = config_mod.Config()
    with pytest.raises(ConfigError, match="device_map: 'everywhere' is not one of"):
        config_mod.replace(base, device_map="everywhere")
    with pytest.raises(ConfigError, match="device_memory: applies to a device map only"):
        config_mod.replace(base, device_memory="4GiB")
    with pytest.raises(ConfigError, match="device_map: spreads over every visible GPU"):
        config_mod.replace(base, device="cuda:1", device_map="auto")
    with pytest.raises(ConfigError, match="device_memory: cannot read"):
        config_mod.replace(base, device_map="auto", device_memory="lots")


def test_cache_key_names_the_device_kind_only_off_the_cpu():
    from report_builder.config import ModelConfig

    mc = ModelConfig(name="m", source="minilm")
    cpu = config_mod.Config(models=(mc,))
    key = Subject(cpu, mc, "fp", False).base_params()
    assert key == {"model": "m", "fingerprint": "fp", "dtype": "float32"}  # every CPU key as it was
    spread = config_mod.replace(cpu, device_map="auto", device_memory="1MB")
    assert Subject(spread, mc, "fp", False).base_params() == key  # a map changes no result
    gpu = Subject(config_mod.replace(cpu, device="cuda:1"), mc, "fp", False).base_params()
    assert gpu == {**key, "device": "cuda", "tf32": bool(torch.backends.cuda.matmul.allow_tf32)}
    multi = config_mod.replace(cpu, device="cuda", device_map="balanced")
    assert Subject(multi, mc, "fp", False).base_params() == gpu


@pytest.mark.slow
def test_build_with_a_device_map_gives_the_same_tables_and_keys(tmp_path, saved):
    """Through the whole analysis pipeline: the same cache keys and byte-identical result tables."""
    import json

    from report_builder import api
    from report_builder.cache import Cache
    from report_builder.config import from_dict
    from tests.test_pipeline import small_config

    models = [{"name": "enc", "source": str(saved["bert"]), "role": "primary_encoder"},
              {"name": "dec", "source": str(saved["llama"]), "role": "primary_causal"}]
    one = small_config(tmp_path / "one", models)
    spread = {**small_config(tmp_path / "spread", models), "device_map": "auto", "device_memory": "1MB"}
    logs: list[str] = []
    a = api.analyze(from_dict(one), log=lambda *_: None, progress=False)
    b = api.analyze(from_dict(spread), log=logs.append, progress=False)
    assert a.entries == b.entries  # the same cache keys
    ca, cb = Cache(one["cache_dir"]), Cache(spread["cache_dir"])
    for analysis, key in a.entries:
        ma = json.loads((ca.path(analysis, key) / "meta.json").read_text())
        mb = json.loads((cb.path(analysis, key) / "meta.json").read_text())
        assert ma["tables"] == mb["tables"], analysis  # sha256 of every parquet file
    assert any("loaded dec" in line and "disk" in line for line in logs)
    assert set(b.provenance["device_map"]) == {"enc", "dec"} and a.provenance["device_map"] == {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run by tests/tools/gpu_check.sh)")
def test_gpu_map_decomposes_like_one_gpu(saved):
    """On a GPU machine: layers over the GPUs (two when there are), one kept in CPU memory and one on
    disk (both run on GPU 0): the results of the single-GPU load."""
    second = 1 if torch.cuda.device_count() > 1 else 0
    dmap = {"embed_tokens": 0, "rotary_emb": 0, "layers.0": 0, "layers.1": "cpu", "layers.2": second,
            "layers.3": "disk", "norm": second}
    one = loading.load(str(saved["llama"]), name="one", device="cuda")
    spread = loading.load(str(saved["llama"]), name="spread", device="cuda", device_map=dmap)
    p = spread.placement
    assert p.layer_devices == ("cuda:0", "cuda:0", f"cuda:{second}", "cuda:0")
    assert p.offloaded == (False, True, False, True) and placement.dispatched(spread.model)
    a, b = _results(one), _results(spread)
    assert a.keys() == b.keys()
    for key in a:
        for part in ("maps", "ratios", "sums", "extras"):
            for name, t in getattr(a[key], part).items():
                torch.testing.assert_close(getattr(b[key], part)[name], t, rtol=1e-5, atol=1e-5, equal_nan=True)
        assert max(b[key].errors.values()) <= 1e-4


def test_plan_shows_the_device_map_and_bad_setups_fail_in_one_line(saved, tmp_path, capsys):
    from report_builder import cli

    common = ["plan", "--model", str(saved["llama"]), "--set", 'datasets=[{"id": "wiki", "n": 2}]',
              "--cache", str(tmp_path / "cache")]
    assert cli.main(common + ["--device-map", "auto", "--device-memory", "1MB"]) == 0
    out = capsys.readouterr().out
    name = saved["llama"].name
    assert f"device map of {name} (auto): layers " in out and "disk -> cpu" in out
    if not torch.cuda.is_available():
        assert cli.main(common + ["--device", "cuda", "--device-map", "auto"]) == 4
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: device_map spreads a model over the GPUs") and "\n" not in err
    assert cli.main(common + ["--device-memory", "1GB"]) == 3
    assert capsys.readouterr().err.strip() == "error: device_memory: applies to a device map only; set device_map: auto"
