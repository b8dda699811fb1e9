"""The K24 and K21 host statistics against their frozen previous implementations, timed in one run.

    python -m tests.tools.bench_stats --k24-pass N [--shape base] [--seq-len 128] [--repeats 2] [--json]
    python -m tests.tools.bench_stats --k21-pass N [--shape base] [--seq-len 86] [--repeats 2] [--json]

`report-builder bench --k24-pass N` times the current K24 implementation alone (`bench.host_stats`).
This developer tool runs it and `tests.reference.k24_host_stats.NaiveHostStats` (the code it replaced,
issue #16) on the same random maps of N synthetic sequences (`bench.k24_pass.synthetic_encoded`) and
every layer of the shape, interleaved, fastest of ``--repeats`` each, and prints both timings per
sequence and layer, their ratio and whether their tables are bit-identical. ``--k21-pass N`` does the
same for the K21 host statistics (`bench.k21_pass`: the k21_tokens rows and the k21_freq table on
random ratios) against `tests.reference.k21_host_stats` (the code issue #25 replaced); both flags
together run both, neither runs the K24 comparison on 16 sequences.

Pitfall: run it from the repository root (``tests`` must be importable); on a busy machine compare
ratios, not seconds: both sides run under the same load because they are interleaved.
"""
from __future__ import annotations

import argparse
import json
import sys

from report_builder.bench.host_stats import random_maps, run_host
from tests.reference.k21_host_stats import NaiveTokenRows, naive_frequency_table
from tests.reference.k24_host_stats import NaiveHostStats, tables_identical


def compare_host_stats(lay, causal: bool, encoded: list, n_layers: int, *, top_k: int = 20,
                       include_special: bool = True, repeats: int = 2, seed: int = 0, ties: bool = False) -> dict:
    """Time `k24_compute.HostStats` and `NaiveHostStats` on the same random maps of ``encoded``'s
    lengths (``n_layers`` layers each), interleaved, fastest of ``repeats`` each.

    Returns seconds per (sequence, layer) of each (``host_s``, ``host_old_s``), their ratio
    (``host_speedup``) and whether the tables are bit-identical (``host_identical``).
    """
    from report_builder.stats.host_stats import HostStats

    maps = random_maps(lay, causal, [len(e) for e in encoded], n_layers, seed=seed, ties=ties)
    new_t, old_t, identical = [], [], True
    for _ in range(max(1, repeats)):
        t_new, tab_new = run_host(HostStats, lay, causal, encoded, maps, top_k, include_special)
        t_old, tab_old = run_host(NaiveHostStats, lay, causal, encoded, maps, top_k, include_special)
        new_t.append(t_new)
        old_t.append(t_old)
        identical = identical and tables_identical(tab_new, tab_old)
    units = max(1, len(encoded) * n_layers)
    new_s, old_s = min(new_t) / units, min(old_t) / units
    return {"host_seqs": len(encoded), "host_layers": n_layers, "host_s": new_s, "host_old_s": old_s,
            "host_speedup": old_s / new_s if new_s > 0 else float("nan"), "host_identical": identical}


def format_compare(r: dict) -> str:
    """One line of `compare_host_stats`'s result."""
    return (f"host statistics (random maps, {r['host_seqs']} sequences x {r['host_layers']} layers): "
            f"{r['host_s'] * 1e3:.2f} ms per sequence and layer, previous implementation "
            f"{r['host_old_s'] * 1e3:.2f} ms ({r['host_speedup']:.1f}x); tables "
            + ("bit-identical" if r["host_identical"] else "DIFFER"))


def compare_k21_host(encoded: list, n_layers: int, vocab: int, *, repeats: int = 2, seed: int = 0) -> dict:
    """Time the current K21 host statistics and the frozen previous ones on the same random ratios of
    ``encoded``'s lengths (``n_layers`` layers each), interleaved, fastest of ``repeats`` each.

    Returns seconds per (sequence, layer) of each, for the k21_tokens rows, the k21_freq table and
    both (``k21_tokens_s``/``k21_tokens_old_s``, ``k21_freq_s``/``..._old_s``, ``k21_host_s``/
    ``k21_host_old_s``), the ratio of the totals (``k21_speedup``) and whether the tables are
    bit-identical (``k21_identical``).
    """
    from report_builder.bench import k21_pass

    ratios = k21_pass.random_ratios([len(e) for e in encoded], n_layers, seed=seed)
    ranks = k21_pass.synthetic_ranks(vocab, seed)
    new_impl = k21_pass.current_impl()
    old_impl = (NaiveTokenRows, lambda r: r, naive_frequency_table)
    new_t, old_t, identical = [], [], True
    for _ in range(max(1, repeats)):
        *t_new, tab_new = k21_pass.run_host(new_impl, encoded, ratios, ranks)
        *t_old, tab_old = k21_pass.run_host(old_impl, encoded, ratios, ranks)
        new_t.append(t_new)
        old_t.append(t_old)
        identical = identical and tables_identical(tab_new, tab_old)
    units = max(1, len(encoded) * n_layers)
    r = {"k21_host_seqs": len(encoded), "k21_host_layers": n_layers,
         "k21_host_tokens": sum(len(e) for e in encoded)}
    for name, k in (("tokens", 0), ("freq", 1)):
        r[f"k21_{name}_s"] = min(t[k] for t in new_t) / units
        r[f"k21_{name}_old_s"] = min(t[k] for t in old_t) / units
    r["k21_host_s"] = r["k21_tokens_s"] + r["k21_freq_s"]
    r["k21_host_old_s"] = r["k21_tokens_old_s"] + r["k21_freq_old_s"]
    r["k21_speedup"] = r["k21_host_old_s"] / r["k21_host_s"] if r["k21_host_s"] > 0 else float("nan")
    r["k21_identical"] = identical
    return r


def format_k21_compare(r: dict) -> str:
    """One line of `compare_k21_host`'s result."""
    return (f"K21 host statistics (random ratios, {r['k21_host_seqs']} sequences x {r['k21_host_layers']} layers, "
            f"{r['k21_host_tokens'] / max(1, r['k21_host_seqs']):.0f} tokens each): "
            f"{r['k21_host_s'] * 1e3:.3f} ms per sequence and layer (k21_tokens {r['k21_tokens_s'] * 1e3:.3f}, "
            f"k21_freq {r['k21_freq_s'] * 1e3:.3f}), previous implementation {r['k21_host_old_s'] * 1e3:.3f} ms "
            f"({r['k21_tokens_old_s'] * 1e3:.3f}, {r['k21_freq_old_s'] * 1e3:.3f}) ({r['k21_speedup']:.1f}x); "
            "tables " + ("bit-identical" if r["k21_identical"] else "DIFFER"))


def main(argv: list[str] | None = None) -> int:
    from report_builder.bench.k24_pass import synthetic_encoded
    from report_builder.bench.shapes import SHAPES, build

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k24-pass", type=int, default=None, metavar="N",
                    help="K24: synthetic sequences (default 16 when --k21-pass is not given)")
    ap.add_argument("--k21-pass", type=int, default=None, metavar="N", help="K21: synthetic sequences")
    ap.add_argument("--shape", default="base", choices=sorted(SHAPES), help="its layers and layout (default base)")
    ap.add_argument("--model", default=None, metavar="SOURCE", help="a real model's instead of a shape's")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 128; K21 alone 86)")
    ap.add_argument("--repeats", type=int, default=2, help="timed repeats of each (default 2)")
    ap.add_argument("--ties", action="store_true", help="maps drawn from 8 levels (large tie groups)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the line")
    args = ap.parse_args(argv)
    if args.k24_pass is None and args.k21_pass is None:
        args.k24_pass = 16
    lm = build(None if args.model else args.shape, args.model, "cpu", "float32")
    out, ok = {}, True
    if args.k24_pass:
        enc = synthetic_encoded(lm, args.k24_pass, args.seq_len or 128)
        r = compare_host_stats(lm.adapter.layout, lm.causal, enc, lm.n_layers, repeats=args.repeats, ties=args.ties)
        out.update(r)
        ok = ok and r["host_identical"]
        if not args.json:
            print(format_compare(r))
    if args.k21_pass:
        seq_len = args.seq_len or (128 if args.k24_pass else 86)
        enc = synthetic_encoded(lm, args.k21_pass, seq_len)
        r = compare_k21_host(enc, lm.n_layers, int(lm.config.vocab_size), repeats=args.repeats)
        out.update(r)
        ok = ok and r["k21_identical"]
        if not args.json:
            print(format_k21_compare(r))
    if args.json:
        print(json.dumps(out))
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main())
