"""`--set key=value` overrides and the `env` report (unit level; the CLI tests run them end to end)."""
from __future__ import annotations

import pytest

from report_builder import envinfo
from report_builder.config import load_config
from report_builder.errors import ConfigError
from report_builder.overrides import apply_assignments, parse_assignment, with_assignments


def test_parse_assignment_reads_yaml_values():
    assert parse_assignment("k24.top_k=5") == (["k24", "top_k"], 5)
    assert parse_assignment("datasets[0].n=16") == (["datasets", 0, "n"], 16)
    assert parse_assignment("k24.include_special=false") == (["k24", "include_special"], False)
    assert parse_assignment("threads=null") == (["threads"], None)
    assert parse_assignment("figures=[k21-tab2, k24-maps]") == (["figures"], ["k21-tab2", "k24-maps"])
    assert parse_assignment("site_url=https://x.org/a=b") == (["site_url"], "https://x.org/a=b")
    for bad in ("nokey", "=5", "a..b=1"):
        with pytest.raises(ConfigError):
            parse_assignment(bad)


def test_overrides_reach_the_validated_config():
    cfg = load_config(preset="smoke")
    new = with_assignments(cfg, ["k24.top_k=5", "datasets.1.n=3", "device=cuda", "ig.steps=8"])
    assert (new.k24.top_k, new.datasets[1].n, new.device, new.ig.steps) == (5, 3, "cuda", 8)
    assert new.datasets[0] == cfg.datasets[0] and new.models == cfg.models and new.preset == "smoke"
    assert with_assignments(cfg, []) is cfg
    assert apply_assignments({"a": {"b": 1}}, ["a.c=2"]) == {"a": {"b": 1, "c": 2}}


@pytest.mark.parametrize("item, message", [
    ("k24.top_kk=5", "k24.top_kk: unknown key"),
    ("k24.top_k=many", "k24.top_k: expected an integer"),
    ("datasets.7.n=1", "datasets.7 needs an index 0..1"),
    ("device.x=1", "device is not a mapping"),
])
def test_bad_overrides_name_the_key(item, message):
    with pytest.raises(ConfigError, match=message):
        with_assignments(load_config(preset="smoke"), [item])


def test_env_reports_versions_device_and_cache_sizes(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "k21_mixing" / "abc").mkdir(parents=True)
    (cache / "k21_mixing" / "abc" / "t.parquet").write_bytes(b"x" * 3000)
    (cache / "last_build.json").write_text("{}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "rb"))
    info = envinfo.collect(cache_dir=cache, out_dir=tmp_path / "site")
    assert info["versions"]["report_builder"] and info["versions"]["pandas"]
    assert info["device"]["default_device"] in ("cpu", "cuda")
    assert info["caches"]["results"]["bytes"] == 3002 and info["caches"]["results"]["files"] == 2
    assert info["caches"]["huggingface hub"] == {"path": str(tmp_path / "hub"), "exists": False, "bytes": 0,
                                                 "size": "0 B", "files": 0}
    assert info["embedded_models"]["minilm"] is True
    text = envinfo.format_env(info)
    assert "2.9 KiB in 2 files" in text and str(cache) in text and "cuda" in text


def test_env_names_the_same_model_cache_as_the_loader(monkeypatch, tmp_path):
    from report_builder.models.convert import models_dir

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path))
    assert envinfo._model_cache() / "models" == models_dir()
    monkeypatch.delenv("REPORT_BUILDER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert envinfo._model_cache() / "models" == models_dir()


def test_human_size():
    assert [envinfo.human_size(n) for n in (0, 1023, 1536, 3 << 30)] == ["0 B", "1023 B", "1.5 KiB", "3.0 GiB"]


def test_env_counts_the_user_cache_once_and_names_what_it_holds(tmp_path, monkeypatch):
    """The default results cache lies inside the user cache: `env` showed the whole user cache as
    "converted models" (results included, counted twice); the user cache's line now counts what is not the
    results cache and says what it holds."""
    user = tmp_path / "rb"
    (user / "results" / "k21_mixing" / "abc").mkdir(parents=True)
    (user / "results" / "k21_mixing" / "abc" / "t.parquet").write_bytes(b"x" * 3000)
    (user / "models" / "m").mkdir(parents=True)
    (user / "models" / "m" / "w.safetensors").write_bytes(b"w" * 500)
    (user / "freq").mkdir()
    (user / "freq" / "f.json").write_bytes(b"f" * 20)
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(user))
    info = envinfo.collect(cache_dir=user / "results", out_dir=tmp_path / "site")
    assert info["caches"]["results"]["bytes"] == 3000
    assert "converted models" not in info["caches"]
    u = info["caches"]["user cache"]
    assert (u["bytes"], u["files"], u["path"]) == (520, 2, str(user))
    text = envinfo.format_env(info)
    assert "converted models, evaluation sets" in text and "the results cache inside it counted above" in text
