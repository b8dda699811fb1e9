"""Analysis ``k21_mixing``: per-token context-mixing ratios of the five K21 methods on masked inputs.

Also returns the dataset's per-model size and mean length (``dataset_stats``, folded into the
``datasets`` table by the runner). Sharded by sequence ranges: per-token rows concatenate, errors
take the maximum, sequence and token counts add. Pitfall: encoders are masked at ``k21.mask_rate`` with
``k21.seed``; causal models never are (their mask rate in the cache key is 0).
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import inputs, k21_compute
from report_builder.analyses.base import Analysis, Run, Shard, Subject, Work
from report_builder.data.encode import mean_tokens_of


def _params(s: Subject) -> dict:
    return {**s.data_params(), "mask_rate": inputs.mask_rate(s), "seed": s.cfg.k21.seed}


def _map(run: Run, lo: int, hi: int) -> dict[str, pd.DataFrame]:
    s = run.subject
    enc = inputs.masked(run)[lo:hi]  # masked as a whole, then sliced (the masks draw from one RNG)
    with run.progress("K21 ratios", len(enc)) as bar:
        out = k21_compute.mixing_ratios(run.lm(), enc, model=s.model.name, dataset=s.dataset.id,
                                        batch_size=ANALYSIS.work.batch(s.cfg.batch_size), budget_bytes=s.cfg.budget_bytes(), on_batch=bar)
    out["counts"] = pd.DataFrame([dict(n_samples=len(enc), n_tokens=sum(len(e.input_ids) for e in enc))])
    return out


def _reduce(s: Subject, partials: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    partials = sorted(partials, key=lambda p: int(p["k21_tokens"]["seq"].min()))  # in sequence order
    toks = [p["k21_tokens"] for p in partials]
    n = sum(int(p["counts"]["n_samples"].iloc[0]) for p in partials)
    n_tokens = sum(int(p["counts"]["n_tokens"].iloc[0]) for p in partials)
    return {"k21_tokens": toks[0] if len(toks) == 1 else pd.concat(toks, ignore_index=True),
            "recon_errors": k21_compute.max_errors(s.model.name, s.dataset.id, [p["recon_errors"] for p in partials]),
            "dataset_stats": pd.DataFrame([dict(dataset=s.dataset.id, model=s.model.name, n_samples=n,
                                                mean_tokens=mean_tokens_of(n_tokens, n))])}


SHARD = Shard(items=lambda s: s.n_items, map=_map, reduce=_reduce)

ANALYSIS = Analysis(id="k21_mixing", version=2, scope="dataset", inputs="masked", params=_params,
                    size=lambda s: s.n_items, compute=SHARD.whole, tables=("k21_tokens", "recon_errors", "dataset_stats"),
                    shard=SHARD, work=Work("ratios", 2e-5, batch_divisor=1, rows=lambda t: {
                        "k21_tokens": t.layers * t.tokens, "recon_errors": 3 * t.layers, "dataset_stats": 1}))
"""Host cost: the k21_tokens rows, ~0.02 ms per sequence and layer (``bench --k21-pass``, BERT-base shape,
~86 tokens; 0.1-0.3 ms before issue #25's vectorised `stats.k21_tables`)."""
