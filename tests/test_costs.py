"""The cost plan: the FLOP model against a direct count, per-task costs from the real token lengths
without weights, cached tasks at 0, the 1/N-GPU answer, the text and JSON forms."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from report_builder import api, cli, costs
from report_builder.analyses import base, planning, registry
from report_builder.config import from_dict
from report_builder.models import loading

MINILM = {"name": "MiniLM-L6", "source": "minilm", "role": "primary_encoder"}


def _cfg(tmp_path, **over):
    data = {"models": [MINILM], "datasets": [{"id": "wiki", "n": 3, "k24_n": 2, "max_length": 48},
                                             {"id": "sentiment-sample", "n": 2, "k24_n": 1}],
            "k24": {"examples": 2}, "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site"), **over}
    return from_dict(data)


@pytest.fixture
def no_weights(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a plan must not load model weights")

    monkeypatch.setattr(loading, "load", refuse)


def test_every_analysis_declares_its_kind_of_work():
    assert {a.work.kind for a in registry.ANALYSES} <= set(base.WORKS)
    for a in registry.ANALYSES:  # weights-only analyses decompose no sequence
        assert (a.inputs == "weights") == (a.work.kind in ("none", "weights")), a.id
    with pytest.raises(ValueError, match="not one of"):
        base.Work("gpu")


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_flop_model_matches_a_direct_count(family):
    """Every matmul the forward pass and `decompose_layer` run, counted by torch, against the formulas
    (the element-wise IG path points aside), at three lengths: the n^2 terms scale as the formula says."""
    from torch.utils.flop_counter import FlopCounterMode

    from report_builder.decompose.layouts import decompose_layer
    from report_builder.models.capture import forward_capture
    from tests.tiny_models import tiny

    lm = tiny(family)
    s = costs.shape_of(lm.config, lm.adapter)
    lw = lm.layer_weights(0)
    kinds = {"ratios": dict(ratios=True), "maps": dict(maps=("ATTN-N", "ATTNRESLN-N")),
             "full": dict(maps=lw.scopes, extras=True)}
    for n in (8, 16, 32):
        ids = torch.randint(5, 100, (1, n), generator=torch.Generator().manual_seed(n))
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        with torch.no_grad():
            fc = FlopCounterMode(display=False)
            with fc:
                lm.model(**inputs, output_attentions=True)
            # the pooler of BertModel (one d x d matmul) is not part of a layer
            assert fc.get_total_flops() == pytest.approx(costs.forward_flops(s, n) * s.layers, rel=0.01)
            cap = forward_capture(lm.model, lm.adapter, inputs, [0])[0]
            for work, kw in kinds.items():
                fc = FlopCounterMode(display=False)
                with fc:
                    decompose_layer(lw, cap.x[0], cap.alpha[0], **kw)
                assert fc.get_total_flops() == pytest.approx(costs.work_flops(work, s, n, ig_pts=0), rel=0.03), \
                    (family, n, work)
    # quadratic in n for long sequences: doubling n more than triples the full layer's FLOPs (causal:
    # once the blocks of the pairs j <= i are cut finely, past one block of `chunks.BLOCK_ROWS` rows)
    assert costs.work_flops("full", s, 1024) > 3 * costs.work_flops("full", s, 512)


def test_plan_prices_every_task_from_the_real_lengths_without_weights(tmp_path, no_weights):
    cfg = _cfg(tmp_path)
    est = api.plan(cfg)
    p = planning.plan(cfg)
    assert [(r["analysis"], r["key"]) for r in est["tasks"]] == [(t.analysis, t.key) for t in p.tasks]
    from report_builder.data import encode

    tok = loading.config_and_tokenizer("minilm")[1]
    wiki = [len(e) for e in encode(p.sets["wiki"], tok, causal=False, max_length=48)]
    by = {(r["analysis"], r["dataset"]): r for r in est["tasks"]}
    assert by[("k21_mixing", "wiki")]["tokens"] == sum(wiki)
    assert by[("k24_scopes", "wiki")]["tokens"] == sum(wiki[:2])
    assert by[("k24_scopes", "wiki")]["max_tokens"] == max(wiki[:2])
    for r in est["tasks"]:
        assert not r["cached"] and r["peak_bytes"] > 0 and r["disk_bytes"] > 0
        decomposes = r["sequences"] > 0
        assert (r["flops"] > 0) == (decomposes or r["work"] == "weights"), r
        assert r["seconds"] == pytest.approx(r["device_seconds"] + r["host_seconds"] + r["load_seconds"])
        if decomposes:
            assert r["flops"] >= r["forward_flops"] > 0
    # the model loads once, on its first task that computes
    assert [r["load_seconds"] > 0 for r in est["tasks"]] == [k == 0 for k in range(len(est["tasks"]))]
    t = est["totals"]
    assert t["flops"] == sum(r["flops"] for r in est["tasks"]) > 0
    assert t["seconds"] == pytest.approx(sum(r["seconds"] for r in est["tasks"]))
    assert est["device"]["source"] == "calibrated" and est["device"]["flops_per_s"] > 0
    # the full layer costs more per sequence than the ratios
    k24, k21 = by[("k24_scopes", "wiki")], by[("k21_mixing", "wiki")]
    assert k24["flops"] / k24["tokens"] > k21["flops"] / k21["tokens"]


def test_cached_tasks_cost_nothing(tmp_path, no_weights):
    cfg = _cfg(tmp_path)
    p = planning.plan(cfg)
    from report_builder.cache import Cache

    cache = Cache(cfg.cache_dir)
    done = [t for t in p.tasks if t.analysis in ("k21_mixing", "k21_expansion")]
    for t in done:  # stand-in entries: a plan looks only at whether the entry exists
        cache.path(t.analysis, t.key).mkdir(parents=True)
    est = costs.estimate(p, cache, threads=1)
    for r in est["tasks"]:
        hit = (r["analysis"], r["key"]) in {(t.analysis, t.key) for t in done}
        assert r["cached"] == hit
        if hit:
            assert r["flops"] == 0 and r["seconds"] == 0
    assert est["totals"]["cached"] == len(done)
    assert "cached" in costs.format_plan(est)


def test_absent_gpu_named_gpu_and_n_gpus(tmp_path, no_weights, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = _cfg(tmp_path, device="cuda")
    p = planning.plan(cfg)
    none = costs.estimate(p, None)
    assert none["device"]["flops_per_s"] is None and none["totals"]["seconds"] is None
    assert [n for n in none["notes"] if "no CUDA device here" in n and "gpu=A100|H100|H200" in n] == none["notes"]
    assert none["totals"]["flops"] > 0
    one = costs.estimate(p, None, gpu="H100", gpus=1)
    four = costs.estimate(p, None, gpu="h100", gpus=4)
    assert one["device"]["flops_per_s"] == pytest.approx(67e12 * costs.ASSUMED_GPU_MATMUL_EFFICIENCY)
    assert one["device"]["factors"] == {"source": "estimate"} and one["efficiency"] == costs.EFFICIENCY
    g = four["gpus"]
    assert g["n"] == 4 and g["seconds_n"] <= g["seconds_1"] == pytest.approx(four["totals"]["seconds"])
    assert g["seconds_n"] >= max(g["seconds_1"] / 4, g["largest_task_seconds"])
    given = costs.estimate(p, None, gpu_flops=100.0, gpus=2)
    assert given["device"]["flops_per_s"] == 100e12 and given["gpus"]["n"] == 2
    text = costs.format_plan(four)
    assert "on 1 GPU: ~" in text and "on 4 GPUs: ~" in text


def test_a_reduced_precision_mode_prices_float32_weights_and_memory(tmp_path, no_weights, monkeypatch):
    # a build loads its models in float32 in every mode (a reduced mode is the pair GEMMs' inputs only), so
    # the model's load time, its weights and each task's peak memory are the float32 plan's, only faster
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    est = {dt: costs.estimate(planning.plan(_cfg(tmp_path, device="cuda", dtype=dt)), None, gpu="H100")
           for dt in ("float32", "bfloat16")}
    f32, bf16 = est["float32"], est["bfloat16"]
    assert bf16["totals"]["load_seconds"] == pytest.approx(f32["totals"]["load_seconds"])
    assert f32["totals"]["load_seconds"] > costs.LOAD_S
    assert [t["peak_bytes"] for t in bf16["tasks"]] == [t["peak_bytes"] for t in f32["tasks"]]
    assert bf16["device"]["flops_per_s"] > f32["device"]["flops_per_s"]
    assert costs.MODEL_ITEMSIZE == 4


def test_balance_is_greedy_and_never_splits():
    span, loads = costs.balance([5.0, 4.0, 3.0, 3.0, 1.0], 2)
    assert span == 8.0 and sorted(loads) == [8.0, 8.0]
    assert costs.balance([10.0, 1.0], 4)[0] == 10.0
    assert costs.balance([], 3)[0] == 0.0


def test_cli_plan_json_and_text(tmp_path, capsys, no_weights):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"models": [MINILM], "datasets": [{"id": "wiki", "n": 2, "k24_n": 1}],
                                    "cache_dir": str(tmp_path / "cache")}))
    assert cli.main(["plan", "--config", str(path), "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert {"device", "tasks", "totals", "gpus", "notes", "efficiency", "flop_model"} <= set(est)
    assert {"analysis", "model", "dataset", "sequences", "tokens", "cached", "key", "flops", "seconds",
            "peak_bytes", "disk_bytes", "estimated"} <= set(est["tasks"][0])
    # everything is here: nothing estimated, every key known
    assert est["totals"]["estimated"] == 0 and est["estimates"]["models"] == est["estimates"]["datasets"] == {}
    assert all(t["estimated"] == [] and t["key"] for t in est["tasks"])
    assert cli.main(["build", "--plan", "--config", str(path), "--device", "cuda", "--gpu", "A100", "--gpus", "3"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["analysis", "model", "dataset"] and "FLOPs" in lines[0]
    assert any(ln.startswith("total: ") and "FLOP" in ln for ln in lines)
    assert "on 3 GPUs" in out and "A100" in out
    assert cli.main(["plan", "--config", str(path), "--gpu", "B999"]) != 0
    assert "unknown GPU 'B999'" in capsys.readouterr().err
    assert cli.main(["plan", "--config", str(path), "--gpu", "H100", "--gpus", "0"]) != 0
    assert "--gpus: 0 is not a number of GPUs" in capsys.readouterr().err


def test_plan_table_columns_line_up_with_escaped_and_wide_names(tmp_path, capsys, no_weights):
    """Cells are escaped for the terminal before they are padded, and padded by terminal columns: a name
    holding a bidi control (six columns once escaped) and a wide CJK name (two columns a character) keep
    every column in line (before: padded by ``len`` before the CLI escaped the text)."""
    import re
    import unicodedata

    import yaml

    def terminal_width(text):  # independent of errors.terminal_width: wide characters take two columns
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    names = ["rtl\u202eevil", "模型名", "plain"]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"models": [{**MINILM, "name": n, **({"role": "variant"} if k else {})}
                                               for k, n in enumerate(names)],
                                    "datasets": [{"id": "wiki", "n": 2, "k24_n": 1}],
                                    "cache_dir": str(tmp_path / "cache")}, allow_unicode=True), encoding="utf-8")
    assert cli.main(["plan", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and "rtl\\u202eevil" in out and "模型名" in out
    lines = out.split("\ntotal: ")[0].splitlines()
    assert len(lines) > 3 and {n for n in ("rtl\\u202eevil", "模型名", "plain") if any(n in ln for ln in lines)} == \
        {"rtl\\u202eevil", "模型名", "plain"}

    def edges(line):  # (start, end) of each cell, in terminal columns
        return [(terminal_width(line[:m.start()]), terminal_width(line[:m.end()])) for m in re.finditer(r"\S+(?: \S+)*", line)]

    head = edges(lines[0])
    for ln in lines[1:]:
        e = edges(ln)
        assert [s for s, _ in e[:3]] == [s for s, _ in head[:3]], ln  # analysis, model, dataset: left-aligned
        assert e[4][1] == head[4][1] and e[9][1] == head[9][1], ln  # seqs ... disk: right-aligned


@pytest.mark.parametrize("text, width", [("abc", 3), ("模型", 4), ("e\u0301", 1), ("\\u202e", 6), ("", 0)])
def test_terminal_width(text, width):
    from report_builder.errors import terminal_width

    assert terminal_width(text) == width


@pytest.mark.slow
def test_paper_preset_plan_with_real_shapes_and_no_weights(tmp_path):
    """The paper preset's plan where every model has its real config (BERT-base ... RoBERTa-large,
    GPT-2; 34 models) and a tokenizer but no weights at all, the network blocked: it answers "how long on one
    GPU, how long on eight" in one run, and the N-GPU time is bounded by 1-GPU time and largest task."""
    import subprocess
    import sys

    from tests import paper_standins
    from tests.test_paper_preset import network_env

    revs = paper_standins.build_shape_cache(tmp_path / "hub")
    paper_standins.write_data_dir(tmp_path / "data", n=8)
    env = network_env(tmp_path, tmp_path / "hub")
    code = ("import sys; from report_builder.models import loading\n"
            "def refuse(*a, **k): raise SystemExit('the plan loaded weights')\n"
            "loading.load = refuse\n"
            "from report_builder import cli; sys.exit(cli.main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "plan", "--preset", "paper", "--data-dir", str(tmp_path / "data"),
                        "--cache", str(tmp_path / "cache"), "--set", "datasets.0.n=16", "--gpu", "H200",
                        "--gpus", "8", "--json"], capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "network.log").read_text() == ""
    est = json.loads(r.stdout)
    models = {t["model"] for t in est["tasks"]}
    assert len(models) == len(revs) == len(paper_standins.paper_ids())
    by = {(t["analysis"], t["model"], t["dataset"]): t for t in est["tasks"]}
    base, large = by[("k24_scopes", "bert-base-uncased", "wiki")], by[("k24_scopes", "bert-large-uncased", "wiki")]
    assert base["sequences"] == 16 and large["tokens"] == base["tokens"]  # one tokenizer, same lengths
    assert large["flops"] > 3 * base["flops"] > 0  # BERT-large: 2x layers, 1.33x width
    g = est["gpus"]
    assert g["n"] == 8 and max(g["seconds_1"] / 8, g["largest_task_seconds"]) <= g["seconds_n"] <= g["seconds_1"]
    assert est["device"]["gpu"] == "NVIDIA H200 SXM 141GB" and est["totals"]["cached"] == 0


def test_shard_tasks_cost_their_range_and_split_the_n_gpu_time(tmp_path, no_weights):
    whole = costs.estimate(planning.plan(_cfg(tmp_path)), None, gpu="H100", gpus=4)
    sharded = costs.estimate(planning.plan(_cfg(tmp_path, shard_size=1)), None, gpu="H100", gpus=4)
    one = {(r["analysis"], r["dataset"]): r for r in whole["tasks"] if r["dataset"] == "wiki"}
    for name in ("k21_mixing", "k24_scopes"):
        parts = [r for r in sharded["tasks"] if r["analysis"] == name and r["dataset"] == "wiki"]
        shards, reduce = [r for r in parts if r["shard"]], [r for r in parts if r["reduces"]]
        assert [r["shard"] for r in shards] == [[k, k + 1] for k in range(one[(name, "wiki")]["sequences"])]
        assert len(reduce) == 1 and reduce[0]["reduces"] == len(shards) and reduce[0]["flops"] == 0
        assert sum(r["flops"] for r in shards) == one[(name, "wiki")]["flops"]
        assert sum(r["tokens"] for r in shards) == one[(name, "wiki")]["tokens"]
        assert reduce[0]["rows"] == one[(name, "wiki")]["rows"]  # the reduce writes the whole tables
    assert sharded["totals"]["flops"] == whole["totals"]["flops"]
    assert sharded["gpus"]["largest_task_seconds"] <= whole["gpus"]["largest_task_seconds"]
    assert " 0:1 " in costs.format_plan(sharded) and "reduce " in costs.format_plan(sharded)


@pytest.mark.slow
def test_table_rows_match_a_real_build(tmp_path):
    """The rows the plan predicts for the long tables (they size the disk estimate) are the rows a
    build writes: a tiny encoder and a tiny causal model, then a plan over the filled cache."""
    import pandas as pd

    from report_builder.cache import Cache
    from tests.test_pipeline import small_config, tiny_bert_dir
    from tests.tiny_models import save_tiny

    enc = tiny_bert_dir(tmp_path / "enc", 0)
    dec = save_tiny("llama", tmp_path / "dec")
    cfg = from_dict(small_config(tmp_path, [{"name": "enc", "source": str(enc), "role": "primary_encoder"},
                                            {"name": "dec", "source": str(dec), "role": "primary_causal"}]))
    api.analyze(cfg, log=lambda *_: None, progress=False)
    est = api.plan(cfg)
    cache = Cache(cfg.cache_dir)
    checked = 0
    for r in est["tasks"]:
        assert r["cached"] and r["flops"] == 0
        d = cache.path(r["analysis"], r["key"])
        for table in ("k21_tokens", "k21_maps", "k21_freq", "k24_ln_dims", "k24_maps", "k24_ffamp_pairs"):
            if table in r["rows"]:
                assert len(pd.read_parquet(d / f"{table}.parquet")) == r["rows"][table], (r["analysis"], r["model"], table)
                checked += 1
    assert checked >= 12


@pytest.mark.parametrize("entry, message", [
    ({"models": [{"name": "x", "source": "nobody-here/no-such-model", "role": "primary_encoder"}],
      "datasets": [{"id": "wiki", "n": 2}]}, "nobody-here/no-such-model"),
    ({"models": [MINILM], "datasets": [{"id": "mine", "path": "no/such/file.txt", "n": 2}]}, "no/such/file.txt"),
])
def test_plan_refuses_what_is_neither_here_nor_recorded(tmp_path, capsys, monkeypatch, no_weights, entry, message):
    """Only the papers' models and datasets have recorded facts: anything else that is not here is the
    usual one-line error, no traceback (a model that is recorded sizes fine: tests/test_paper_preset.py)."""
    import yaml

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**entry, "cache_dir": str(tmp_path / "cache")}))
    assert cli.main(["plan", "--config", str(path), "--json"]) not in (0, 1)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("case", ["missing", "folder", "long-field", "not-tsv"])
def test_plan_fails_on_a_bad_paper_data_file_as_build_does(tmp_path, capsys, monkeypatch, no_weights, case):
    """Only a paper dataset that is not here (read through `datasets`, not downloaded) is estimated; a file
    the configuration names that is missing or unreadable fails `plan` with the loader's own line and exit
    code, the line `analyze`/`build` print (before: such a set was marked "estimated", exit 0)."""
    import yaml

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    entry = {"id": "sst2", "n": 2}
    if case == "missing":
        entry["path"], expected = str(tmp_path / "no-such-dev.tsv"), "not found"
    elif case == "folder":  # --data-dir names a folder whose SST-2/ lacks dev.tsv
        (tmp_path / "data" / "SST-2").mkdir(parents=True)
        entry, expected = {"id": "mnli", "n": 2}, None
        (tmp_path / "data" / "MNLI").mkdir()
    elif case == "long-field":
        (tmp_path / "dev.tsv").write_text("sentence\tlabel\n" + "a" * 131_073 + "\t1\nfine\t0\n")
        entry["path"], expected = str(tmp_path / "dev.tsv"), "field larger than field limit"
    else:
        (tmp_path / "dev.tsv").write_text("no header of that kind\n")
        entry["path"], expected = str(tmp_path / "dev.tsv"), "lacks column"
    cfg = {"models": [MINILM], "datasets": [entry], "cache_dir": str(tmp_path / "cache")}
    if case == "folder":
        cfg["data_dir"], expected = str(tmp_path / "data"), "no dev_matched.tsv in folder"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    lines = []
    for cmd in (["plan"], ["analyze", "--no-progress"]):
        assert cli.main([*cmd, "--config", str(path)]) == 3, cmd
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], (cmd, err)
        lines.append(err[0])
    assert lines[0] == lines[1]


def test_plan_estimates_a_paper_dataset_that_is_not_here(tmp_path, no_weights, monkeypatch):
    """The one data failure a plan estimates past: no file given and `datasets` cannot load it here."""
    from report_builder.errors import DataNotHere

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from report_builder.data import hub

    def absent(*a, **k):
        raise DataNotHere("not on this machine")

    monkeypatch.setattr(hub, "load_hub_split", absent)
    monkeypatch.setattr("report_builder.data.glue.load_hub_split", absent)
    est = api.plan(_cfg(tmp_path, datasets=[{"id": "sst2", "n": 3}]))
    assert est["estimates"]["datasets"]["sst2"]["flags"] == ["items", "lengths"]
    assert 0 < max(r["sequences"] for r in est["tasks"] if r["dataset"] == "sst2") <= 3


def test_plan_writes_nothing_into_the_cache(tmp_path, capsys, no_weights):
    """`plan` is read-only: an existing empty ``--cache`` folder stays empty (before: the cache marker was
    written into it), a missing one stays missing, and a filled cache gets no lock file and no new entry;
    a folder that is not the tool's is refused as `build` refuses it (exit 3), untouched."""
    import yaml

    from report_builder import guard
    from report_builder.cache import Cache

    def tree(d):
        return sorted(p.relative_to(d).as_posix() for p in d.rglob("*")) if d.exists() else None

    empty, missing, filled, foreign = (tmp_path / n for n in ("empty", "missing", "filled", "foreign"))
    empty.mkdir()
    Cache(filled).put("k21_mixing", "a" * 20, {"t": __import__("pandas").DataFrame({"x": [1]})}, {})
    foreign.mkdir()
    (foreign / "results").mkdir()
    (foreign / "results" / "exp.csv").write_text("x\n1\n")
    before = {d: tree(d) for d in (empty, missing, filled, foreign)}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"models": [MINILM], "datasets": [{"id": "wiki", "n": 2, "k24_n": 1}]}))
    for d in (empty, missing, filled):
        assert cli.main(["plan", "--config", str(path), "--cache", str(d)]) == 0, d
        assert tree(d) == before[d], d
    assert before[empty] == [] and before[missing] is None and guard.CACHE_MARKER in before[filled]
    capsys.readouterr()
    assert cli.main(["plan", "--config", str(path), "--cache", str(foreign)]) == 3
    assert "error: " in capsys.readouterr().err and tree(foreign) == before[foreign]


def test_sized_set_and_recorded_shapes():
    """The recorded facts the plan falls back on: a missing set's size capped by ``n``, the mean length
    of K21 Table 1, and a recorded shape priced as the model's config is."""
    from transformers import AutoConfig

    from report_builder import papers
    from report_builder.costs.sizing import SizedSet, paper_mean_tokens
    from report_builder.models import registry as adapters

    means = paper_mean_tokens()
    assert means["sst2"] == 25 and means["mnli"] == 39 and means["conll2003"] == 21
    s = SizedSet("mnli", 9815, 39, "not here")
    assert len(s.head(1000)) == 1000 and len(s.head(None)) == 9815 and s.hash == "unknown:mnli"
    for source, shape in papers.PAPER_SHAPES.items():
        config = AutoConfig.for_model(shape.model_type, **shape.config_kwargs())
        adapter = adapters.for_config(config)
        got = costs.shape_of(config, adapter)
        assert (got.d, got.layers, got.heads, got.d_ff) == (shape.d, shape.layers, shape.heads, shape.ff), source
        assert adapter.causal == (source == "gpt2")
    assert costs.shape_of(AutoConfig.for_model("bert"), adapters.for_config(AutoConfig.for_model("bert"))) == \
        costs.shape_of(*(lambda c: (c, adapters.for_config(c)))(AutoConfig.for_model(
            "bert", **papers.PAPER_SHAPES["bert-base-uncased"].config_kwargs())))


def test_a_measured_gpu_prices_the_plan_from_its_gpu_check(tmp_path, no_weights, monkeypatch):
    """`plan --gpu H200` reads its factors from the newest measured run on an H200 (costs/measured/) and says
    "measured on <date>"; a GPU without one stays an estimate; a new run's JSON is installed by copying it."""
    from report_builder.costs import measured

    m = measured.find("H200", known=tuple(costs.GPUS))
    assert m is not None and m.date == "2026-12-04" and m.device == "NVIDIA H200"
    table = json.loads(Path(m.path).read_text())["table"]
    assert m.rates["fp32"] == pytest.approx(table["matmul_tflops"]["float32"] * 1e12)
    full = m.efficiency["fp32"]["full"]
    assert 0 < full < 1
    assert 0 <= m.overhead["full"] < 0.01 and 0 <= m.overhead["ratios"] < 0.01  # fitted to its K24 / K21 passes
    assert measured.find("A100") is None
    assert measured.find("NVIDIA H200 SXM 141GB", known=tuple(costs.GPUS)).path == m.path
    cfg = _cfg(tmp_path, device="cuda")
    p = planning.plan(cfg)
    est = costs.estimate(p, None, gpu="H200")
    assert est["device"]["flops_per_s"] == m.rates["fp32"] and est["device"]["factors"]["date"] == "2026-12-04"
    assert est["efficiency"]["full"] == full and est["overhead_s"]["full"] == m.overhead["full"]
    text = costs.format_plan(est)
    assert "(measured on 2026-12-04)" in text and "GPU factors measured on 2026-12-04" in text
    k24 = [t for t in est["tasks"] if t["analysis"] == "k24_scopes"]
    assert k24 and all(t["host_seconds"] == 0.0 for t in k24)  # its statistics are inside the measured pass
    assert "(estimate)" in costs.format_plan(costs.estimate(p, None, gpu="A100"))
    # bfloat16 was measured too; float16 was not: an estimate
    assert costs.estimate(planning.plan(_cfg(tmp_path, device="cuda", dtype="bfloat16")), None,
                          gpu="H200")["device"]["factors"]["source"] == "measured"
    assert costs.estimate(planning.plan(_cfg(tmp_path, device="cuda", dtype="float16")), None,
                          gpu="H200")["device"]["factors"]["source"] == "estimate"
    # a newer run, installed by one command (or by copying the file), wins; a broken file is skipped
    folder = tmp_path / "measured"
    doc = json.loads(Path(m.path).read_text())
    doc["table"] = {**doc["table"], "date": "2026-12-24", "matmul_tflops": {"float32": 50.0}}
    src = tmp_path / "gpu-check.json"
    src.write_text(json.dumps(doc))
    assert measured.main([]) == 2 and measured.main([str(tmp_path / "missing.json")]) == 3
    installed = folder / "h200-2026-12-24.json"
    assert measured.install(src, folder) == installed
    (folder / "broken.json").write_text("{not json")
    (folder / "other.json").write_text(json.dumps({"schema": "something else"}))
    newest = measured.find("H200", folder)
    assert newest.date == "2026-12-24" and newest.rates["fp32"] == 50e12 and len(measured.available(folder)) == 1
    with pytest.raises(ValueError, match="not a GPU check"):
        measured.load(folder / "other.json")


def test_the_default_factors_are_declared_once(tmp_path, no_weights, monkeypatch):
    """`estimate` spelt the defaults out three times (`EFFICIENCY`, `OVERHEAD_S[kind]`: for pricing, for the
    report, under measured factors); now each reads `flops.default_factors`, so what a plan prices with is
    what it reports, and changing the declaration changes both."""
    from report_builder.costs import flops

    p = planning.plan(_cfg(tmp_path, device="cuda"))
    before = costs.estimate(p, None, gpu="A100")  # a GPU no check measured: the default factors
    assert (before["efficiency"], before["overhead_s"], ()) == flops.default_factors("cuda")
    monkeypatch.setattr(flops, "EFFICIENCY", {k: e / 2 for k, e in flops.EFFICIENCY.items()})
    monkeypatch.setattr(flops, "OVERHEAD_S", {d: {k: 2 * s for k, s in v.items()} for d, v in flops.OVERHEAD_S.items()})
    after = costs.estimate(p, None, gpu="A100")
    assert after["efficiency"] == flops.EFFICIENCY and after["overhead_s"] == flops.OVERHEAD_S["cuda"]
    assert after["totals"]["device_seconds"] == pytest.approx(2 * before["totals"]["device_seconds"])
