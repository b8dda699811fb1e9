"""The K24 host statistics against their frozen previous implementation, timed in one run.

    python -m tests.tools.bench_stats --k24-pass N [--shape base] [--seq-len 128] [--repeats 2] [--json]

`report-builder bench --k24-pass N` times the current implementation alone (`bench.host_stats`). This
developer tool runs it and `tests.reference.k24_host_stats.NaiveHostStats` (the code it replaced,
issue #16) on the same random maps of N synthetic sequences (`bench.k24_pass.synthetic_encoded`) and
every layer of the shape, interleaved, fastest of ``--repeats`` each, and prints both timings per
sequence and layer, their ratio and whether their tables are bit-identical.

Pitfall: run it from the repository root (``tests`` must be importable); on a busy machine compare
ratios, not seconds: both sides run under the same load because they are interleaved.
"""
from __future__ import annotations

import argparse
import json
import sys

from report_builder.bench.host_stats import random_maps, run_host
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


def main(argv: list[str] | None = None) -> int:
    from report_builder.bench.k24_pass import synthetic_encoded
    from report_builder.bench.shapes import SHAPES, build

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k24-pass", type=int, default=16, metavar="N", help="synthetic sequences (default 16)")
    ap.add_argument("--shape", default="base", choices=sorted(SHAPES), help="its layers and layout (default base)")
    ap.add_argument("--model", default=None, metavar="SOURCE", help="a real model's instead of a shape's")
    ap.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    ap.add_argument("--repeats", type=int, default=2, help="timed repeats of each (default 2)")
    ap.add_argument("--ties", action="store_true", help="maps drawn from 8 levels (large tie groups)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the line")
    args = ap.parse_args(argv)
    lm = build(None if args.model else args.shape, args.model, "cpu", "float32")
    enc = synthetic_encoded(lm, args.k24_pass, args.seq_len)
    r = compare_host_stats(lm.adapter.layout, lm.causal, enc, lm.n_layers, repeats=args.repeats, ties=args.ties)
    print(json.dumps(r) if args.json else format_compare(r))
    return 0 if r["host_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
