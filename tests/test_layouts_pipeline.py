"""A tiny build through the pipeline with a sandwich-norm (Gemma-3) and a parallel (GPT-NeoX) model:
the analyses run from local checkpoints and every K24 figure renders with each layout's own scopes."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import transformers as tr

from report_builder import api, schema
from report_builder.config import from_dict
from tests.test_pipeline import MINILM, small_config

pytestmark = pytest.mark.slow


def _save(model, path: Path) -> str:
    model.save_pretrained(path)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(MINILM / f, path / f)
    return str(path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layouts")
    torch.manual_seed(0)
    sizes = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=128)
    gemma = _save(tr.Gemma3TextModel(tr.Gemma3TextConfig(**sizes, num_key_value_heads=2, head_dim=8, sliding_window=8,
                                                         layer_types=["sliding_attention", "full_attention"],
                                                         pad_token_id=0)), tmp / "gemma3")
    neox = _save(tr.GPTNeoXModel(tr.GPTNeoXConfig(**sizes, use_parallel_residual=True, pad_token_id=0)), tmp / "neox")
    cfg = from_dict(small_config(tmp, [{"name": "tiny-gemma3", "source": gemma, "role": "primary_causal"},
                                       {"name": "tiny-neox", "source": neox, "role": "variant"}]))
    rep = api.analyze(cfg, log=lambda *_: None, progress=False)
    return cfg, rep


def test_analyses_carry_each_layouts_scopes(built):
    _, rep = built
    t = rep.tables
    lay = dict(zip(t["models"]["model"], t["models"]["ln_position"]))
    assert lay == {"tiny-gemma3": "sandwich", "tiny-neox": "parallel"}
    for model, layout in (("tiny-gemma3", schema.SANDWICH), ("tiny-neox", schema.PARALLEL)):
        ctx = t["k24_ctx"][(t["k24_ctx"].model == model) & (t["k24_ctx"].kind == "component")]
        assert set(ctx.to_scope) == set(layout.scopes[1:]) and set(ctx.component) == set(layout.components)
        assert set(t["k24_maps"][t["k24_maps"].model == model].scope) == set(layout.scopes)
        rec = t["recon_errors"][t["recon_errors"].model == model]
        assert set(layout.checks) <= set(rec.scope) and (rec.max_rel_error <= 1e-4).all()


def test_every_k24_figure_renders_with_each_layouts_scopes(built):
    import altair as alt

    from report_builder.figures import k24
    from report_builder.figures.spec import FigureContext, FigureResult, Roles

    _, rep = built
    roles = Roles(primary_encoder=None, primary_causal="tiny-gemma3", encoders=(), variants=("tiny-neox",),
                  seed_group=(), datasets=("wiki", "sentiment-sample"))
    ctx = FigureContext(tables=rep.tables, roles=roles)
    seen = {}
    for spec in k24.SPECS:
        r = spec.build(ctx)
        assert isinstance(r, FigureResult) and len(r.data) and r.reading, spec.id
        with alt.data_transformers.enable("default", max_rows=None):
            d = r.chart.to_dict(validate=True)
        seen[spec.id] = str(d) + " " + r.reading
        for col in ("scope", "to_scope"):
            if col in r.data.columns:
                for model, layout in (("tiny-gemma3", schema.SANDWICH), ("tiny-neox", schema.PARALLEL)):
                    if "model" in r.data.columns:
                        got = set(r.data.loc[r.data["model"] == model, col])
                        assert got <= set(layout.scopes), (spec.id, model, got)
    # the sandwich model's whole-layer scope and post-FF norm, and the parallel model's, are shown
    assert "ATBLNFFLNRES" in seen["k24-maps"] and "ATBPFF" in seen["k24-maps"]
    assert "post-FF LN" in seen["k24-models"] and "ATBPFF" in seen["k24-models"]
    assert "ATBLNFFLN" in seen["k24-fig1"]
