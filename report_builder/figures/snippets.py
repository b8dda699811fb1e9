"""YAML configuration snippets for "not configured" messages: the entries that would produce a figure.

Every `NotConfigured` raised by a K21 or K24 builder carries one of these strings; the site shows it
under the figure's heading. The models and datasets come from `report_builder.papers`.

Pitfall: the snippet is pasted by readers into their config, so it must stay valid YAML in the
flow style `config.load_config` reads (``- {name: …, source: …, role: …}``); names are written
as given, so only use the known ids and names from `papers` here.
"""
from __future__ import annotations

from typing import Sequence

from report_builder import papers


def models_yaml(entries: Sequence[tuple[str, str, str]]) -> str:
    """A ``models:`` block of ``(name, source, role)`` entries."""
    return "models:\n" + "\n".join(f"  - {{name: {n}, source: {s}, role: {r}}}" for n, s, r in entries) + "\n"


def datasets_yaml(entries: Sequence[tuple[str, int]]) -> str:
    """A ``datasets:`` block of ``(id, n)`` entries."""
    return "datasets:\n" + "\n".join(f"  - {{id: {i}, n: {n}}}" for i, n in entries) + "\n"


def paper_models_yaml(models: Sequence[papers.PaperModel], role: str | None = None) -> str:
    """A ``models:`` block of paper models (optionally with another role)."""
    return models_yaml([(m.name, m.source, role or m.role) for m in models])


def primary_dataset_yaml() -> str:
    """The paper's primary (Wikipedia) dataset entry."""
    return datasets_yaml([(papers.PRIMARY_DATASET.id, papers.PRIMARY_DATASET.n)])


def primary_yaml() -> str:
    """K21's primary encoder on its primary dataset."""
    return paper_models_yaml([papers.PRIMARY_ENCODER]) + primary_dataset_yaml()


def seed_group_yaml() -> str:
    """The paper's seed group (25 MultiBERTs)."""
    return paper_models_yaml(papers.SEED_GROUP)


def dataset_slots(configured: Sequence[str], k: int) -> list[tuple[str, int]]:
    """The paper's datasets for the non-primary slots from the next free one up to slot ``k`` (0-based:
    sst2, mnli, conll2003), as ``(id, n)``: what makes ``datasets[k + 1]`` the paper's set of that slot
    (k21-fig14 is the CoNLL-2003 slot), skipping ids already configured."""
    start = max(len(configured) - 1, 0)
    return [(d.id, d.n) for d in papers.EXTRA_DATASETS[start: k + 1] if d.id not in configured]


def extra_datasets(configured: Sequence[str]) -> list[tuple[str, int]]:
    """The paper's non-primary datasets that are not configured yet, as ``(id, n)``."""
    return [(d.id, d.n) for d in papers.EXTRA_DATASETS if d.id not in configured]


def _k24(models: Sequence[papers.PaperModel], datasets: Sequence[tuple[str, int]]) -> str:
    return paper_models_yaml(models) + datasets_yaml(datasets)


_WIKI = papers.K24_EXAMPLE_DATASETS[:1]
#: K24 snippets: both primaries, only the encoder, only the causal model, and many models and datasets.
K24_BOTH = _k24([papers.K24_EXAMPLE_ENCODER, papers.K24_EXAMPLE_CAUSAL], _WIKI)
K24_ENCODER = _k24([papers.K24_EXAMPLE_ENCODER], _WIKI)
K24_CAUSAL = _k24([papers.K24_EXAMPLE_CAUSAL], _WIKI)
K24_MANY = _k24([papers.K24_EXAMPLE_ENCODER, papers.K24_EXAMPLE_CAUSAL, *papers.K24_EXAMPLE_VARIANTS],
                papers.K24_EXAMPLE_DATASETS)
