"""The K24 pass's host statistics timed apart: `k24_compute.HostStats` (per sequence and layer: context
changes, FF-amp top pairs, pair categories) on random scope maps, in seconds per sequence and layer.

Pure numpy/pandas (no torch): the maps are random, not a model's. A developer tool times the frozen
previous implementation beside this one (``python -m tests.tools.bench_stats``, with
`random_maps` and `run_host`). Pitfall: random float maps have almost no ties, so ranking is cheaper
than on real maps with their tie groups; ``ties=True`` draws from 8 levels instead.
"""
from __future__ import annotations

import time

import numpy as np


def random_maps(lay, causal: bool, lengths: list[int], n_layers: int, seed: int = 0,
                ties: bool = False) -> list[list[dict[str, np.ndarray]]]:
    """Random float32 scope maps ``[seq][layer][scope]`` of the layout ``lay`` (lower triangle only if
    ``causal``); with ``ties`` values are drawn from 8 levels, so ranks have large tie groups."""
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        per_layer = []
        for _ in range(n_layers):
            maps = {}
            for s in lay.scopes:
                m = (rng.integers(0, 8, (n, n)) / 8.0 if ties else rng.random((n, n))).astype(np.float32)
                maps[s] = np.tril(m) if causal else m
            per_layer.append(maps)
        out.append(per_layer)
    return out


def run_host(cls, lay, causal: bool, encoded: list, maps, top_k: int, include_special: bool) -> tuple[float, dict]:
    """Feed every (sequence, layer) of ``maps`` to a fresh ``cls`` (`HostStats` or a class with its
    interface); the seconds that took and its tables."""
    n_layers = len(maps[0]) if maps else 0
    st = cls(lay, causal, top_k=top_k, include_special=include_special, n_layers=n_layers)
    t0 = time.perf_counter()
    for e, per_layer in zip(encoded, maps):
        for layer, m in enumerate(per_layer):
            st.add(e, layer, m)
    secs = time.perf_counter() - t0
    return secs, st.tables()


def time_host_stats(lay, causal: bool, encoded: list, n_layers: int, *, top_k: int = 20,
                    include_special: bool = True, repeats: int = 2, seed: int = 0, ties: bool = False) -> dict:
    """Time `k24_compute.HostStats` on random maps of ``encoded``'s lengths (``n_layers`` layers each),
    fastest of ``repeats``. Returns ``host_seqs``, ``host_layers`` and ``host_s`` (seconds per sequence
    and layer)."""
    from report_builder.stats.host_stats import HostStats

    maps = random_maps(lay, causal, [len(e) for e in encoded], n_layers, seed=seed, ties=ties)
    secs = [run_host(HostStats, lay, causal, encoded, maps, top_k, include_special)[0] for _ in range(max(1, repeats))]
    units = max(1, len(encoded) * n_layers)
    return {"host_seqs": len(encoded), "host_layers": n_layers, "host_s": min(secs) / units}


def format_host(r: dict) -> str:
    """One line of `time_host_stats`'s result."""
    return (f"host statistics (random maps, {r['host_seqs']} sequences x {r['host_layers']} layers): "
            f"{r['host_s'] * 1e3:.2f} ms per sequence and layer")
