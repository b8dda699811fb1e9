"""`report-builder bench --k21-pass N`: a timed K21 pass over N synthetic sequences (the engine's ratios
and the analyses' tables), and the K21 host statistics timed apart on random ratios.

The K21 host statistics are what `k21_mixing` and `k21_frequency` do per sequence and layer besides
the decomposition: each layer's ratios to the host and the ``k21_tokens`` rows (`k21_compute.TensorRows`,
`stats.k21_tables.TokenRows`) and the layer-averaged ``k21_freq`` table with its frequency ranks
(`stats.k21_tables.frequency_table`). The paper's size is 992 sequences of ~86 tokens on BERT-base
(``--shape base``, random weights). A developer tool times the frozen previous implementation beside
this one (``python -m tests.tools.bench_stats --k21-pass N``, with `random_ratios` and `run_host`).

Pitfall: the ratios are random, not a model's, and every token is its own word; the tables' cost
depends on the number of tokens, not on their values.
"""
from __future__ import annotations

import gc
import time
from typing import Callable

import numpy as np
import torch

from report_builder.bench.memory import GIB, MIB, parse_bytes
from report_builder.bench.shapes import SHAPES, build, layer_dims, parse_dtype
from report_builder.bench.timing import pass_heading, sync, tf32_on
from report_builder.schema import K21_METHODS


def random_ratios(lengths: list[int], n_layers: int, seed: int = 0) -> list[list[dict[str, torch.Tensor]]]:
    """Random float32 ratios ``[seq][layer][method]`` in [0, 1), as a `LayerResult` holds them; every
    7th token's ``ATTNRESLN-N`` is NaN (as a layout without that scope writes it)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in lengths:
        per_layer = []
        for _ in range(n_layers):
            r = {m: torch.rand(n, generator=g) for m in K21_METHODS}
            r["ATTNRESLN-N"][::7] = float("nan")
            per_layer.append(r)
        out.append(per_layer)
    return out


def synthetic_ranks(vocab: int, seed: int = 0) -> dict[int, int]:
    """``{token id: frequency rank}`` for every id of a vocabulary, seeded, with ties (ranks 1..vocab/4)."""
    rng = np.random.default_rng(seed)
    return dict(zip(range(vocab), (rng.integers(1, max(2, vocab // 4), vocab)).tolist()))


def current_impl() -> tuple[Callable, Callable, Callable]:
    """The current host statistics as (rows class, ratios -> what its ``add`` takes, frequency table)."""
    from report_builder.analyses.k21_compute import TensorRows, frequency_table

    return TensorRows, _same, frequency_table


def _same(r):
    return r


def run_host(impl: tuple[Callable, Callable, Callable], encoded: list, ratios, ranks: dict[int, int],
             model: str = "m", dataset: str = "synthetic") -> tuple[float, float, dict]:
    """Feed every (sequence, layer) of ``ratios`` to ``impl``'s rows (as `k21_compute.mixing_ratios`
    does), build ``k21_tokens``, then ``k21_freq`` from it: the seconds of each and the tables."""
    rows_cls, convert, freq = impl
    gc.collect()  # each side starts without the other's garbage (interleaved runs)
    t0 = time.perf_counter()
    rows = rows_cls()
    for e, per_layer in zip(encoded, ratios):
        for layer, r in enumerate(per_layer):
            rows.add(e, layer, convert(r))
    toks = rows.frame(model, dataset)
    t1 = time.perf_counter()
    f = freq(toks, encoded, ranks)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, {"k21_tokens": toks, "k21_freq": f}


def time_k21_host(encoded: list, n_layers: int, vocab: int, *, repeats: int = 3, seed: int = 0) -> dict:
    """Time the current K21 host statistics on random ratios of ``encoded``'s lengths (``n_layers``
    layers each), fastest of ``repeats``. Returns ``k21_host_seqs``, ``k21_host_layers``,
    ``k21_host_tokens`` and seconds per sequence and layer: ``k21_tokens_s`` (the k21_tokens rows),
    ``k21_freq_s`` (k21_freq from them) and ``k21_host_s`` (both)."""
    ratios = random_ratios([len(e) for e in encoded], n_layers, seed=seed)
    ranks = synthetic_ranks(vocab, seed)
    impl = current_impl()
    runs = [run_host(impl, encoded, ratios, ranks)[:2] for _ in range(max(1, repeats))]
    units = max(1, len(encoded) * n_layers)
    tok, fr = min(r[0] for r in runs) / units, min(r[1] for r in runs) / units
    return {"k21_host_seqs": len(encoded), "k21_host_layers": n_layers,
            "k21_host_tokens": sum(len(e) for e in encoded), "k21_tokens_s": tok, "k21_freq_s": fr,
            "k21_host_s": tok + fr}


def run_k21_pass(*, shape: str | None = "base", model: str | None = None, n_seqs: int = 992, seq_len: int = 86,
                 batch: int | None = None, device: str = "cpu", dtype: str = "float32",
                 max_memory: str | int | None = None, threads: int | None = None, host_seqs: int = 64,
                 on_batch: Callable[[int, float], None] | None = None) -> dict:
    """A timed K21 pass: `k21_compute.mixing_ratios` (the five ratios of every layer through the
    engine, the ``k21_tokens`` rows) and `k21_compute.frequency_table` over ``n_seqs`` random sequences
    of ``seq_len`` tokens.

    On CUDA the engine's batched path runs batches sized from the device's free memory (at most ``batch``
    sequences when given), only the ratios reaching the host; on CPU the deterministic path runs
    ``threads`` worker threads (`engine.set_cpu_workers`). ``on_batch(sequences done, seconds)``: progress. Returns seconds, sequences/s,
    tokens/s, the tables' share of the pass, and (``host_seqs`` > 0) the host statistics timed apart
    on random ratios of up to ``host_seqs`` of the sequences (default 64, a task's fixed costs then
    weigh as in a shard; a paper set is ~1000) and every layer (`time_k21_host`).
    """
    from report_builder.analyses import k21_compute
    from report_builder.engine import set_cpu_workers

    tf32 = parse_dtype(dtype)[1]
    lm = build(None if model else shape, model, device, dtype)
    dims = layer_dims(lm)
    from report_builder.bench.k24_pass import synthetic_encoded

    enc = synthetic_encoded(lm, n_seqs, seq_len)
    vocab = int(lm.config.vocab_size)
    ranks = synthetic_ranks(vocab)
    limit = parse_bytes(max_memory)
    budget = limit if limit is not None else (4 * GIB if device.startswith("cuda") else 512 * MIB)
    workers = None if device.startswith("cuda") else max(1, threads or 1)
    if workers is not None:
        set_cpu_workers(workers)
    sizes: list[int] = []
    sync(device)
    t0 = time.perf_counter()

    def done(k: int) -> None:
        sizes.append(k)
        if on_batch is not None:
            on_batch(sum(sizes), time.perf_counter() - t0)

    with torch.no_grad():
        out = k21_compute.mixing_ratios(lm, enc, model=lm.name, dataset="synthetic", batch_size=batch,
                                        budget_bytes=budget, on_batch=done)
    sync(device)
    t1 = time.perf_counter()
    k21_compute.frequency_table(out["k21_tokens"], enc, ranks)
    t2 = time.perf_counter()
    secs = t2 - t0
    host = {}
    if host_seqs > 0:
        host = time_k21_host(enc[:host_seqs], lm.n_layers, vocab)
        host["k21_host_pass_s"] = host["k21_host_s"] * n_seqs * lm.n_layers
    cuda = device.startswith("cuda")
    return {"shape": shape, "model": model, **dims, "n_seqs": n_seqs, "seq_len": seq_len,
            "batch": max(sizes, default=0) if cuda else batch, "batch_cap": batch, "batches": len(sizes) if cuda else None,
            "device": device, "dtype": dtype, "tf32": tf32 or tf32_on(device), "budget_bytes": budget,
            "workers": workers, "seconds": secs, "ratios_seconds": t1 - t0, "freq_seconds": t2 - t1,
            "seqs_per_s": n_seqs / secs, "tokens_per_s": n_seqs * seq_len / secs,
            "max_rel_error": float(out["recon_errors"]["max_rel_error"].max()), "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None, **host}


def format_host(r: dict) -> str:
    """One line of `time_k21_host`'s result."""
    return (f"K21 host statistics (random ratios, {r['k21_host_seqs']} sequences x {r['k21_host_layers']} layers, "
            f"{r['k21_host_tokens'] / max(1, r['k21_host_seqs']):.0f} tokens each): "
            f"{r['k21_host_s'] * 1e3:.3f} ms per sequence and layer (k21_tokens rows {r['k21_tokens_s'] * 1e3:.3f}, "
            f"k21_freq {r['k21_freq_s'] * 1e3:.3f})")


def format_k21_pass(r: dict) -> str:
    """One line of `run_k21_pass`'s result, and one of its host statistics when they were timed."""
    return (pass_heading("K21", r, SHAPES[r["shape"]][2] if r["shape"] else "")
            + f" (ratios and k21_tokens {r['ratios_seconds']:.1f} s, k21_freq {r['freq_seconds']:.2f} s); "
            f"max reconstruction error {r['max_rel_error']:.1e}"
            + (f"\n{format_host(r)}; ~{r['k21_host_pass_s']:.2f} s of this pass" if "k21_host_s" in r else ""))
