"""Every analysis, in the order a build runs them (per model: weights-only ones, then per dataset).

The registry imports the analysis modules; `analyses.base` imports none of them (no cycle). Adding an
analysis is one module defining ``ANALYSIS`` and its name in `MODULES`. Pitfall: the order decides
the row order of concatenated tables (``recon_errors`` gathers rows from two analyses), so
appending keeps existing results byte-identical, inserting does not.
"""
from __future__ import annotations

import importlib

from report_builder.analyses.base import Analysis

MODULES: tuple[str, ...] = ("architecture", "k21_expansion", "k21_example", "k21_mixing", "k21_frequency",
                            "k24_scopes", "k24_examples")
"""Analysis modules under `report_builder.analyses`, in run order."""

ANALYSES: tuple[Analysis, ...] = tuple(importlib.import_module(f"report_builder.analyses.{m}").ANALYSIS
                                       for m in MODULES)
_BY_ID = {a.id: a for a in ANALYSES}
assert len(_BY_ID) == len(ANALYSES), "two analyses share an id"


def get(analysis_id: str) -> Analysis:
    """The analysis registered as ``analysis_id``."""
    try:
        return _BY_ID[analysis_id]
    except KeyError:
        raise KeyError(f"unknown analysis {analysis_id!r}; known: {', '.join(_BY_ID)}") from None


def versions() -> dict[str, int]:
    """Analysis id -> version (recorded in provenance and cache keys)."""
    return {a.id: a.version for a in ANALYSES}
