"""The engine's batched (GPU) path, run here on CPU tensors: batches sized by the rule, one host transfer
per batch, errors computed with the batch, a reduce step instead of the results, and only the parts
asked for moved to the host; its results equal the deterministic path's within 1e-6."""
from __future__ import annotations

import sys

import pytest
import torch

from report_builder.engine import Tokens, decompose_sequences, reduce_sequences
from report_builder.engine import batched as B
from report_builder.engine.host import HostCopy
from report_builder.errors import ReconstructionError
from report_builder.schema import K21_METHODS
from tests.tiny_models import tiny

SEQS = [Tokens(list(range(7, 7 + n)), [0] * n) for n in (9, 16, 4, 13, 11)]


def test_the_batch_rule_is_a_power_of_two_within_the_room_and_the_cap():
    assert B.batch_size(10, 1000) == 64  # 100 fit, rounded down to a power of two
    assert B.batch_size(10, 1000, cap=48) == 32 and B.batch_size(10, 5) == 1 and B.batch_size(1, 10**9) == B.MAX_BATCH
    # batches follow the longest sequence in each: longer sequences, smaller batches
    lengths = [5, 50, 6, 40, 7, 8, 45]
    groups = B.plan_batches(lengths, lambda n: 4 if n < 10 else 2)
    assert groups == [[0, 2, 4, 5], [3, 6], [1]]
    assert sorted(k for g in groups for k in g) == list(range(len(lengths)))


def test_bytes_per_sequence_grow_with_length_and_what_is_held():
    lm = tiny("bert")
    a = B.seq_bytes(lm, 64, layers=2)
    assert B.seq_bytes(lm, 128, layers=2) > 3 * a
    assert B.seq_bytes(lm, 64, layers=2, held_per_layer=100, reduce_bytes=7) == a + 2 * 2 * 100 + 7


def test_host_copy_round_trips_mixed_tensors():
    ts = [torch.arange(12.0).view(3, 4), torch.arange(5, dtype=torch.int64), torch.ones(2, 2, 2).transpose(0, 2),
          torch.empty(0), torch.tensor([1.5], dtype=torch.float64)]
    got = HostCopy(ts).wait()
    assert len(got) == len(ts)
    for a, b in zip(ts, got):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_stacked_reuses_a_batch_base_and_pads_otherwise():
    base = torch.randn(3, 5, 5)
    lengths = [5, 3, 4]
    views = [base[b, :n, :n] for b, n in enumerate(lengths)]
    t, how = B._stacked(views, lengths, 5, 2, 2)
    assert t is base and how == ":"
    loose = [v.clone() for v in views]
    t, how = B._stacked(loose, lengths, 5, 2, 2)
    assert t is not base and how == ":" and all(torch.equal(t[b, :n, :n], views[b]) for b, n in enumerate(lengths))
    w = torch.randn(4)
    assert B._stacked([w, w, w], lengths, 5, 1, 2) == (w, "=")


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_batched_path_moves_only_what_is_asked_and_checks_every_sequence(family):
    lm = tiny(family)
    one = {(k, l): r for k, l, r in decompose_sequences(lm, SEQS, ratios=True, batched=False)}
    seen = []
    got = list(decompose_sequences(lm, SEQS, ratios=True, batched=True, batch_size=2, returns=("ratios",),
                                   on_batch=seen.append))
    assert sorted(seen) == [1, 2, 2] and len(got) == len(one)
    for k, layer, r in got:
        ref = one[k, layer]
        assert not r.maps and not r.sums and not r.extras and not r.bias and r.ratios.keys() == ref.ratios.keys()
        for m in ref.ratios:
            assert r.ratios[m].shape == ref.ratios[m].shape
            torch.testing.assert_close(r.ratios[m], ref.ratios[m], rtol=0, atol=1e-6)
        assert r.errors.keys() == ref.errors.keys()
        assert all(abs(r.errors[s] - ref.errors[s]) < 1e-6 for s in ref.errors)
    with pytest.raises(ValueError, match="returns"):
        list(decompose_sequences(lm, SEQS, batched=True, returns=("everything",)))


def test_reduce_step_runs_per_layer_and_errors_are_enforced_with_the_batch(monkeypatch):
    lm = tiny("bert")
    calls = []

    def reduce(batch, layer, rs):
        calls.append((tuple(batch.group), layer))
        m = B.batch_tensor(rs, "maps", "ATB", batch)
        return {"row_sums": (m * batch.real(m.device)[:, None, :]).sum(-1)}

    outs = list(reduce_sequences(lm, SEQS, reduce, maps=("ATB",), batch_size=4))
    assert [tuple(o.batch.group) for o in outs] == [(2, 0, 4, 3), (1,)]  # by length, 4 at a time
    assert calls == [(g, l) for g in ((2, 0, 4, 3), (1,)) for l in range(lm.n_layers)]
    ref = {(k, l): r for k, l, r in decompose_sequences(lm, SEQS, maps=("ATB",), batched=False)}
    for o in outs:
        for b, (k, n) in enumerate(zip(o.batch.group, o.batch.lengths)):
            for layer, t in o.layers.items():
                torch.testing.assert_close(t["row_sums"][b, :n], ref[k, layer].maps["ATB"].sum(-1), rtol=0, atol=1e-6)
                assert o.errors[b][layer].keys() == ref[k, layer].errors.keys()
    monkeypatch.setattr("report_builder.engine.ERROR_BOUND", 0.0)
    with pytest.raises(ReconstructionError, match="exceeds 0"):
        list(reduce_sequences(lm, SEQS, reduce, maps=("ATB",)))


def test_half_maps_on_the_batched_path():
    lm = tiny("llama")
    full = {(k, l): r for k, l, r in decompose_sequences(lm, SEQS, maps=K21_METHODS, batched=True)}
    half = list(decompose_sequences(lm, SEQS, maps=K21_METHODS, batched=True, maps_dtype=torch.float16))
    for k, layer, r in half:
        for m, t in r.maps.items():
            assert t.dtype == torch.float16
            torch.testing.assert_close(t.float(), full[k, layer].maps[m], rtol=5e-4, atol=3e-8)


@pytest.mark.parametrize("rule", ["auto", "gpu"])
def test_k21_tables_from_the_batched_path_equal_the_cpu_build_within_float_rounding(rule):
    from report_builder.analyses import k21_compute
    from tests.analyses.test_k24 import _seqs

    lm = tiny("bert")
    enc = _seqs(lm)
    a = k21_compute.mixing_ratios(lm, enc, model="m", dataset="d")
    lm.chunk_rule = rule  # "gpu": a GPU build's rule, on CPU tensors
    b = k21_compute.mixing_ratios(lm, enc, model="m", dataset="d", batched=True, batch_size=2)
    for name in a:
        x, y = a[name], b[name]
        assert list(x.columns) == list(y.columns) and len(x) == len(y), name
        for c in x.columns:
            if x[c].dtype.kind == "f":
                assert abs(x[c].to_numpy(float) - y[c].to_numpy(float)).max() <= 1e-4, (name, c)  # percent
            else:
                assert x[c].tolist() == y[c].tolist(), (name, c)


@pytest.mark.parametrize("batched", [False, True])
def test_a_missed_error_bound_names_the_layer_counted_from_1(monkeypatch, batched):
    # the engine's layer 1 (0-based) is the user's layer 2: the error names it as every page does
    lm = tiny("bert")
    monkeypatch.setattr("report_builder.engine.ERROR_BOUND", 0.0)
    with pytest.raises(ReconstructionError, match=r": layer 2, scope \w+: relative reconstruction error"):
        list(decompose_sequences(lm, SEQS[:2], layers=[1], maps=("ATB",), batched=batched))


def test_the_gpu_rule_budget_is_sized_once_per_run_outside_the_layer_steps(monkeypatch):
    """The batched path sizes the GPU rule's budget once (per layer device), beside the batch rule; every layer
    step of every batch takes that number as given and reads no memory state itself (a step that did would
    recompile, compiled, whenever the free memory changed: issue #29)."""
    lm = tiny("bert")
    sized, seen = [], []
    monkeypatch.setattr(B, "gpu_budget", lambda dev, b: sized.append((str(dev), b)) or 12_345_678)

    def no_read(*a, **k):
        raise AssertionError("the layer step read the memory free")
    for mod in ("report_builder.decompose.layouts", "report_builder.decompose.layouts.common"):
        monkeypatch.setattr(sys.modules[mod], "gpu_budget", no_read)
    real = B.decompose_batch
    monkeypatch.setattr(B, "decompose_batch", lambda *a, **k: seen.append(k["budget_bytes"]) or real(*a, **k))
    got = list(decompose_sequences(lm, SEQS, maps=("ATBFF",), batched=True, batch_size=2, chunk_rule="gpu"))
    assert len(got) == len(SEQS) * lm.n_layers and sized == [("cpu", 512 << 20)]
    assert seen == [12_345_678] * (3 * lm.n_layers)  # 3 batches x 2 layers, each with the one sized budget
