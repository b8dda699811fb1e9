"""K24 (Kobayashi et al., ICLR 2024) figures: FF blocks through the lens of attention maps.

Modules: `declarations` (the `FigureSpec` list), `selection` (tables, layouts, model/dataset order),
`maps` (Fig. 1, scope-map explorer), `ctx` (contextualization change), `ffamp` (FF-amplified pairs),
`res_ln` (residual norms, LN dimensions), `readings` (generated prose). Statistics live in
`report_builder.stats` (`maps`, `pair_categories`, `k24_figures`, ...); charts in `report_builder.figures.charts`.
Layers are 0-based in the tables and shown 1-based (charts and readings), as in the papers. No torch.
"""
from __future__ import annotations

from report_builder.figures.k24.declarations import K24_IDS, SPECS

__all__ = ["SPECS", "K24_IDS"]
