"""Hub models resolve through the standard HF cache with a pinned `revision:`; `--data-dir` fills dataset
paths (fast, in-process; the end-to-end paper-preset build is tests/test_paper_preset.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from report_builder import config as C
from report_builder.data import load_entry
from report_builder.errors import DataError, ReportBuilderError
from tests import paper_standins


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hub")
    revs = paper_standins.build_hub_cache(tmp / "hub", {"gpt2": "gpt2"})
    # a second revision of gpt2 on a branch, as `revision: v2` would find it after a download
    repo = tmp / "hub" / "models--gpt2"
    main = revs["gpt2"]
    other = "1" * 40
    (repo / "snapshots" / other).symlink_to(repo / "snapshots" / main, target_is_directory=True)
    (repo / "refs" / "v2").write_text(other)
    return tmp / "hub", main, other


def test_revision_resolves_from_cache(hub, monkeypatch):
    from huggingface_hub import constants

    from report_builder.models import loading, sources

    path, main, other = hub
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(path))
    assert sources.hub_snapshot("gpt2") == main
    assert sources.hub_snapshot("gpt2", "v2") == other
    assert sources.hub_snapshot("gpt2", other) == other
    assert sources.hub_snapshot("not-downloaded-model") is None
    lm = loading.load("gpt2", revision="v2")
    assert lm.fingerprint == loading.fingerprint("gpt2", "v2")
    with pytest.raises(ReportBuilderError, match="HF_HUB_OFFLINE=1"):
        loading.fingerprint("gpt2", "no-such-branch")
    with pytest.raises(ReportBuilderError, match="hub ids only"):
        loading.fingerprint("minilm", "main")


def test_revision_config_key():
    cfg = C.from_dict({"models": [{"name": "g", "source": "gpt2", "role": "primary_causal", "revision": "v2"}],
                       "datasets": [{"id": "wiki"}]})
    assert cfg.models[0].revision == "v2" and cfg.to_dict()["models"][0]["revision"] == "v2"


def test_data_dir_fills_paths(tmp_path):
    data = paper_standins.write_data_dir(tmp_path / "data", n=3)
    cfg = C.from_dict({"preset": "paper", "data_dir": str(data)})
    sets = {d.id: load_entry(d, cfg.data_dir) for d in cfg.datasets if d.id != "wiki"}
    assert {k: len(v) for k, v in sets.items()} == {"sst2": 3, "mnli": 3, "conll2003": 3}
    assert sets["sst2"].datasheet["source"].startswith("data_dir: SST-2/dev.tsv (sha256 ")
    assert str(data) not in str(sets["sst2"].datasheet)  # no local path published
    # an explicit path wins over data_dir
    own = tmp_path / "own.tsv"
    own.write_text("sentence\tlabel\nOne sentence .\t1\n")
    assert len(load_entry(C.DatasetConfig(id="sst2", path=str(own)), str(data))) == 1


def test_data_dir_missing_folder_names_the_layout(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *a, **k):
        if name == "datasets":
            raise ImportError("no datasets")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(DataError, match=r"DIR/MNLI/dev_matched\.tsv"):
        load_entry(C.DatasetConfig(id="mnli"), str(tmp_path))
