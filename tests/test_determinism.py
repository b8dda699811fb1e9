"""Reproducible by construction: the result tables are byte-identical whatever the CPU thread count,
the batch size and the order of the sequences (tiny models, a few sequences of mixed lengths)."""
from __future__ import annotations

import io
import random

import pandas as pd
import pytest
import torch

from report_builder import engine
from report_builder.analyses import k21_compute, k24_compute
from tests.analyses.test_k24 import _causal_seq, _encoder_seq
from tests.tiny_models import tiny

WORDS = ("the cat sat on a mat while New York Times reporters wrote about Tohoku University researchers "
         "and their surprising unbelievable results , again . It rained in Paris").split()


def _texts(k: int, n: int) -> list[tuple[str, str]]:
    rng = random.Random(k)
    out = []
    for _ in range(n):
        a = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 22))) + "."
        b = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) + "."
        out.append((a, b))
    return out


def _bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def _run(lm, enc, *, threads: int, batch: int) -> dict[str, bytes]:
    prev = engine.cpu_workers(), torch.get_num_threads()
    engine.set_cpu_workers(threads)
    try:
        out = {}
        for name, df in k21_compute.mixing_ratios(lm, enc, model="m", dataset="d", batch_size=batch).items():
            out["k21/" + name] = _bytes(df)
        for name, df in k24_compute.scope_analyses(lm, enc, model="m", dataset="d", top_k=6,
                                                   batch_size=batch).items():
            out["k24/" + name] = _bytes(df)
        return out
    finally:
        engine.set_cpu_workers(prev[0])
        torch.set_num_threads(prev[1])


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_tables_byte_identical_across_threads_batches_and_order(family):
    lm = tiny(family)
    make = _causal_seq if lm.causal else _encoder_seq
    enc = [make(k, a, b) for k, (a, b) in enumerate(_texts(1, 6))]
    assert len({len(e.input_ids) for e in enc}) > 3  # mixed lengths: padding would change shapes
    ref = _run(lm, enc, threads=1, batch=1)
    shuffled = enc[:]
    random.Random(7).shuffle(shuffled)
    assert [e.seq for e in shuffled] != [e.seq for e in enc]
    for threads, batch, seqs in ((2, 4, enc), (2, 1, shuffled), (1, 4, shuffled)):
        got = _run(lm, seqs, threads=threads, batch=batch)
        assert got.keys() == ref.keys()
        diff = [k for k in ref if got[k] != ref[k]]
        assert not diff, f"threads={threads} batch={batch}: tables differ: {diff}"


def test_workers_share_one_hooked_model_without_mixing_captures():
    """Two worker threads capture through the same hooks: each sequence gets its own tensors."""
    lm = tiny("bert")
    seqs = [engine.Tokens(list(range(5, 5 + n))) for n in (7, 19, 11, 23, 5)]
    alone = {(k, layer): r for k, layer, r in engine.decompose_sequences(lm, seqs, ratios=True, workers=1)}
    both = list(engine.decompose_sequences(lm, seqs, ratios=True, workers=2))
    assert [(k, layer) for k, layer, _ in both] == list(alone)  # input order
    for k, layer, r in both:
        assert r.ratios["ATTN-N"].shape == (len(seqs[k].input_ids),)
        for m, v in r.ratios.items():
            assert torch.equal(v, alone[k, layer].ratios[m])
