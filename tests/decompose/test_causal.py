"""Causal pairs only (SPEC §8): a causal layer's n^2 steps cover the pairs j <= i, with the same numbers
as every pair; long sequences tile a chunk's sources; the FLOP model counts the work actually done."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from report_builder import costs
from report_builder.decompose import chunks
from report_builder.decompose.attention import is_causal
from report_builder.decompose.layouts import decompose_batch, decompose_layer
from report_builder.decompose.reference import reference_layer, reference_maps
from report_builder.models.capture import forward_capture
from report_builder.schema import K21_METHODS
from tests.tiny_models import FAMILIES, tiny

PARTS = ("maps", "ratios", "sums", "bias", "extras")


def _capture(lm, n: int, layer: int = 1):
    ids = torch.arange(5, 5 + n).unsqueeze(0)
    cap = forward_capture(lm.model, lm.adapter, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})[layer]
    return lm.layer_weights(layer), cap.x[0], cap.alpha[0], {k: t[0] for k, t in cap.refs.items()}


def _all(lw, x, a, refs, **kw):
    return decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True, extras=True, refs=refs, **kw)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a.reshape(-1).view(torch.uint8),
                                                                           b.reshape(-1).view(torch.uint8)))


@pytest.mark.parametrize("family", FAMILIES)
def test_causal_pairs_give_the_numbers_of_every_pair(family):
    """Detected from the probabilities; the pairs j <= i alone give every map, ratio, sum, bias term,
    extra and error bit for bit as the square does (chunks of 3 rows, so each reads a shorter prefix),
    and the maps hold exact zeros for j > i."""
    lm = tiny(family)
    lw, x, a, refs = _capture(lm, 13)
    assert is_causal(a) == lm.causal, family
    fast = _all(lw, x, a, refs, chunk_rows=3)
    square = _all(lw, x, a, refs, chunk_rows=3, causal=False)
    for part in PARTS:
        got, ref = getattr(fast, part), getattr(square, part)
        assert got.keys() == ref.keys(), part
        for k in ref:
            assert _same_bits(got[k], ref[k]), (family, part, k)
    assert fast.errors == square.errors and max(fast.errors.values()) < 1e-5
    if lm.causal:
        for k, m in fast.maps.items():
            if not torch.isnan(m).all():
                assert torch.equal(torch.triu(m, 1), torch.zeros_like(m)), (family, k)


def test_causal_true_refuses_bidirectional_probabilities():
    lw, x, a, _ = _capture(tiny("bert"), 9)
    with pytest.raises(ValueError, match="not causal"):
        decompose_layer(lw, x, a, maps=lw.scopes, causal=True)
    lw, x, a, _ = _capture(tiny("llama"), 9)
    assert decompose_layer(lw, x, a, maps=lw.scopes, causal=True).maps.keys() == set(lw.scopes)


@pytest.mark.parametrize("family", ["bert", "llama", "gpt2", "gemma2", "opt-post"])
def test_long_sequences_tile_the_sources(family, monkeypatch):
    """Past `CACHE_NUMBERS` per row a chunk's sources are cut into tiles (here tiles of 1 or 2 sources): the
    maps, sums and extras equal one tile's within float rounding, the naive oracle's within 1e-5 and
    every check point the HF tensors within 1e-5."""
    lm = tiny(family)
    lw, x, a, refs = _capture(lm, 21)
    one = _all(lw, x, a, refs)
    monkeypatch.setattr(chunks, "CACHE_NUMBERS", 1500)
    monkeypatch.setattr(chunks, "LONG_ROWS", 4)
    rows, tile = chunks.ff_tiles(21, x.shape[-1], lw.ff.d_ff, gated=lw.ff.gated and lw.layout.id != "sandwich")
    assert rows == 4 and 1 <= tile < 21, (rows, tile)
    tiled = _all(lw, x, a, refs)
    for part in PARTS:
        for k, ref in getattr(one, part).items():
            got = getattr(tiled, part)[k]
            scale = ref.abs().max().clamp_min(1e-30)
            assert float((got - ref).abs().max() / scale) < 1e-6, (family, part, k)
    if family in FAMILIES:  # the naive oracle's layouts (the sandwich one is in tests/test_layouts.py)
        ref_maps = reference_maps(reference_layer(lw, x, a))
        for s in lw.scopes:
            assert float((tiled.maps[s] - ref_maps[s]).abs().max() / ref_maps[s].abs().max()) < 1e-5, (family, s)
    assert max(tiled.errors.values()) < 1e-5


def test_padded_batch_of_a_causal_model_stays_causal():
    """Right-padded batches mask the pads; the masked probabilities are causal, so the batch takes the
    causal path and gives each sequence's maps (zeros for j > i)."""
    lm = tiny("llama")
    ids = torch.tensor([list(range(5, 17)), list(range(5, 12)) + [0] * 5])
    caps = forward_capture(lm.model, lm.adapter, {"input_ids": ids, "attention_mask": torch.tensor(
        [[1] * 12, [1] * 7 + [0] * 5])}, [0])
    lw = lm.layer_weights(0)
    out = decompose_batch(lw, caps[0].x, caps[0].alpha, [12, 7], maps=lw.scopes, chunk_rows=2)
    sq = decompose_batch(lw, caps[0].x, caps[0].alpha, [12, 7], maps=lw.scopes, chunk_rows=2, causal=False)
    for r, q in zip(out, sq):
        for s in lw.scopes:
            assert _same_bits(r.maps[s], q.maps[s]), s
            assert torch.equal(torch.triu(r.maps[s], 1), torch.zeros_like(r.maps[s]))


def test_pair_counts_and_tiles():
    brute = lambda n, r: sum((min(n, s + r) - s) * min(n, s + r) for s in range(0, n, r))  # noqa: E731
    for n in (1, 2, 7, 64, 129):
        assert chunks.pair_count(n, False) == n * n and chunks.pair_count(n, True) == n * (n + 1) // 2
        for r in (1, 3, 7, 200):
            assert chunks.pair_count(n, True, r) == brute(n, r)
    # short: today's rows over every source; long: LONG_ROWS rows over tiles near CACHE_NUMBERS
    assert chunks.ff_tiles(128, 576, 1536, gated=True) == (chunks.default_chunk_rows(128, 576, 1536, gated=True), 128)
    rows, tile = chunks.ff_tiles(4096, 576, 1536, gated=True)
    assert rows == chunks.LONG_ROWS and tile * rows * (2 * 1536 + 2 * 576) <= chunks.CACHE_NUMBERS < 4096 * 4224
    rows, tile = chunks.ff_tiles(4096, 576, 1536, gated=True, budget_bytes=1 << 20)
    assert rows * tile * (3 * 1536 + 5 * 576) * 4 <= 1 << 20 or rows == 1


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_flop_model_counts_the_causal_work_done(family):
    """A causal layer of 200 tokens (two FF chunks, two attention blocks): torch's count of every
    matmul equals the FLOP model's, which counts the chunks' pairs, about half the square."""
    from torch.utils.flop_counter import FlopCounterMode

    lm = tiny(family)
    s = costs.shape_of(lm.config, lm.adapter)
    assert s.causal
    n = 200
    lw = lm.layer_weights(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, s.d, generator=g)
    scores = torch.randn(s.heads, n, n, generator=g).masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    alpha = scores.softmax(-1)
    fc = FlopCounterMode(display=False)
    with torch.no_grad(), fc:
        decompose_layer(lw, x, alpha, maps=lw.scopes, extras=True)
    assert fc.get_total_flops() == pytest.approx(costs.work_flops("full", s, n, ig_pts=0), rel=0.03)
    square = costs.work_flops("full", dataclasses.replace(s, causal=False), n, ig_pts=0)
    assert 0.5 < costs.work_flops("full", s, n, ig_pts=0) / square < 0.85
    assert costs.pairs(s, n, minimal=True) == n * (n + 1) // 2 < costs.pairs(s, n) < n * n
