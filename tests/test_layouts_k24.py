"""K24 end to end on a sandwich-norm (tiny Gemma-3) and a parallel (tiny GPT-NeoX) model: each layout's
own scopes and components in the K24 tables (SPEC §7)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from report_builder import schema
from report_builder.analyses import k24_compute
from tests.analyses.test_k24 import TOP_K, _seqs
from tests.tiny_models import tiny


@pytest.fixture(scope="module")
def models():
    return {"gemma3": tiny("gemma3"), "neox": tiny("neox")}


@pytest.fixture(scope="module")
def tables(models):
    parts: dict[str, list[pd.DataFrame]] = {}
    for lm in models.values():
        enc = _seqs(lm)
        out = k24_compute.scope_analyses(lm, enc, model=lm.name, dataset="wiki", top_k=TOP_K, batch_size=2)
        out["k24_maps"] = k24_compute.example_maps(lm, enc[:2], ["ex0", "ex1"], model=lm.name)
        for name, df in out.items():
            parts.setdefault(name, []).append(df)
    t = {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}
    t["models"] = pd.DataFrame([lm.facts() for lm in models.values()])[schema.MODELS]
    return t


@pytest.mark.parametrize("key,layout", [("gemma3", schema.SANDWICH), ("neox", schema.PARALLEL)])
def test_tables_carry_the_layouts_own_scopes(key, layout, models, tables):
    lm = models[key]
    assert lm.adapter.layout is layout
    name = lm.name
    ctx = tables["k24_ctx"][tables["k24_ctx"].model == name]
    comp = ctx[(ctx.kind == "component") & (ctx.layer == 0)]
    assert comp.component.tolist() == list(layout.components)
    assert comp.to_scope.tolist() == list(layout.scopes[1:])
    assert set(tables["k24_maps"][tables["k24_maps"].model == name].scope) == set(layout.scopes)
    rec = tables["recon_errors"][tables["recon_errors"].model == name]
    assert set(rec.scope) == set(layout.checks) and (rec.max_rel_error <= 1e-4).all()
    assert tables["models"].set_index("model").loc[name, "ln_position"] == layout.id


def test_parallel_ff_branch_changes_only_the_diagonal(models, tables):
    km = tables["k24_maps"]
    km = km[km.model == models["neox"].name]
    off = km[km.i != km.j].pivot_table(index=["example", "layer", "i", "j"], columns="scope", values="value")
    raw = off.dropna()
    # row-normalised maps: off-diagonal values rescale by one factor per row, their order is kept
    for (ex, layer, i), g in raw.groupby(level=[0, 1, 2]):
        if len(g) > 1:
            assert np.argsort(g["ATB"].to_numpy()).tolist() == np.argsort(g["ATBPFF"].to_numpy()).tolist()
