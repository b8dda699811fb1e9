"""Headline numbers of a build, computed once from the result tables for the build log and every page.

* `mixing_mean` — one K21 method's mean mixing ratio over a model's token rows on one dataset.
* `k21_summary` — per model on the primary dataset: ATTNRESLN-N and ATTN-N means, ρ(frequency) and
  the mean expansion rate (the build log's K21 lines).
* `cancellation` — per model: the mean change through FF alone and from ATB to the whole layer
  (the model's `schema.Layout.whole_layer`), over the given datasets (K24's cancellation).
* `home_mixing`, `home_cancellation` — the Home page's rows (primary encoder / primary models on the
  primary dataset).

Torch-free (pandas only). Pitfall: "whole layer" is the layout's ``whole_layer`` scope, never the
last row or the longest scope name of ``k24_ctx``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from report_builder import schema
from report_builder.stats import k21
from report_builder.stats import k24_figures as k24fs

#: The K21 methods shown on the Home page, in order.
HOME_METHODS = ("ATTN-N", "ATTNRES-N", "ATTNRESLN-N")


def mixing_mean(tokens: pd.DataFrame, model: str, dataset: str | None, method: str) -> float:
    """Mean of ``method`` over the ``k21_tokens`` rows of ``model`` (on ``dataset`` when given); NaN if none."""
    sel = tokens[tokens["model"] == model]
    if dataset is not None:
        sel = sel[sel["dataset"] == dataset]
    return float(sel[method].mean()) if method in sel and len(sel) else math.nan


@dataclass(frozen=True)
class K21Summary:
    """One model's K21 headline on the primary dataset (NaN where a table is missing)."""

    model: str
    attnresln_mean: float
    attn_mean: float
    rho_freq: float
    expansion_mean: float


def k21_summary(tables: dict[str, pd.DataFrame], models: Sequence[str], dataset: str) -> list[K21Summary]:
    """The K21 headline of each model on ``dataset`` (k21_tokens, k21_freq, k21_expansion)."""
    tok, freq, exp = tables.get("k21_tokens"), tables.get("k21_freq"), tables.get("k21_expansion")
    out = []
    for m in models:
        f = freq[(freq.model == m) & (freq.dataset == dataset)] if freq is not None else pd.DataFrame()
        rho = (k21.frequency_spearman(f).set_index("method").loc["ATTNRESLN-N", "rho_all"]
               if len(f) else float("nan"))
        e = exp[exp.model == m]["expansion_rate"].mean() if exp is not None else float("nan")
        out.append(K21Summary(
            model=m,
            attnresln_mean=mixing_mean(tok, m, dataset, "ATTNRESLN-N") if tok is not None else math.nan,
            attn_mean=mixing_mean(tok, m, dataset, "ATTN-N") if tok is not None else math.nan,
            rho_freq=float(rho), expansion_mean=float(e)))
    return out


@dataclass(frozen=True)
class Cancellation:
    """One model's K24 cancellation: mean change through FF alone and from ATB to the whole layer."""

    model: str
    ff: float
    whole: float
    layout: schema.Layout

    @property
    def whole_scope(self) -> str:
        """The layout's whole-layer scope (the end of ATB → whole layer)."""
        return self.layout.whole_layer


def cancellation(tables: dict[str, pd.DataFrame], model: str,
                 datasets: Sequence[str] | None = None) -> Cancellation | None:
    """``model``'s change through FF (component rows) and ATB → whole layer (cumulative rows), mean over
    layers and the given datasets (all when None); None without ``k24_ctx`` rows for it."""
    ctx = tables.get("k24_ctx")
    if ctx is None or ctx.empty:
        return None
    c = ctx[ctx["model"] == model]
    if datasets is not None:
        c = c[c["dataset"].isin(list(datasets))]
    if c.empty:
        return None
    lay = k24fs.model_layouts(tables.get("models"), c)[model]
    return Cancellation(model=model, ff=k24fs.ff_change(c, model), whole=k24fs.whole_layer_change(c, model, lay),
                        layout=lay)


def home_mixing(tables: dict[str, pd.DataFrame], model: str | None,
                datasets: Sequence[str]) -> list[dict]:
    """Home page: mean mixing ratio per `HOME_METHODS` method for ``model`` on the primary dataset
    (``datasets[0]`` when it has rows, else every dataset of the model)."""
    tok = tables.get("k21_tokens")
    if tok is None or tok.empty or model is None:
        return []
    sel = tok[tok["model"] == model]
    dataset = None
    if datasets and "dataset" in sel and (sel["dataset"] == datasets[0]).any():
        dataset = datasets[0]
        sel = sel[sel["dataset"] == dataset]
    if not len(sel):
        return []
    shown = sel["dataset"].iloc[0] if "dataset" in sel else ""
    return [{"model": model, "dataset": shown, "method": m, "mean": mixing_mean(tok, model, dataset, m)}
            for m in HOME_METHODS if m in sel]


def home_cancellation(tables: dict[str, pd.DataFrame], primaries: Sequence[str],
                      datasets: Sequence[str]) -> list[dict]:
    """Home page: `cancellation` per (model, dataset) for the primary models (every model when none of
    them has rows) on the primary dataset (every dataset when it has no rows)."""
    ctx = tables.get("k24_ctx")
    if ctx is None or ctx.empty:
        return []
    if primaries and ctx["model"].isin(list(primaries)).any():
        ctx = ctx[ctx["model"].isin(list(primaries))]
    if datasets and (ctx["dataset"] == datasets[0]).any():
        ctx = ctx[ctx["dataset"] == datasets[0]]
    out = []
    for (model, dataset), g in ctx.groupby(["model", "dataset"], sort=False):
        if g[(g["kind"] == "component") & (g["component"] == "FF")].empty or g[g["kind"] == "cumulative"].empty:
            continue
        c = cancellation({**tables, "k24_ctx": g}, model)
        out.append({"model": model, "dataset": dataset, "ff": c.ff, "whole": c.whole, "whole_scope": c.whole_scope})
    return out
