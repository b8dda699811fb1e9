"""The smoke preset's cache keys are those of the results already cached (golden file).

A changed key silently recomputes every cached result of that analysis. The golden keys were taken
from a smoke build made before analyses became registered units (then ``architecture`` went to
version 2 with its multipliers and licence columns); after an intended change (a new
parameter, a version bump, a changed dataset hash) regenerate with
``UPDATE_GOLDEN=1 pytest tests/analyses/test_cache_keys.py`` and say so in the commit.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from report_builder import api
from report_builder.analyses import planning

GOLDEN = Path(__file__).with_name("cache_keys_smoke.json")


def test_smoke_plan_keeps_the_cached_keys(monkeypatch):
    from report_builder.models import loading

    monkeypatch.setattr(loading, "load", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no weights")))
    plan = planning.plan(api.configure(preset="smoke"))
    keys = [[t.analysis, t.subject.label, t.key] for t in plan.tasks]
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(keys, indent=1, ensure_ascii=False) + "\n")
    assert keys == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_every_analysis_parameter_has_the_configuration_key_a_diff_names(monkeypatch):
    """A figure diff names a changed analysis parameter by the key a user sets (`schema.CONFIG_KEYS`: ``top_k``
    as ``k24.top_k``); a parameter an analysis adds without its key would be named by its internal name."""
    from report_builder.analyses.base import input_params
    from report_builder.models import loading
    from report_builder.schema import CONFIG_KEYS

    monkeypatch.setattr(loading, "load", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no weights")))
    plan = planning.plan(api.configure(preset="smoke"))
    found = {k for t in plan.tasks for k in input_params(t.params)}
    assert found and found <= set(CONFIG_KEYS), found - set(CONFIG_KEYS)
