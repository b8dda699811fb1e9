"""The one table of paper facts feeds the config's paper preset, the site and the figure snippets."""
from __future__ import annotations

import yaml

from report_builder import config, papers
from report_builder.figures import snippets
from report_builder.citations import cite as provenance


def test_paper_preset_comes_from_papers():
    cfg = config.load_config(preset="paper")
    assert [(m.name, m.source, m.role) for m in cfg.models] == [
        (m["name"], m["source"], m["role"]) for m in papers.preset_models()]
    assert [d.id for d in cfg.datasets] == [d.id for d in papers.PRESET_DATASETS]
    sources = [m.source for m in cfg.models]
    assert [m.source for m in papers.K21_VARIANTS] == [s for s, m in zip(sources, cfg.models) if m.role == "variant"]
    assert sum(m.role == "seed_group" for m in cfg.models) == papers.N_SEEDS


def test_site_names_and_bibtex_come_from_papers():
    for key, p in papers.PAPERS.items():
        assert provenance.PAPER_BIBTEX[key] == p.bibtex and p.title in p.bibtex and p.arxiv in p.bibtex
        assert provenance.PAPER_NAMES[key] == f"Kobayashi et al. ({p.venue})"


def test_snippets_are_valid_config_entries():
    for text in (snippets.primary_yaml(), snippets.seed_group_yaml(), snippets.K24_BOTH, snippets.K24_MANY):
        doc = yaml.safe_load(text)
        config.from_dict({**doc, **({"datasets": [{"id": "wiki"}]} if "datasets" not in doc else {})})
    assert yaml.safe_load(snippets.primary_yaml())["datasets"] == [
        {"id": papers.PRIMARY_DATASET.id, "n": papers.PRIMARY_DATASET.n}]
    assert [d[0] for d in snippets.extra_datasets(["wiki", "sst2"])] == ["mnli", "conll2003"]
