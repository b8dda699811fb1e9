"""The figure registry: every declared figure of every paper, in paper order, ids unique.

This module imports the paper packages (`report_builder.figures.k21`, `report_builder.figures.k24`)
and collects their ``SPECS``; the base module `report_builder.figures.spec` imports none of them, so
there is no import cycle. Adding a paper is one package with a ``SPECS`` list plus one line in
`PLUGINS`; adding a figure is one declaration in its package.

Pitfall: ids are permanent (anchors, files, cache lookups, citations); a duplicate id fails at import.
"""
from __future__ import annotations

from report_builder.figures import k21, k24
from report_builder.figures.spec import FigureSpec

#: The paper packages, in site order.
PLUGINS = (k21, k24)


def _collect() -> dict[str, FigureSpec]:
    out: dict[str, FigureSpec] = {}
    for plugin in PLUGINS:
        for spec in plugin.SPECS:
            if spec.id in out:
                raise ValueError(f"duplicate figure id {spec.id!r}")
            out[spec.id] = spec
    return out


_REGISTRY: dict[str, FigureSpec] = _collect()


def all_figures() -> list[FigureSpec]:
    """Every declared figure, K21 first, each paper in declaration (paper) order."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.paper, list(_REGISTRY).index(s.id)))


def figure(fig_id: str) -> FigureSpec:
    """The figure with this id; a clear error naming the known ids otherwise."""
    try:
        return _REGISTRY[fig_id]
    except KeyError:
        raise KeyError(f"unknown figure id {fig_id!r}; known: {', '.join(_REGISTRY)}") from None


def ids() -> tuple[str, ...]:
    """Every figure id in `all_figures` order."""
    return tuple(s.id for s in all_figures())
