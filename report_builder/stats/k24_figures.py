"""Numbers the K24 figures and the headline derive from the result tables (torch-free, pandas only).

* `model_layouts` — each model's layer layout from the ``models`` table (or its scopes).
* `diagonal_means` — mean self-attribution (diagonal of the row-normalised map) per scope.
* `component_means` — mean change per component (1 − ρ) of one model.
* `cancellation` — one model's mean change through FF (ATB → ``ff_after``) and over the whole layer
  (ATB → ``whole_layer``), the pair behind K24's cancellation finding.
* `ln_dims_summary` — per (model, layer): the share of FF's per-dimension change that LN passes on and
  ρ(FF change, |γ|).
* `category_lift` — one model's share of each pair category among top FF-amplified pairs vs its base rate.

Pitfall: the scopes come from the model's `report_builder.schema.Layout`; never pick "the last" or
"the longest" scope name of a table — row order and names are not the layout.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder import schema
from report_builder.stats.ranks import series_spearman


def model_layouts(models: pd.DataFrame | None, rows: pd.DataFrame | None = None) -> dict[str, schema.Layout]:
    """model -> `schema.Layout`, from the ``models`` table's ``ln_position``; a model only in ``rows``
    (a table with ``scope`` or ``to_scope``) is recognised from its scopes (`schema.layout_for_scopes`),
    the first layout when only the shared ATB is present."""
    out: dict[str, schema.Layout] = {}
    if models is not None and len(models):
        out.update({m: schema.layout(p) for m, p in zip(models["model"], models["ln_position"])})
    if rows is not None:
        scol = "scope" if "scope" in rows.columns else ("to_scope" if "to_scope" in rows.columns else None)
        for m in rows["model"].unique():
            if m not in out:
                seen = rows.loc[rows["model"] == m, scol].astype(str).unique() if scol is not None else ()
                out[m] = schema.layout_for_scopes(seen) or schema.LAYOUTS[0]
    return out


def diagonal_means(maps: pd.DataFrame) -> pd.Series:
    """Mean of the map's diagonal (i == j) per scope, over every row given (``k24_maps`` rows)."""
    return maps[maps["i"] == maps["j"]].groupby("scope")["value"].mean()


def component_means(ctx: pd.DataFrame, model: str) -> pd.Series:
    """Mean change per component of one model over its layers and datasets (component rows of ``k24_ctx``)."""
    return ctx[ctx["model"] == model].groupby("component")["change"].mean()


def cancellation(ctx: pd.DataFrame, model: str, layout: schema.Layout) -> tuple[float, float]:
    """``(through_ff, whole_layer)``: the mean cumulative change from ATB to ``layout.ff_after`` and to
    ``layout.whole_layer``, over the layers and datasets of ``ctx`` (``k24_ctx`` rows); NaN when absent."""
    g = ctx[(ctx["model"] == model) & (ctx["kind"] == "cumulative")].groupby("to_scope")["change"].mean()
    return float(g.get(layout.ff_after, np.nan)), float(g.get(layout.whole_layer, np.nan))


def ff_change(ctx: pd.DataFrame, model: str) -> float:
    """Mean change through FF alone (component rows, ``component == "FF"``) of one model; NaN when absent."""
    c = ctx[ctx["model"] == model]
    return float(c[(c["kind"] == "component") & (c["component"] == "FF")]["change"].mean())


def whole_layer_change(ctx: pd.DataFrame, model: str, layout: schema.Layout) -> float:
    """Mean cumulative change from ATB to the whole layer (``layout.whole_layer``) of one model; NaN when absent."""
    c = ctx[(ctx["model"] == model) & (ctx["kind"] == "cumulative")]
    return float(c[c["to_scope"] == layout.whole_layer]["change"].mean())


def ln_dims_summary(dims: pd.DataFrame) -> pd.DataFrame:
    """Per (model, layer) of ``k24_ln_dims`` rows: ``kept_share`` = Σ ln_out_change / Σ ff_change and
    ``rho_ff_gamma`` = Spearman ρ(ff_change, |ln_weight|) over dimensions (NaN when γ is constant)."""
    return (dims.groupby(["model", "layer"])
            .apply(lambda g: pd.Series({
                "kept_share": g["ln_out_change"].sum() / g["ff_change"].sum() if g["ff_change"].sum() > 0 else np.nan,
                # undefined (nan) when gamma is constant, e.g. a freshly initialised norm
                "rho_ff_gamma": (series_spearman(g["ff_change"], g["ln_weight"].abs())
                                 if g["ln_weight"].abs().nunique() > 1 else np.nan)}),
                   include_groups=False).reset_index())


def category_lift(base: pd.DataFrame, model: str) -> tuple[pd.Series, pd.Series, pd.Series]:
    """``(top_share, base_share, lift)`` per category for one model, pooled over layers and datasets;
    ``lift`` = top_share / base_share, kept only where the category has a base pair and a top pair."""
    g = base[base["model"] == model].groupby("category")[["top_count", "base_count"]].sum()
    ts, bs = g["top_count"] / max(g["top_count"].sum(), 1), g["base_count"] / max(g["base_count"].sum(), 1)
    lift = (ts / bs.replace(0, np.nan)).dropna()
    lift = lift[g.loc[lift.index, "top_count"] > 0]
    return ts, bs, lift
