"""`report-builder bench --k24-pass N`: a timed K24 pass over N synthetic sequences, the engine and the
pass's host statistics (`bench.host_stats`) of the current implementation.

The paper's size is 992 sequences x 128 tokens on BERT-base (``--shape base``, random weights). The
frozen previous host statistics are timed beside these by a developer tool, ``python -m
tests.tools.bench_stats``. Pitfall: the sequences are random token ids, one word per token, so pair
categories and snippets are cheaper than on real text; the timing is of the pass, not of its inputs.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from report_builder.bench.host_stats import format_host, time_host_stats
from report_builder.bench.memory import GIB, MIB, parse_bytes
from report_builder.bench.shapes import SHAPES, build, layer_dims, parse_dtype
from report_builder.bench.timing import pass_heading, sync, tf32_on
from report_builder.costs import ff_flops
from report_builder.decompose.chunks import pair_count
from report_builder.decompose.options import IGOptions


def synthetic_encoded(lm, n_seqs: int, seq_len: int, seed: int = 0) -> list:
    """``n_seqs`` random sequences of ``seq_len`` tokens as `EncodedSeq` (one word per token, the first
    token special; encoders also end on a special token), for timing the analyses end to end."""
    from report_builder.data.encode import EncodedSeq

    vocab = int(lm.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n_seqs):
        ids = torch.randint(min(100, vocab // 2), vocab, (seq_len,), generator=g).tolist()
        words = [f"w{t}" for t in ids]
        special = [p == 0 or (not lm.causal and p == seq_len - 1) for p in range(seq_len)]
        offsets, pos = [], 0
        for w in words:
            offsets.append((pos, pos + len(w)))
            pos += len(w) + 1
        out.append(EncodedSeq(
            input_ids=ids, token_type_ids=None if lm.causal else [0] * seq_len, tokens=words, special=special,
            masked=[False] * seq_len, category=["[CLS]" if sp else "Normal" for sp in special],
            word_ids=[None if sp else p for p, sp in enumerate(special)],
            offsets=[None if sp else o for o, sp in zip(offsets, special)], text=" ".join(words),
            item_id=f"s{k}", seq=k))
    return out


def run_k24_pass(*, shape: str | None = "base", model: str | None = None, n_seqs: int = 992, seq_len: int = 128,
                 batch: int | None = None, device: str = "cpu", dtype: str = "float32",
                 max_memory: str | int | None = None, threads: int | None = None, host_seqs: int = 16,
                 on_batch: Callable[[int, float], None] | None = None) -> dict:
    """A timed K24 pass: `k24_compute.scope_analyses` (every scope map of every layer through the
    engine, FF-amp, RES/LN statistics) over ``n_seqs`` random sequences of ``seq_len`` tokens.

    The paper's size is 992 sequences x 128 tokens on BERT-base (``shape="base"``, random weights).
    On CUDA the engine's batched path runs batches sized from the device's free memory (at most
    ``batch`` sequences when given) and the statistics run on the device (`k24_device`), inside the
    timed pass; on CPU the deterministic path runs ``threads`` worker threads and the host statistics.
    Returns seconds (statistics included), sequences/s, tokens/s, the batches run and the FF GFLOP/s
    achieved (on the minimal FLOP count: a causal model's pairs j <= i), and (``host_seqs`` > 0) the
    host statistics of a CPU build timed apart on random maps of ``host_seqs`` of the sequences and
    every layer (`host_stats.time_host_stats`: seconds per sequence and layer). ``on_batch(sequences
    done, seconds)``: progress, after each batch (CUDA) or sequence (CPU).
    """
    from report_builder.analyses import k24_compute

    tf32 = parse_dtype(dtype)[1]
    lm = build(None if model else shape, model, device, dtype)
    dims = layer_dims(lm)
    enc = synthetic_encoded(lm, n_seqs, seq_len)
    limit = parse_bytes(max_memory)
    budget = limit if limit is not None else (4 * GIB if device.startswith("cuda") else 512 * MIB)
    workers = None if device.startswith("cuda") else max(1, threads or 1)
    sizes: list[int] = []
    sync(device)
    t0 = time.perf_counter()

    def done(k: int) -> None:
        sizes.append(k)
        if on_batch is not None:
            on_batch(sum(sizes), time.perf_counter() - t0)

    with torch.no_grad():
        tables = k24_compute.scope_analyses(lm, enc, model=lm.name, dataset="synthetic", ig=IGOptions(),
                                            batch_size=batch, budget_bytes=budget, workers=workers, on_batch=done)
    sync(device)
    secs = time.perf_counter() - t0
    # the FF work a sequence needs: every pair, or a causal model's pairs j <= i (`decompose.chunks.pair_count`)
    flops = ff_flops(seq_len, dims["d_model"], dims["d_ff"], dims["heads"], dims["gated"],
                     pair_count(seq_len, lm.causal)) * lm.n_layers * n_seqs
    host = {}
    if host_seqs > 0:
        host = time_host_stats(lm.adapter.layout, lm.causal, enc[:host_seqs], lm.n_layers)
        host["host_pass_s"] = host["host_s"] * n_seqs * lm.n_layers
    cuda = device.startswith("cuda")
    return {"shape": shape, "model": model, **dims, "n_seqs": n_seqs, "seq_len": seq_len,
            "batch": max(sizes, default=0) if cuda else batch, "batch_cap": batch, "batches": len(sizes) if cuda else None,
            "device": device, "dtype": dtype, "tf32": tf32 or tf32_on(device), "budget_bytes": budget,
            "workers": workers, "stats": "device" if cuda else "host",
            "seconds": secs, "seqs_per_s": n_seqs / secs, "tokens_per_s": n_seqs * seq_len / secs,
            "ff_gflops": flops / secs / 1e9, "ff_flops": flops,
            "max_rel_error": float(tables["recon_errors"]["max_rel_error"].max()),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None, **host}


def format_k24_pass(r: dict) -> str:
    """One line of `run_k24_pass`'s result, and one of its host statistics when they were timed."""
    dev = r.get("stats") == "device"
    return (pass_heading("K24", r, SHAPES[r["shape"]][2] if r["shape"] else "")
            + (f" ({r['batches']} batches, statistics on the device, included)" if dev else "")
            + f", FF {r['ff_gflops']:.3g} GFLOP/s; max reconstruction error {r['max_rel_error']:.1e}"
            + (f"\n{format_host(r)}; ~{r['host_pass_s']:.1f} s of "
               + ("a CPU build's pass (here they run on the device)" if dev else "this pass") if "host_s" in r else ""))
