"""Analysis ``k21_example``: the five K21 maps at every layer for the configured example pair.

Pitfall: the pair (``k21.example``) is part of the cache key; the dataset is not read.
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import inputs, k21_compute
from report_builder.analyses.base import Analysis, Run, Subject, Work


def _params(s: Subject) -> dict:
    return {**s.base_params(), "example": list(s.cfg.k21.example)}


def _compute(run: Run) -> dict[str, pd.DataFrame]:
    return k21_compute.example_maps(run.lm(), inputs.pair(run), model=run.subject.model.name)


ANALYSIS = Analysis(id="k21_example", version=2, scope="model", inputs="pair", params=_params,
                    size=lambda s: 1, compute=_compute, tables=("k21_maps",), work=Work("maps", 2e-3, 3e-6, rows=lambda t: {"k21_maps": 5 * t.layers * sum(n * n for n in t.lengths)}))
