"""Row selection for the K21 builders: which rows of which table a figure may draw from.

Every K21 builder reaches the result tables through these functions, so a missing role, table or
(model, dataset) slice always raises `NotConfigured` with the YAML entries that would produce it.
`paper` attaches the paper's reported numbers only under the ``paper`` preset and only for model
*sources* that match (see `report_builder.figures.reported`).

Pitfall: never draw a figure from rows of another model or dataset than the caption says — `rows`
filters by (model, dataset) and refuses an empty slice.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from report_builder import papers
from report_builder.figures import reported, snippets
from report_builder.figures.spec import FigureContext, NotConfigured


def result_table(ctx: FigureContext, name: str, entry: str) -> pd.DataFrame:
    """The result table ``name``; `NotConfigured` with ``entry`` when its analysis did not run."""
    df = ctx.tables.get(name)
    if df is None or len(df) == 0:
        raise NotConfigured(f"result table {name!r} is missing from this build (its analysis did not run)", entry)
    return df


def source(ctx: FigureContext, model: str) -> str | None:
    """A configured model's source (hub id, embedded name or path) from the models table, or None."""
    m = ctx.tables.get("models")
    if m is None or "source" not in m.columns:
        return None
    hit = m.loc[m["model"] == model, "source"]
    return str(hit.iloc[0]) if len(hit) else None


def primary(ctx: FigureContext) -> tuple[str, str]:
    """``(primary encoder, primary dataset)``; `NotConfigured` when either is missing."""
    r = ctx.roles
    if not r.primary_encoder or not r.datasets:
        raise NotConfigured("no primary encoder and primary dataset configured", snippets.primary_yaml())
    return r.primary_encoder, r.datasets[0]


def rows(ctx: FigureContext, table: str, model: str, dataset: str | None, role: str = "primary_encoder") -> pd.DataFrame:
    """The rows of ``table`` for ``model`` (on ``dataset``); `NotConfigured` naming the entry that would
    produce them (``role`` is the role that entry gets) when there are none."""
    src = source(ctx, model) or model
    entry = snippets.models_yaml([(model, src, role)])
    if dataset is not None:
        entry += snippets.datasets_yaml([(dataset, n_samples(ctx, dataset))])
    df = result_table(ctx, table, entry)
    sel = df["model"] == model
    if dataset is not None and "dataset" in df.columns:
        sel &= df["dataset"] == dataset
    out = df[sel]
    if len(out) == 0:
        where = f" on dataset {dataset!r}" if dataset is not None else ""
        raise NotConfigured(f"no {table} rows for model {model!r}{where}; configure it to produce them", entry)
    return out


def n_samples(ctx: FigureContext, dataset: str) -> int:
    """The dataset's sample count in this build, else the paper's (for snippets)."""
    d = ctx.tables.get("datasets")
    if d is not None and len(d) and "n_samples" in d.columns:
        hit = d.loc[d["dataset"] == dataset, "n_samples"]
        if len(hit):
            return int(hit.iloc[0])
    return papers.paper_sample_count(dataset)


def paper(ctx: FigureContext, fid: str, pairs: Sequence[tuple[str, str | None]]) -> pd.DataFrame | None:
    """The paper's numbers for (model, dataset) pairs whose source matches — only under the paper preset."""
    if ctx.roles.preset != "paper":
        return None
    frames = []
    for model, dataset in pairs:
        df = reported.paper_numbers(fid, source(ctx, model), dataset, ctx.reported or None)
        if df is not None and len(df):
            frames.append(df.assign(model=model, dataset=dataset))
    return pd.concat(frames, ignore_index=True) if frames else None


def need_datasets(ctx: FigureContext, fid: str) -> None:
    """`NotConfigured` (with the paper's missing datasets) unless at least two datasets are configured."""
    d = ctx.roles.datasets
    if len(d) < 2:
        need = snippets.extra_datasets(d)
        raise NotConfigured(f"{fid} compares datasets; only {len(d)} configured. Add these entries to the datasets list.",
                            snippets.datasets_yaml(need))


def need_seeds(ctx: FigureContext, fid: str) -> tuple[tuple[str, ...], str]:
    """``(seed group, primary dataset)``; `NotConfigured` unless the group has at least two models."""
    g = ctx.roles.seed_group
    if len(g) < 2 or not ctx.roles.datasets:
        raise NotConfigured(f"{fid} needs a seed group of at least two models (roles.seed_group); {len(g)} configured",
                            snippets.seed_group_yaml())
    return g, ctx.roles.datasets[0]


def seed_group_rows(ctx: FigureContext, fid: str, table: str) -> tuple[pd.DataFrame, tuple[str, ...], str]:
    """``(rows of result table `table` for the seed group on the primary dataset, group, dataset)``;
    `NotConfigured` when the group is too small or has no rows there."""
    g, ds = need_seeds(ctx, fid)
    rows = result_table(ctx, table, snippets.seed_group_yaml())
    rows = rows[(rows["dataset"] == ds) & rows["model"].isin(g)]
    if len(rows) == 0:
        raise NotConfigured(f"no {table} rows for the seed group on {ds!r}", snippets.seed_group_yaml())
    return rows, g, ds


def paper_seed_group(ctx: FigureContext, fid: str, models: Sequence[str], dataset: str | None) -> pd.DataFrame | None:
    """The paper's seed-group numbers when every seed-group model is a paper seed (paper preset only)."""
    if ctx.roles.preset != "paper":
        return None
    srcs = [source(ctx, m) or "" for m in models]
    if all(s.startswith(reported.SEED_GROUP_PREFIX) for s in srcs):
        return reported.paper_numbers(fid, srcs[0], dataset, ctx.reported or None)
    return None


def dataset_label(ctx: FigureContext, dataset: str) -> str:
    """``name (id)`` of a dataset from the datasets table, or the id alone."""
    ds = ctx.tables.get("datasets")
    if ds is not None and {"dataset", "name"} <= set(ds.columns):
        hit = ds.loc[ds["dataset"] == dataset, "name"]
        if len(hit) and str(hit.iloc[0]) not in ("", dataset):
            return f"{hit.iloc[0]} ({dataset})"
    return dataset
