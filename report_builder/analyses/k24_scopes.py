"""Analysis ``k24_scopes``: every K24 table from one full-layer pass over the first ``k24_n`` sequences.

Contextualization change, FF-amp pairs and base rates, RES/FF norms, per-dimension LN effects and
the reconstruction errors. Sharded over its first ``k24_n`` sequences: each range's sufficient
statistics (`k24_compute.scope_partials`) reduce exactly (`k24_compute.reduce_scopes`). Pitfall: the IG method is in the cache
key; under a numerical IG only the check points before FF are enforced.
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import inputs, k24_compute
from report_builder.analyses.base import Analysis, Run, Shard, Subject, Work
from report_builder.decompose.options import IGOptions


def ig_options(cfg) -> IGOptions:
    """The FF integrated-gradients options of a configuration."""
    return IGOptions(method=cfg.ig.method, steps=cfg.ig.steps)


def _params(s: Subject) -> dict:
    k24 = s.cfg.k24
    return {**s.data_params(), "k24_n": inputs.k24_items(s), "top_k": k24.top_k,
            "include_special": k24.include_special, "ig": ig_options(s.cfg).describe(), "ffamp": k24.ffamp_normalise}


def _items(s: Subject) -> int:
    return min(inputs.k24_items(s), s.n_items)


def _map(run: Run, lo: int, hi: int) -> dict[str, pd.DataFrame]:
    s = run.subject
    enc = inputs.unmasked(run, hi)[lo:hi]
    with run.progress("K24 full layers", len(enc)) as bar:
        return k24_compute.scope_partials(run.lm(), enc, top_k=s.cfg.k24.top_k,
                                          include_special=s.cfg.k24.include_special, ig=ig_options(s.cfg),
                                          batch_size=WORK.batch(s.cfg.batch_size),
                                          budget_bytes=s.cfg.budget_bytes(), on_batch=bar)


def _reduce(s: Subject, partials: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    return k24_compute.reduce_scopes(partials, model=s.model.name, dataset=s.dataset.id, top_k=s.cfg.k24.top_k,
                                     causal=s.causal)


SHARD = Shard(items=_items, map=_map, reduce=_reduce)

WORK = Work("full", 2.5e-4, 1.4e-7, batch_divisor=2, rows=lambda t: {
    "k24_ctx": 2 * t.n_scopes * t.layers, "k24_ffamp_pairs": t.top_k * t.layers, "k24_ffamp_base": 8 * t.layers,
    "k24_res_norms": t.layers, "k24_ln_dims": t.layers * t.d, "recon_errors": t.n_scopes * t.layers})
"""The full layer, plus the pass's host statistics (`stats.host_stats.HostStats`), as
`tests.tools.bench_stats` timed them (what ``bench --k24-pass`` prints: random float32 maps of
synthetic sequences, every layer, fastest of 3; development machine, 2 shared cores, load ~3, one
thread): BERT-base (post-LN, all n^2 pairs) 0.35 / 0.73 / 2.3 ms and Llama/SmolLM2 (pre-LN, causal:
n(n+1)/2 pairs) 0.32 / 0.50 / 1.4 ms per sequence and layer at n = 32 / 64 / 128, fitted as ~0.25 ms
+ 0.14 µs per valid token pair (the previous implementation, in the same runs: 1.8 / 5.7 / 23.7 ms
and 1.3 / 3.5 / 12.9 ms, the ~4 ms + 1.2 µs per pair these constants were before issue #16's rewrite)."""

ANALYSIS = Analysis(id="k24_scopes", version=2, scope="dataset", inputs="unmasked", params=_params,
                    size=_items, compute=SHARD.whole,
                    tables=("k24_ctx", "k24_ffamp_pairs", "k24_ffamp_base", "k24_res_norms", "k24_ln_dims",
                            "recon_errors"), shard=SHARD, work=WORK)
