"""Analysis ``k24_examples``: row-normalised scope maps of every layer for a few example sequences.

The examples are the K21 pair and the first dataset's first items (`inputs.examples`); runs for a
model's first dataset only.
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import inputs, k24_compute
from report_builder.analyses.base import Analysis, Run, Subject, Work


def _params(s: Subject) -> dict:
    return {**s.data_params(), "examples": s.cfg.k24.examples, "example": list(s.cfg.k21.example)}


def _compute(run: Run) -> dict[str, pd.DataFrame]:
    enc, names = inputs.examples(run)
    return {"k24_maps": k24_compute.example_maps(run.lm(), enc, names, model=run.subject.model.name)}


ANALYSIS = Analysis(id="k24_examples", version=2, scope="first_dataset", inputs="examples", params=_params,
                    size=lambda s: 1 + min(max(0, s.cfg.k24.examples - 1), s.n_items), compute=_compute,
                    tables=("k24_maps",), work=Work("full", 5e-3, 3e-6,
                                                 rows=lambda t: {"k24_maps": t.n_scopes * t.layers * t.pairs}))
