"""Long sequences in bounded memory: the engine streams a sequence layer by layer (same results, one
layer's maps held at a time), or keeps its maps in float16 (rounding within the stated bound)."""
from __future__ import annotations

import threading

import pytest
import torch

from report_builder import engine
from report_builder.decompose import chunks
from report_builder.decompose.layer import LayerResult
from report_builder.engine import Tokens, decompose_sequences
from report_builder.errors import ReconstructionError
from report_builder.schema import K21_METHODS
from tests.tiny_models import tiny

SEQS = [Tokens(list(range(5, 5 + n))) for n in (11, 17, 6)]


def _bits(t: torch.Tensor) -> bytes:
    return t.contiguous().numpy().tobytes()


def test_streaming_gives_the_same_results_in_the_same_order():
    lm = tiny("llama")
    kw = dict(maps=lm.layer_weights(0).scopes + K21_METHODS, ratios=True, extras=True)
    done_plain, done_stream = [], []
    plain = list(decompose_sequences(lm, SEQS, stream=False, on_batch=done_plain.append, **kw))
    streamed = list(decompose_sequences(lm, SEQS, stream=True, on_batch=done_stream.append, **kw))
    assert [(k, l) for k, l, _ in streamed] == [(k, l) for k, l, _ in plain]
    assert done_stream == done_plain == [1, 1, 1]
    for (_, _, a), (_, _, b) in zip(plain, streamed):
        for part in ("maps", "ratios", "sums", "bias", "extras"):
            assert {k: _bits(v) for k, v in getattr(a, part).items()} == \
                   {k: _bits(v) for k, v in getattr(b, part).items()}, part
        assert a.errors == b.errors


def _hooks(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_a_reader_that_stops_early_stops_the_stream():
    lm = tiny("gpt2")
    list(decompose_sequences(lm, SEQS[:1], maps=("ATB",), stream=True))  # transformers' own hooks, once
    hooks, threads = _hooks(lm.model), threading.active_count()
    gen = decompose_sequences(lm, SEQS, maps=("ATB",), stream=True)
    k, layer, _ = next(gen)
    assert (k, layer) == (0, 0)
    gen.close()  # the helper thread stops inside its forward pass and the hooks are removed
    assert threading.active_count() == threads and _hooks(lm.model) == hooks


def test_an_error_in_the_stream_arrives_as_itself(monkeypatch):
    lm = tiny("llama")
    monkeypatch.setattr(engine, "ERROR_BOUND", 0.0)
    with pytest.raises(ReconstructionError, match="exceeds"):
        list(decompose_sequences(lm, SEQS, maps=("ATB",), stream=True))
    assert not [t for t in threading.enumerate() if t.name == "decompose-stream"]


def test_long_sequences_stream_by_default():
    assert chunks.streams(4096, 2, 4) and chunks.streams(1024, 30, 4) and not chunks.streams(4096, 1, 4)
    assert not chunks.streams(128, 30, 9) and not chunks.streams(512, 12, 9)


def test_float16_maps_within_the_stated_rounding():
    lm = tiny("llama")
    kw = dict(maps=lm.layer_weights(0).scopes + K21_METHODS, extras=True)
    full = list(decompose_sequences(lm, SEQS, **kw))
    half = list(decompose_sequences(lm, SEQS, maps_dtype=torch.float16, **kw))
    for (_, _, a), (_, _, b) in zip(full, half):
        assert a.sums.keys() == b.sums.keys() and all(torch.equal(a.sums[k], b.sums[k]) for k in a.sums)
        for k, m in a.maps.items():
            h = b.maps[k]
            assert h.dtype == torch.float16
            err = (h.float() - m).abs()
            assert bool((err <= 2.0 ** -11 * m.abs() + 2.0 ** -25).all()), k
    # a value beyond float16's range keeps its map in float32 rather than turning it infinite
    r = LayerResult(maps={"big": torch.tensor([[1e5, 1.0]]), "small": torch.tensor([[0.5, 1e-3]])})
    out = engine._half_maps(r, torch.float16)
    assert out.maps["big"].dtype == torch.float32 and out.maps["small"].dtype == torch.float16
    with pytest.raises(ValueError, match="maps_dtype"):
        list(decompose_sequences(lm, SEQS, maps_dtype=torch.int8))
