"""From finished tasks to the build's result tables and the provenance of its models and datasets.

Pure pandas (no torch): `api.tables_from_cache` uses the same functions to rebuild the tables from
the cache alone. Pitfall: tables are concatenated in task order, so the same plan gives the same
rows in the same order (and the same figure hashes).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.analyses.planning import Plan, Result
    from report_builder.config import Config


def concat_tables(parts: Iterable[dict[str, pd.DataFrame]], cfg: "Config", sets: dict | None = None
                  ) -> dict[str, pd.DataFrame]:
    """Concatenate each table over the results (in order) and fold ``dataset_stats`` into ``datasets``."""
    by_name: dict[str, list[pd.DataFrame]] = {}
    for tables in parts:
        for name, df in tables.items():
            by_name.setdefault(name, []).append(df)
    out = {name: pd.concat(dfs, ignore_index=True) for name, dfs in by_name.items()}
    stats = out.pop("dataset_stats", None)
    if stats is not None or sets is not None:
        out["datasets"] = datasets_table(cfg, stats if stats is not None else pd.DataFrame(), sets)
    return out


def datasets_table(cfg: "Config", stats: pd.DataFrame, sets: dict | None = None) -> pd.DataFrame:
    """The ``datasets`` table: each set's datasheet with its per-model size and mean length."""
    from report_builder.data import load_entry

    rows = []
    for dc in cfg.datasets:
        es = (sets or {}).get(dc.id) or load_entry(dc, cfg.data_dir)
        if stats.empty:
            continue
        for _, r in stats[stats["dataset"] == dc.id].iterrows():
            rows.append(dict(dataset=dc.id, model=r["model"], name=es.name, n_samples=int(r["n_samples"]),
                             mean_tokens=float(r["mean_tokens"]), domain=es.datasheet.get("domain", ""),
                             source=es.datasheet.get("source", ""), licence=es.datasheet.get("licence", ""),
                             hash=es.hash, built=es.datasheet.get("built", "")))
    return pd.DataFrame(rows)


def provenance(plan: "Plan", results: list["Result"]) -> tuple[dict, dict, dict]:
    """``models`` (source, fingerprint, class name, role, requested revision and resolved hub snapshot),
    ``datasets`` (hash, size) and ``inputs`` (analysis id -> one ``{model, dataset, params}`` per task of
    ``results``: its declared cache-key parameters but those naming the subject, `base.input_params`)
    of a build."""
    class_names = {r.task.subject.model.name: r.entry.tables["models"]["class_name"].iloc[0]
                   for r in results if "models" in r.entry.tables}
    models, data = {}, {}
    for t in plan.tasks:
        s = t.subject
        if s.model.name not in models:
            from report_builder.models import sources  # the HF cache only: no torch, no network

            models[s.model.name] = {"source": s.model.source, "fingerprint": s.fingerprint,
                                    "class_name": class_names.get(s.model.name), "role": s.model.role,
                                    "revision": s.model.revision,
                                    "snapshot": sources.hub_snapshot(s.model.source, s.model.revision)}
        if s.dataset is not None and s.dataset.id not in data:
            data[s.dataset.id] = {"hash": s.dataset_hash, "n": s.n_items}
    from report_builder.analyses.base import input_params

    inputs: dict[str, list[dict]] = {}
    for r in results:
        t = r.task
        inputs.setdefault(t.base, []).append({"model": t.subject.model.name, "dataset": t.subject.dataset.id
                                              if t.subject.dataset is not None else None,
                                              "params": input_params(t.params)})
    return models, data, inputs
