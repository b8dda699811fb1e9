"""Figure declarations as data: one `FigureSpec` per permanent figure id.

The id (e.g. ``k21-fig3``) is permanent: it names the page anchor, the files under
``site/figures/<id>/``, the cache lookups and the citation. Pitfall: never rename an id; add a new one.

This is the base module: it imports no paper package (`report_builder.figures.registry` collects
the declarations). It must not import torch (the site can be rebuilt from the cache without it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd


@dataclass(frozen=True)
class Roles:
    """Which configured model/dataset plays which part in the papers' figures.

    Attributes:
        primary_encoder: model name used for K21 Table 2 / Fig. 3 (``None`` if no encoder configured).
        primary_causal: model name of the primary causal (pre-LN) model, or ``None``.
        encoders: every configured model name whose K21 analyses ran (encoders and causal models).
        variants: model names for the "every model variant" figures (k21-tab5, k21-fig5..fig11).
        seed_group: model names forming a seed group (k21-tab7, fig15..17, tab11); may be empty.
        datasets: dataset ids in configuration order; ``datasets[0]`` is the primary (Wikipedia) set.
        preset: name of the preset ("default", "smoke", "paper", or "custom").
    """

    primary_encoder: str | None
    primary_causal: str | None
    encoders: tuple[str, ...]
    variants: tuple[str, ...]
    seed_group: tuple[str, ...]
    datasets: tuple[str, ...]
    preset: str = "custom"


@dataclass(frozen=True)
class FigureContext:
    """What a figure builder sees: the result tables (concatenated over models and datasets) and roles."""

    tables: Mapping[str, pd.DataFrame]
    roles: Roles
    reported: dict[str, Any] = field(default_factory=dict)  # parsed k21_reported.yaml

    def __post_init__(self) -> None:
        # figures show tokens in their display form; the tokenizer's strings stay in *_raw columns
        # (converted lazily, table by table, on first read: `display.DisplayTables`)
        if not getattr(self.tables, "display_ready", False):
            from report_builder.figures.display import DisplayTables

            object.__setattr__(self, "tables", DisplayTables(self.tables))


@dataclass
class FigureResult:
    """The output of one figure builder.

    Attributes:
        data: the tidy frame the chart/table is drawn from (written as CSV for download).
        chart: an Altair chart (``None`` for pure tables).
        table: for tables, the frame shown on the page (may equal ``data``).
        reading: a one- or two-sentence reading of this build's result (plain text / Markdown).
        paper: the paper's numbers shown beside ours (only when the same model and data were used), or None.
        models: model names the figure used; datasets: dataset ids it used.
        params: parameters that shaped the figure (shown in provenance).
        svg: for diagrams, the drawing as standalone SVG markup (shown inline on the page and written
            as ``chart.svg``/``chart.png``); ``data`` then lists the diagram's parts.
    """

    data: pd.DataFrame
    chart: Any | None = None
    table: pd.DataFrame | None = None
    reading: str = ""
    paper: pd.DataFrame | None = None
    models: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    title: str = ""  # this build's title when it names what the declaration cannot (a dataset, a model)
    svg: str | None = None


FINDING = "paper finding, our figure"
"""How an id that charts a finding the paper states only in text is labelled (page and cite.bib)."""


class NotConfigured(Exception):
    """Raised by a builder whose inputs are not in the configuration.

    ``config_entry`` is the exact YAML snippet that would produce the figure.
    """

    def __init__(self, message: str, config_entry: str):
        super().__init__(message)
        self.config_entry = config_entry


@dataclass(frozen=True)
class FigureSpec:
    """A declared figure or table.

    Attributes:
        id: permanent id, e.g. ``k21-fig3``.
        paper: ``"K21"`` or ``"K24"``.
        title: short title.
        caption: what is plotted and how it was aggregated.
        analysis: names of the result tables the builder reads.
        build: ``FigureContext -> FigureResult``; raises `NotConfigured` when inputs are missing.
        kind: ``"chart"``, ``"table"`` or ``"diagram"``.
        params: fixed parameters of the figure (shown in provenance).
        template: Jinja template used for the figure's section.
        section: page section heading under which it is shown (for grouping in paper order).
        reproduces: what of the paper it reproduces, e.g. ``"the paper's Table 2"``, or
            `FINDING` + ``": <the finding>"`` for our chart of a finding the paper states in text.
        version: bump it when the figure's output changes for the same tables (its files are reused
            while its inputs, declaration, version and the package's code are unchanged: see
            `report_builder.site.figure_cache`).
        units: column of the figure's data -> its unit (`schema.PERCENT`, `schema.ROW_NORMALISED`, …), for
            every column holding a mixing ratio, a map value or a share: ``data.csv`` (and
            ``paper_vs_ours.csv``) name those columns ``<name> (<unit>)`` (`schema.unit_column`). Declared
            once per builder family (`schema.UNITS` for columns passed through from a result table).
    """

    id: str
    paper: str
    title: str
    caption: str
    analysis: tuple[str, ...]
    build: Callable[[FigureContext], FigureResult]
    kind: str = "chart"
    params: dict[str, Any] = field(default_factory=dict)
    template: str = "figure.md.j2"
    section: str = ""
    reproduces: str = ""
    version: int = 1
    units: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_finding(self) -> bool:
        """True when the id charts a finding the paper states in text (`FINDING`), not one of its figures."""
        return self.reproduces.startswith(FINDING)
