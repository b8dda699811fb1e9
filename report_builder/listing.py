"""What ``report-builder list`` shows: figures, models and datasets, of the registries or of a configuration.

Pitfall: listing datasets builds each set (a few seconds for ``wiki``, and the offline sets need the
``[compute]`` extra's gensim); listing figures and models loads nothing.
"""
from __future__ import annotations

from report_builder.config import Config


def list_figures(cfg: Config | None = None) -> list[dict]:
    """Every figure id, or those ``cfg`` builds (its ``figures:``) when given."""
    from report_builder.figures.registry import all_figures

    return [dict(id=s.id, paper=s.paper, kind=s.kind, title=s.title) for s in all_figures()
            if cfg is None or isinstance(cfg.figures, str) or s.id in cfg.figures]


def list_models(cfg: Config) -> list[dict]:
    """The configured models (``configured: yes``: the build's, by name, source and role), then the embedded
    models (``configured: no``: sources a configuration or ``--model NAME=SOURCE`` may name, described)."""
    from report_builder.models.embedded import EMBEDDED

    return ([dict(name=m.name, source=m.source, role=m.role, configured="yes", description="") for m in cfg.models]
            + [dict(name=k, source=k, role="", configured="no", description=e.description)
               for k, e in EMBEDDED.items()])


def list_datasets(cfg: Config | None = None) -> list[dict]:
    """One row per set: ``id``, ``name``, ``domain``, ``size``, ``hash``. With ``cfg``: its datasets first,
    each as its build reads it (its own files and ``n``; ``configured`` says which), then the other
    offline sets."""
    from report_builder.data.registry import OFFLINE_DATASETS, load_entry, load_eval_set

    def row(s, configured: bool | None) -> dict:
        r = {"id": s.id, "name": s.name, "domain": s.domain, "size": len(s), "hash": s.hash}
        return r if configured is None else {**r, "configured": "yes" if configured else "no"}

    mine = cfg.datasets if cfg is not None else ()
    rows = [row(load_entry(dc, cfg.data_dir), True) for dc in mine]
    taken = {dc.id for dc in mine}
    return rows + [row(load_eval_set(i), None if cfg is None else False) for i in OFFLINE_DATASETS if i not in taken]
