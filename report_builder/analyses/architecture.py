"""Analysis ``architecture``: one row of facts per model (the ``models`` table).

Reads the weights only (sizes, norm, activation, layout, parameter count, fingerprint). Pitfall: the
device is part of the cache key because the row records it.
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses.base import Analysis, Run, Subject, Work


def _params(s: Subject) -> dict:
    return {**s.base_params(), "device": s.cfg.device}


def _compute(run: Run) -> dict[str, pd.DataFrame]:
    return {"models": pd.DataFrame([run.lm().facts()])}


ANALYSIS = Analysis(id="architecture", version=2, scope="model", inputs="weights", params=_params,
                    size=lambda s: 0, compute=_compute, tables=("models",), work=Work("none", rows=lambda t: {"models": 1}))
