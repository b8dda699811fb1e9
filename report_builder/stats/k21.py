"""Derived K21 statistics over the tidy result tables (pure pandas/numpy; no torch, no altair, no scipy).

The build log's headlines (`stats.headlines`) and the figures (`report_builder.figures.k21`) use
these functions, so a number printed on the site is computed exactly once, here.

Inputs are the contract tables of ARCHITECTURE.md:

* ``k21_tokens`` — one row per (model, dataset, seq, layer, pos) on masked inputs, with a ``category``
  column (``Normal``, ``[MASK]``, ``[CLS]``, ``[SEP]``) and the five method columns (percentages).
* ``k21_freq`` — one row per (model, dataset, seq, pos) on unmasked inputs, ratios already averaged
  over layers, with ``freq_rank`` (1 = most frequent).
* ``k21_expansion`` — one row per (model, layer) with ``expansion_rate``.

Pitfall: the per-category means of K21 Fig. 3 are a *mean of per-sequence means* (mean over the tokens
of a category within a sequence, then over the sequences that contain that category), not a pooled
token mean — the two differ whenever categories occur a different number of times per sequence.
Standard deviations are sample SDs (``ddof=1``); a single value has SD ``NaN``.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from report_builder import schema

#: The five K21 methods, in the paper's order (`schema.K21_METHODS`).
METHODS: tuple[str, ...] = schema.K21_METHODS
#: Token categories of K21 Fig. 3, in the paper's order, then ``Overall`` (all tokens).
CATEGORIES: tuple[str, ...] = (*schema.TOKEN_CATEGORIES, schema.OVERALL)
#: Categories dropped for the "without [CLS], [SEP]" frequency correlation.
SPECIAL_CATEGORIES: tuple[str, ...] = schema.SPECIAL_TOKEN_CATEGORIES

_SEQ_KEYS = ("model", "dataset", "seq")


def _methods_in(df: pd.DataFrame) -> list[str]:
    methods = [m for m in METHODS if m in df.columns]
    if not methods:
        raise ValueError(f"no method columns among {list(df.columns)}; expected some of {METHODS}")
    return methods


def pooled_stats(tokens_df: pd.DataFrame) -> pd.DataFrame:
    """Mean, max and min of each method's mixing ratio pooled over all rows (K21 Table 2).

    Args:
        tokens_df: ``k21_tokens`` rows (one model and dataset, or several pooled together): one row per
            (seq, layer, non-pad token); special and mask tokens included.

    Returns:
        One row per method present, in paper order: ``method, mean, max, min, n`` (``n`` = number of
        pooled (seq, layer, token) rows that are not NaN).
    """
    methods = _methods_in(tokens_df)
    rows = []
    for m in methods:
        v = tokens_df[m].astype(float).dropna()
        rows.append(
            {
                "method": m,
                "mean": float(v.mean()) if len(v) else np.nan,
                "max": float(v.max()) if len(v) else np.nan,
                "min": float(v.min()) if len(v) else np.nan,
                "n": int(len(v)),
            }
        )
    return pd.DataFrame(rows, columns=["method", "mean", "max", "min", "n"])


def seed_group_stats(tokens_df: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """Statistics over a seed group (K21 Table 7, MultiBERTs in the paper).

    For each model its pooled mean/max/min is computed (`pooled_stats`); then over models:
    mean and sample SD of the per-model means, the max of the maxes, and the min of the mins.

    Args:
        tokens_df: ``k21_tokens`` rows with a ``model`` column (other models are ignored).
        models: the model names of the group.

    Returns:
        ``method, mean, sd, max, min, n_models`` — one row per method. ``sd`` is ``NaN`` for one model.

    Raises:
        ValueError: if none of ``models`` has rows in ``tokens_df``.
    """
    allm = _per_model(tokens_df, models, pooled_stats)
    if allm is None:
        raise ValueError(f"no k21_tokens rows for any of the models {list(models)}")
    g = allm.groupby("method", sort=False)
    out = pd.DataFrame(
        {
            "mean": g["mean"].mean(),
            "sd": g["mean"].std(ddof=1),
            "max": g["max"].max(),
            "min": g["min"].min(),
            "n_models": g["model"].nunique(),
        }
    ).reset_index()
    return out[["method", "mean", "sd", "max", "min", "n_models"]]


def per_model_stats(tokens_df: pd.DataFrame, models: Iterable[str]) -> pd.DataFrame:
    """`pooled_stats` for each model in turn: ``model, method, mean, max, min, n``."""
    out = _per_model(tokens_df, models, pooled_stats)
    return pd.DataFrame(columns=["model", "method", "mean", "max", "min", "n"]) if out is None else out


def _per_model(df: pd.DataFrame, models: Iterable[str], stat) -> pd.DataFrame | None:
    """``stat`` of each model's rows, with a leading ``model`` column; None when no model has rows."""
    frames = []
    for name in models:
        sub = df[df["model"] == name]
        if len(sub):
            st = stat(sub)
            st.insert(0, "model", name)
            frames.append(st)
    return pd.concat(frames, ignore_index=True) if frames else None


def layer_category_means(tokens_df: pd.DataFrame) -> pd.DataFrame:
    """Mixing ratio per layer × token category (K21 Fig. 3).

    For each (sequence, layer, category) the ratio is averaged over the sequence's tokens of that
    category; these per-sequence means are then averaged over the sequences that contain the category.
    ``Overall`` uses all tokens of the sequence. A sequence is identified by (model, dataset, seq) as
    far as those columns exist, so pass one model and dataset to get that model's figure.

    Args:
        tokens_df: ``k21_tokens`` rows.

    Returns:
        Long frame ``layer, category, method, value, n_seqs`` sorted by layer, category (paper order:
        Normal, [MASK], [CLS], [SEP], Overall, then any other label) and method. Categories absent
        from the data (e.g. ``[MASK]`` for causal models) have no rows.
    """
    methods = _methods_in(tokens_df)
    keys = [k for k in _SEQ_KEYS if k in tokens_df.columns]
    if "seq" not in keys:
        raise ValueError("tokens_df needs a 'seq' column")
    per_seq_cat = tokens_df.groupby(keys + ["layer", "category"], sort=False, observed=True)[methods].mean()
    per_seq_all = tokens_df.groupby(keys + ["layer"], sort=False, observed=True)[methods].mean()
    per_seq_all = per_seq_all.assign(category=schema.OVERALL).set_index("category", append=True)
    per_seq = pd.concat([per_seq_cat, per_seq_all]).reset_index()
    g = per_seq.groupby(["layer", "category"], sort=False, observed=True)
    means = g[methods].mean()
    n = g.size().rename("n_seqs")
    wide = means.join(n).reset_index()
    long = wide.melt(
        id_vars=["layer", "category", "n_seqs"], value_vars=methods, var_name="method", value_name="value"
    )
    order = {c: k for k, c in enumerate(CATEGORIES)}
    long["_c"] = long["category"].map(lambda c: order.get(c, len(order)))
    long["_m"] = long["method"].map({m: k for k, m in enumerate(METHODS)})
    long = long.sort_values(["layer", "_c", "category", "_m"]).drop(columns=["_c", "_m"])
    long["layer"] = long["layer"].astype(int)
    long["n_seqs"] = long["n_seqs"].astype(int)
    return long[["layer", "category", "method", "value", "n_seqs"]].reset_index(drop=True)


def frequency_spearman(freq_df: pd.DataFrame) -> pd.DataFrame:
    """Spearman ρ between frequency rank and layer-averaged mixing ratio (K21 Table 3).

    Computed over all non-pad occurrences (rows of ``k21_freq``), and again without the ``[CLS]`` and
    ``[SEP]`` categories. Rank 1 is the most frequent token, so a negative ρ means frequent tokens mix
    *more*.

    Args:
        freq_df: ``k21_freq`` rows of one model and dataset.

    Returns:
        ``method, rho_all, rho_no_special, n_all, n_no_special`` — one row per method present.
        ``rho`` is NaN where either variable is constant or fewer than 3 rows remain.
    """
    methods = _methods_in(freq_df)
    no_special = freq_df[~freq_df["category"].isin(SPECIAL_CATEGORIES)]
    rows = []
    for m in methods:
        rows.append(
            {
                "method": m,
                "rho_all": _spearman(freq_df["freq_rank"], freq_df[m]),
                "rho_no_special": _spearman(no_special["freq_rank"], no_special[m]),
                "n_all": int(freq_df[m].notna().sum()),
                "n_no_special": int(no_special[m].notna().sum()),
            }
        )
    return pd.DataFrame(rows, columns=["method", "rho_all", "rho_no_special", "n_all", "n_no_special"])


def _spearman(x: pd.Series, y: pd.Series) -> float:
    ok = x.notna() & y.notna()
    x, y = x[ok].to_numpy(float), y[ok].to_numpy(float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    from report_builder.stats.ranks import spearman  # scipy's spearmanr, bit for bit, in numpy

    return spearman(x, y)


def seed_group_spearman(freq_df: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """`frequency_spearman` per model of a seed group, then mean and sample SD over models (Table 11).

    Returns:
        ``method, rho_all_mean, rho_all_sd, rho_no_special_mean, rho_no_special_sd, n_models``.
    """
    allm = _per_model(freq_df, models, frequency_spearman)
    if allm is None:
        raise ValueError(f"no k21_freq rows for any of the models {list(models)}")
    g = allm.groupby("method", sort=False)
    out = pd.DataFrame(
        {
            "rho_all_mean": g["rho_all"].mean(),
            "rho_all_sd": g["rho_all"].std(ddof=1),
            "rho_no_special_mean": g["rho_no_special"].mean(),
            "rho_no_special_sd": g["rho_no_special"].std(ddof=1),
            "n_models": g["model"].nunique(),
        }
    ).reset_index()
    return out


def expansion_summary(expansion_df: pd.DataFrame) -> pd.DataFrame:
    """Expansion rate of the value→output map per model (K21 Table 8).

    Args:
        expansion_df: ``k21_expansion`` rows (model, layer, expansion_rate).

    Returns:
        ``model, mean, sd, min, max, n_layers`` — mean, sample SD, min and max over the model's layers,
        models in order of first appearance.
    """
    g = expansion_df.groupby("model", sort=False)["expansion_rate"]
    out = pd.DataFrame(
        {"mean": g.mean(), "sd": g.std(ddof=1), "min": g.min(), "max": g.max(), "n_layers": g.size()}
    ).reset_index()
    return out[["model", "mean", "sd", "min", "max", "n_layers"]]


def expansion_group_summary(expansion_df: pd.DataFrame, models: Sequence[str]) -> dict[str, float]:
    """Seed-group row of Table 8: mean and sample SD over models of each model's layer mean; min of mins,
    max of maxes. Returns ``{"mean", "sd", "min", "max", "n_models"}``."""
    per = expansion_summary(expansion_df[expansion_df["model"].isin(list(models))])
    if len(per) == 0:
        raise ValueError(f"no k21_expansion rows for any of the models {list(models)}")
    return {
        "mean": float(per["mean"].mean()),
        "sd": float(per["mean"].std(ddof=1)) if len(per) > 1 else float("nan"),
        "min": float(per["min"].min()),
        "max": float(per["max"].max()),
        "n_models": int(len(per)),
    }
