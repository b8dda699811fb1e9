"""This build's setting beside each paper's: the table at the top of a paper page.

A reader with the paper open sees first which configured model stands in for each of the paper's models
and how many samples each dataset holds against the paper's (K21: Table 2's bert-base-uncased on 992
Wikipedia pairs; K24: BERT-base and GPT-2), before any number. Facts about the papers come from
`report_builder.papers`; this build's from its result tables (``models``, ``datasets``) and the
recorded configuration (K24's sequences per dataset, ``k24_n``).

Pitfall: a model is "the paper's" only when its recorded source is the paper's hub id; any other is
named as a stand-in, never silently compared.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from report_builder import papers

#: Column headers of the table.
HEAD = ("", "The paper", "This build")


def _sources(tables: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    m = tables.get("models")
    if m is None or m.empty or "source" not in m.columns:
        return {}
    return dict(zip(m["model"].astype(str), m["source"].astype(str)))


def _samples(tables: Mapping[str, pd.DataFrame]) -> dict[str, int]:
    d = tables.get("datasets")
    if d is None or d.empty or "n_samples" not in d.columns:
        return {}
    return {str(k): int(v) for k, v in d.drop_duplicates("dataset").set_index("dataset")["n_samples"].items()}


def _model(name: str | None, sources: Mapping[str, str], paper_source: str) -> str:
    if not name:
        return "not configured"
    src = sources.get(name, "")
    if src == paper_source:
        return f"{name} ({src}): the paper's model"
    return f"{name} ({src or 'source not recorded'}), standing in for {paper_source}"


def _sets(ids, counts: Mapping[str, int], unit: str = "samples") -> str:
    parts = [f"{d}: {counts[d]:,} {unit}" if d in counts else f"{d}" for d in ids]
    return "; ".join(parts) if parts else "none"


def _k24_counts(prov: Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, int]:
    """Sequences per dataset of the K24 analyses: the entry's ``k24_n`` (at most the set's size)."""
    out = {}
    for entry in ((prov.get("config") or {}).get("datasets") or []):
        if not isinstance(entry, Mapping) or str(entry.get("id")) not in counts:
            continue
        ds, k = str(entry["id"]), entry.get("k24_n")
        out[ds] = min(int(k), counts[ds]) if isinstance(k, int) and not isinstance(k, bool) else counts[ds]
    return out


def k21_rows(tables: Mapping[str, pd.DataFrame], roles: Any) -> list[tuple[str, str, str]]:
    """K21: the primary encoder, the variants, the seed group and the datasets, paper vs this build."""
    src, counts = _sources(tables), _samples(tables)
    primary = papers.PRIMARY_DATASET
    variants = [f"{v} ({src.get(v, '')})" for v in roles.variants]
    return [
        ("Primary encoder (Tables 2, 3; Figs. 1, 3, 4)", papers.PRIMARY_ENCODER.source,
         _model(roles.primary_encoder, src, papers.PRIMARY_ENCODER.source)),
        ("Model variants (Table 5; Figs. 5–11)", ", ".join(v.source for v in papers.K21_VARIANTS),
         ", ".join(variants) if variants else "none"),
        ("Seed group (Tables 7, 11; Figs. 15–17)", f"{papers.N_SEEDS} MultiBERTs seeds",
         f"{len(roles.seed_group)} models" if roles.seed_group else "none"),
        ("Primary dataset", f"Wikipedia sequence pairs (Clark et al. 2019): {primary.n:,} samples",
         _sets(roles.datasets[:1], counts)),
        ("Other datasets (Table 6; Figs. 12–14)", "; ".join(f"{d.id}: {d.n:,} samples" for d in papers.EXTRA_DATASETS),
         _sets(roles.datasets[1:], counts)),
    ]


def k24_rows(tables: Mapping[str, pd.DataFrame], roles: Any, prov: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """K24: the masked and the causal model and the sequences each K24 analysis reads, paper vs this build."""
    src, counts = _sources(tables), _samples(tables)
    k24 = _k24_counts(prov, counts)
    preset = {d.id: d.k24_n for d in papers.PRESET_DATASETS}
    return [
        ("Masked language model (post-LN)", papers.PRIMARY_ENCODER.source,
         _model(roles.primary_encoder, src, papers.PRIMARY_ENCODER.source)),
        ("Causal language model (pre-LN)", papers.PRIMARY_CAUSAL.source,
         _model(roles.primary_causal, src, papers.PRIMARY_CAUSAL.source)),
        ("Sequences per dataset", "the paper preset: " + "; ".join(f"{d}: {n:,}" for d, n in preset.items()),
         _sets([d for d in roles.datasets if d in k24], k24, "sequences") if k24 else "as recorded per figure"),
    ]


def setting_rows(paper: str, tables: Mapping[str, pd.DataFrame], roles: Any,
                 prov: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The rows of a paper page's "this build vs the paper" table (``HEAD`` columns); none for an unknown paper."""
    if roles is None:
        return []
    if paper == "K21":
        return k21_rows(tables, roles)
    if paper == "K24":
        return k24_rows(tables, roles, prov)
    return []
