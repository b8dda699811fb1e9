"""Contract of every registered analysis (parametrised from `analyses.registry`), on tiny saved models.

One plan over a tiny post-LN encoder and a tiny pre-LN causal model on two small datasets runs
through the `LocalExecutor`; every analysis must then return exactly its declared tables, with the
columns of `schema.TABLES`, under the cache key of its declared parameters.
"""
from __future__ import annotations

import json

import pytest

from report_builder import schema
from report_builder.analyses import planning, registry
from report_builder.cache import Cache, result_key
from report_builder.config import from_dict
from report_builder.executors.local import LocalExecutor
from tests.tiny_models import save_tiny

# the configuration values every analysis' key must name (a change to any must reach the key)
BASE = {"model", "fingerprint", "dtype"}
DATA = BASE | {"dataset", "dataset_hash", "max_length"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contract")
    cfg = from_dict({
        "models": [{"name": "enc", "source": str(save_tiny("bert", tmp / "enc")), "role": "primary_encoder"},
                   {"name": "dec", "source": str(save_tiny("llama", tmp / "dec")), "role": "primary_causal"}],
        "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 24},
                     {"id": "sentiment-sample", "n": 2, "k24_n": 1, "max_length": 24}],
        "k24": {"top_k": 3, "examples": 2},
        "cache_dir": str(tmp / "cache"), "out_dir": str(tmp / "site"),
    })
    plan = planning.plan(cfg)
    results = list(LocalExecutor(Cache(cfg.cache_dir), log=lambda *_: None, progress=False).execute(plan))
    return cfg, plan, results


def test_registry_ids_are_unique_and_versions_listed():
    assert len({a.id for a in registry.ANALYSES}) == len(registry.ANALYSES)
    assert registry.versions() == {a.id: a.version for a in registry.ANALYSES}


@pytest.mark.parametrize("analysis", registry.ANALYSES, ids=lambda a: a.id)
def test_analysis_contract(analysis, run):
    cfg, plan, results = run
    mine = [r for r in results if r.task.analysis == analysis.id]
    per = {"model": len(cfg.models), "dataset": len(cfg.models) * len(cfg.datasets), "first_dataset": len(cfg.models)}
    assert len(mine) == per[analysis.scope]
    for r in mine:
        t = r.task
        assert t.key == r.entry.meta["key"] == result_key(analysis.id, analysis.version, t.params)
        assert set(t.params) >= (BASE if analysis.scope == "model" else DATA)
        json.dumps(t.params)  # canonical JSON: the cache key must be serialisable
        assert set(r.entry.tables) == set(analysis.tables)
        for name, df in r.entry.tables.items():
            if name in schema.TABLES:
                cols = list(df.columns)
                # the models table keeps the adapter's fact order in the cache (columns are selected by name)
                assert (sorted(cols) if name == "models" else cols) == (
                    sorted(schema.TABLES[name]) if name == "models" else schema.TABLES[name]), (analysis.id, name)
        if "recon_errors" in r.entry.tables:
            assert (r.entry.tables["recon_errors"].max_rel_error <= schema.ERROR_BOUND).all()
        assert t.size >= 0


def test_tables_are_identical_when_reused(run):
    cfg, plan, results = run
    again = list(LocalExecutor(Cache(cfg.cache_dir), log=lambda *_: None, progress=False).execute(plan))
    assert all(r.reused for r in again)
    for a, b in zip(results, again):
        assert a.task == b.task
        for name, df in a.entry.tables.items():
            assert df.equals(b.entry.tables[name]), (a.task.label, name)
