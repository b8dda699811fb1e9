"""The site of a configuration: what `build.render_site` needs, taken from a `Config`.

The figures' `Roles` come from the configured model roles and dataset order; ``figures:`` lists the
figures to build (all by default); the resolved configuration is written beside the site as
``config.resolved.yaml``. Pitfall: local paths (model sources, data files) never reach the site —
the ``models`` table's sources and the resolved configuration go through `guard`'s public forms.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from report_builder import guard

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from report_builder.config import Config
    from report_builder.figures.spec import Roles


def roles_of(cfg: "Config") -> "Roles":
    """`Roles` for the figures from the configured model roles and dataset order."""
    from report_builder.figures.spec import Roles

    by = lambda r: tuple(m.name for m in cfg.models if m.role == r)  # noqa: E731
    pe, pc = by("primary_encoder"), by("primary_causal")
    return Roles(primary_encoder=pe[0] if pe else None, primary_causal=pc[0] if pc else None,
                 encoders=tuple(m.name for m in cfg.models if m.role != "seed_group") + by("seed_group"),
                 variants=tuple(m.name for m in cfg.models if m.role == "variant" or m.role == "primary_causal"),
                 seed_group=by("seed_group"), datasets=tuple(d.id for d in cfg.datasets), preset=cfg.preset)


def render_configured(cfg: "Config", tables: "dict[str, pd.DataFrame]", provenance: dict[str, Any], *,
                      log: Callable[[str], Any]):
    """`build.render_site` for ``cfg``'s roles, figures, output folder and site address; returns its report."""
    import yaml

    from report_builder.figures.reported import load_reported
    from report_builder.site.build import render_site

    if "models" in tables and "source" in tables["models"]:  # local paths never reach the site
        tables = {**tables, "models": tables["models"].assign(source=tables["models"]["source"].map(guard.public_path))}
    reported = load_reported()
    resolved = yaml.safe_dump(guard.public_config(cfg.to_dict()), sort_keys=False)
    figures = None
    if not isinstance(cfg.figures, str):  # the configured `figures:` ids only, in the registry's order
        from report_builder.figures.registry import all_figures

        figures = [f for f in all_figures() if f.id in set(cfg.figures)]
    return render_site(tables, roles_of(cfg), {**provenance, "reported": reported}, out_dir=Path(cfg.out_dir),
                       log=log, reported=reported, site_url=cfg.site_url, figures=figures,
                       extra_files={"config.resolved.yaml": resolved}, cache_dir=Path(cfg.cache_dir))
