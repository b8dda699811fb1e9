"""Sequence shards: a build split into shards gives the unsharded build's tables byte for byte, in any
completion order, and a resumed build recomputes only the missing shards (tiny models, few sequences)."""
from __future__ import annotations

import hashlib
import io
import json
import random
import shutil

import pandas as pd
import pytest

from report_builder import api, cli
from report_builder.analyses import planning, registry
from report_builder.analyses.base import shard_id
from report_builder.cache import Cache, frame_hash
from report_builder.config import from_dict
from report_builder.executors.base import run_task
from report_builder.executors.local import LocalExecutor
from report_builder.errors import ConfigError
from tests.tiny_models import save_tiny

N_WIKI = 5


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("shard-models")
    return save_tiny("bert", base / "bert"), save_tiny("llama", base / "llama")


def _cfg(tmp, dirs, name: str, shard_size: int | None = None):
    return from_dict({
        "models": [{"name": "enc", "source": str(dirs[0]), "role": "primary_encoder"},
                   {"name": "dec", "source": str(dirs[1])}],
        "datasets": [{"id": "wiki", "n": N_WIKI, "max_length": 24},
                     {"id": "sentiment-sample", "n": 3, "k24_n": 2, "max_length": 24}],
        "k24": {"top_k": 3, "examples": 1},
        "shard_size": shard_size, "threads": 1,
        "cache_dir": str(tmp / name / "cache"), "out_dir": str(tmp / name / "site"),
    })


def _analyze(cfg):
    return api.analyze(cfg, log=lambda *_: None, progress=False)


def _digest(tables: dict[str, pd.DataFrame]) -> dict[str, tuple[str, str]]:
    """Each table's content hash and the sha256 of its parquet bytes."""
    out = {}
    for name, df in sorted(tables.items()):
        buf = io.BytesIO()
        df.reset_index(drop=True).to_parquet(buf, index=False)
        out[name] = (frame_hash(df), hashlib.sha256(buf.getvalue()).hexdigest())
    return out


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory, tiny_dirs):
    tmp = tmp_path_factory.mktemp("unsharded")
    rep = _analyze(_cfg(tmp, tiny_dirs, "whole"))
    return rep, _digest(rep.tables)


@pytest.mark.parametrize("size", [1, 2, 3, 50])
def test_sharded_build_gives_the_unsharded_tables_byte_for_byte(tmp_path, tiny_dirs, unsharded, size):
    rep0, want = unsharded
    cfg = _cfg(tmp_path, tiny_dirs, "sharded", size)
    plan = planning.plan(cfg)
    shards = [t for t in plan.tasks if t.partial]
    if size >= N_WIKI:  # no task decomposes more sequences than one shard holds: the unsharded plan
        assert shards == [] and [t.key for t in plan.tasks] == [t.key for t in planning.plan(_cfg(tmp_path, tiny_dirs, "x")).tasks]
        return
    assert {t.base for t in shards} == {"k21_mixing", "k21_frequency", "k24_scopes"}
    assert not any(t.base == "k21_frequency" and t.subject.causal for t in shards)  # reuses the mixing pass
    for t in plan.tasks:
        if t.reduce:
            ranges = [s.shard for s in shards if (s.analysis, s.key) in t.needs]
            assert ranges == planning.shard_ranges(registry.get(t.base).shard.items(t.subject), size)
    rep = _analyze(cfg)
    assert _digest(rep.tables) == want
    assert rep.entries == rep0.entries  # the final entries are the unsharded build's (same keys)
    assert sum(":" in c for c in rep.computed) == len(shards)


def test_reduce_ignores_the_order_shards_finish_in(tmp_path, tiny_dirs, unsharded):
    _, want = unsharded
    cfg = _cfg(tmp_path, tiny_dirs, "shuffled", 2)
    plan = planning.plan(cfg)
    cache = Cache(cfg.cache_dir)
    ex = LocalExecutor(cache, log=lambda *_: None, progress=False)
    shards = [t for t in plan.tasks if t.partial]
    random.Random(3).shuffle(shards)
    for t in shards:  # every shard first, in a shuffled order, then the plan in order (shards reused)
        ex._model_name, ex._lm = t.subject.model.name, None
        run_task(t, cache, plan.sets, lambda s=t.subject: ex.model(s), show_progress=False)
    ex._model_name = None
    results = list(ex.execute(plan))
    assert all(r.reused for r in results if r.task.partial)
    final = planning.final_results(results)
    from report_builder.analyses import assemble

    assert _digest(assemble.concat_tables((r.entry.tables for r in final), cfg, plan.sets)) == want
    # and a reduce given its partials in any order gives the same tables
    for t in (t for t in plan.tasks if t.reduce):
        a = registry.get(t.base)
        parts = [cache.get(n, k).tables for n, k in t.needs if n == shard_id(t.base)]
        got = a.shard.reduce(t.subject, list(reversed(parts)))
        assert {k: frame_hash(v) for k, v in got.items()} == {k: frame_hash(v) for k, v in a.shard.reduce(t.subject, parts).items()}


def test_resume_recomputes_only_the_missing_shard(tmp_path, tiny_dirs, capsys):
    cfg = _cfg(tmp_path, tiny_dirs, "resume", 2)
    first = _analyze(cfg)
    cache = Cache(cfg.cache_dir)
    assert not any(t.partial for t in planning.plan(cfg, cache).tasks)  # every final entry is cached: no shard
    final = next(t for t in planning.plan(_cfg(tmp_path, tiny_dirs, "resume", None)).tasks
                 if t.analysis == "k24_scopes" and t.subject.model.name == "enc" and t.subject.dataset.id == "wiki")
    shutil.rmtree(cache.path("k24_scopes", final.key))
    plan = planning.plan(cfg, cache)
    shards = [t for t in plan.tasks if t.partial]
    assert [t.shard for t in shards] == [(0, 2), (2, 4), (4, 5)] and all(t.base == "k24_scopes" for t in shards)
    shutil.rmtree(cache.path(shards[1].analysis, shards[1].key))
    # the plan shows the layout: a shard's range, the reduce's count, what is cached
    assert cli.main(["plan", "--cache", cfg.cache_dir, "--shard-size", "2", "--json", "--config",
                     _write(tmp_path, cfg)]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["tasks"] if r["shard"] or r["reduces"]]
    assert [(r["analysis"], r["shard"], r["reduces"], r["cached"]) for r in rows] == [
        ("k24_scopes", [0, 2], 0, True), ("k24_scopes", [2, 4], 0, False), ("k24_scopes", [4, 5], 0, True),
        ("k24_scopes", None, 3, False)]
    assert cli.main(["plan", "--cache", cfg.cache_dir, "--shard-size", "2", "--config", _write(tmp_path, cfg)]) == 0
    out = capsys.readouterr().out
    total = next(ln for ln in out.splitlines() if ln.startswith("total: "))
    assert " 2:4 " in out and "reduce 3" in out and "(3 shards" in total
    again = _analyze(cfg)
    assert again.computed == ["enc · wiki [k24_scopes 2:4]", "enc · wiki [k24_scopes]"]
    assert _digest(again.tables) == _digest(first.tables)


def _write(tmp_path, cfg) -> str:
    import yaml

    d = cfg.to_dict()
    d.pop("preset", None)
    p = tmp_path / "config.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def test_shard_size_is_validated(tmp_path, tiny_dirs):
    with pytest.raises(ConfigError, match="shard_size"):
        _cfg(tmp_path, tiny_dirs, "bad", 0)


def test_frequency_waits_for_mixing_only_where_it_reads_it(tmp_path, tiny_dirs):
    """`k21_frequency` reads the mixing pass only for a causal model (an unmasked pass it reuses): there
    its task, or its reduce and shards, needs `k21_mixing`; an encoder's needs nothing, so an executor
    runs it beside the mixing shards instead of after their reduce. Cache keys do not change."""
    for shard_size in (None, 2):
        plan = planning.plan(_cfg(tmp_path, tiny_dirs, f"plan{shard_size}", shard_size))
        freq = [t for t in plan.tasks if t.analysis in ("k21_frequency", shard_id("k21_frequency"))]
        assert freq
        for t in freq:
            mixing = [a for a, _ in t.needs if a in ("k21_mixing", shard_id("k21_mixing"))]
            if t.subject.model.name == "dec":  # causal: the final mixing entry, never its shards
                assert mixing == ["k21_mixing"], (t.label, t.needs)
            else:
                assert mixing == [], (t.label, t.needs)
