"""Analysis ``k21_expansion``: per layer, how much the attention's value->output map expands vectors.

Weights only (`k21_compute.expansion_rates`). Pitfall: grouped-query heads read their group's W_V.
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import k21_compute
from report_builder.analyses.base import Analysis, Run, Subject, Work


def _params(s: Subject) -> dict:
    return s.base_params()


def _compute(run: Run) -> dict[str, pd.DataFrame]:
    return {"k21_expansion": k21_compute.expansion_rates(run.lm(), model=run.subject.model.name)}


ANALYSIS = Analysis(id="k21_expansion", version=1, scope="model", inputs="weights", params=_params,
                    size=lambda s: 0, compute=_compute, tables=("k21_expansion",), work=Work("weights", rows=lambda t: {"k21_expansion": t.layers}))
