"""Analysis ``k21_mixing``: per-token context-mixing ratios of the five K21 methods on masked inputs.

Also returns the dataset's per-model size and mean length (``dataset_stats``, folded into the
``datasets`` table by the runner). Pitfall: encoders are masked at ``k21.mask_rate`` with
``k21.seed``; causal models never are (their mask rate in the cache key is 0).
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import inputs, k21_compute
from report_builder.analyses.base import Analysis, Run, Subject
from report_builder.data import mean_tokens


def _params(s: Subject) -> dict:
    return {**s.data_params(), "mask_rate": inputs.mask_rate(s), "seed": s.cfg.k21.seed}


def _compute(run: Run) -> dict[str, pd.DataFrame]:
    s = run.subject
    enc = inputs.masked(run)
    with run.progress("K21 ratios", len(enc)) as bar:
        out = k21_compute.mixing_ratios(run.lm(), enc, model=s.model.name, dataset=s.dataset.id,
                                        batch_size=s.cfg.batch_size, budget_bytes=s.cfg.budget_bytes(), on_batch=bar)
    out["dataset_stats"] = pd.DataFrame([dict(dataset=s.dataset.id, model=s.model.name, n_samples=len(enc),
                                              mean_tokens=mean_tokens(enc))])
    return out


ANALYSIS = Analysis(id="k21_mixing", version=2, scope="dataset", inputs="masked", params=_params,
                    size=lambda s: s.n_items, compute=_compute, tables=("k21_tokens", "recon_errors", "dataset_stats"))
