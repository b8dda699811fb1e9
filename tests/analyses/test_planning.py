"""Planning and executing analyses: order, keys, dependencies, no weights while planning, custom executors."""
from __future__ import annotations

import pickle

import pytest

from report_builder import api
from report_builder.analyses import planning, registry
from report_builder.config import from_dict
from report_builder.models import loading

MINILM = {"name": "MiniLM-L6", "source": "minilm", "role": "primary_encoder"}


def _cfg(tmp_path, models=(MINILM,)):
    return from_dict({"models": list(models),
                      "datasets": [{"id": "wiki", "n": 2, "k24_n": 1}, {"id": "sentiment-sample", "n": 2}],
                      "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")})


@pytest.fixture
def no_weights(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("planning must not load model weights")

    monkeypatch.setattr(loading, "load", refuse)


def test_plan_order_keys_and_needs(tmp_path, no_weights):
    plan = planning.plan(_cfg(tmp_path))
    order = [(t.analysis, t.subject.dataset.id if t.subject.dataset else None) for t in plan.tasks]
    model_ids = [a.id for a in registry.ANALYSES if a.scope == "model"]
    assert order[:len(model_ids)] == [(a, None) for a in model_ids]
    assert [d for _, d in order[len(model_ids):]] == sorted([d for _, d in order[len(model_ids):]],
                                                             key=["wiki", "sentiment-sample"].index)
    assert ("k24_examples", "wiki") in order and ("k24_examples", "sentiment-sample") not in order
    assert len({t.key for t in plan.tasks}) == len(plan.tasks)
    by_key = {t.key: t for t in plan.tasks}
    for t in plan.tasks:
        for need, key in t.needs:
            dep = by_key[key]
            assert dep.analysis == need and dep.subject == t.subject
            assert plan.tasks.index(dep) < plan.tasks.index(t)


def test_task_size_and_mask_rate_follow_the_adapter(tmp_path, no_weights):
    plan = planning.plan(_cfg(tmp_path))
    t = {(x.analysis, x.subject.dataset.id if x.subject.dataset else None): x for x in plan.tasks}
    assert not t[("architecture", None)].subject.causal
    assert t[("k21_mixing", "wiki")].size == 2 and t[("k24_scopes", "wiki")].size == 1
    assert t[("architecture", None)].size == 0
    assert t[("k21_mixing", "wiki")].params["mask_rate"] == 0.12  # an encoder is masked


def test_tasks_are_plain_data(tmp_path, no_weights):
    plan = planning.plan(_cfg(tmp_path))
    back = pickle.loads(pickle.dumps(plan.tasks))
    assert back == plan.tasks


def test_analyze_runs_through_any_executor(tmp_path, no_weights):
    """A custom executor gets the whole plan; api.analyze assembles whatever it returns (here: nothing new)."""
    seen = []

    class Recording:
        def execute(self, plan):
            seen.extend(plan.tasks)
            return iter(())

    rep = api.analyze(_cfg(tmp_path), log=lambda *_: None, progress=False, executor=Recording())
    assert [t.analysis for t in seen[:3]] == [a.id for a in registry.ANALYSES if a.scope == "model"]
    assert rep.computed == [] and rep.reused == [] and rep.entries == []


def test_an_n_beyond_the_set_is_said_once(tmp_path, no_weights, caplog):
    """Before: an entry's n larger than its set was cut to the set's size without a word."""
    from report_builder.data import load_entry

    cfg = from_dict({"models": [MINILM], "datasets": [{"id": "wiki", "n": 2, "k24_n": 1},
                                                       {"id": "sentiment-sample", "n": 100_000, "k24_n": 1}],
                     "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")})
    with caplog.at_level("WARNING", logger="report_builder"):
        plan = planning.plan(cfg)
        load_entry(cfg.datasets[1])  # another reader of the entry says nothing more
    have = len(plan.sets["sentiment-sample"].items)
    said = [r.getMessage() for r in caplog.records if "n is" in r.getMessage()]
    assert said == [f"dataset 'sentiment-sample': n is 100000 but the set holds {have} items; all {have} are used "
                    f"(set n: {have} or less to silence this)"]
