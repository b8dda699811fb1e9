"""K21 (Kobayashi et al., EMNLP 2021) figures and tables: declarations, per-section builders, readings.

Modules: `declarations` (the `FigureSpec` list in paper order), `select` (row selection and
`NotConfigured` entries), `intro` (Fig. 1, Fig. 2), `setup` (Tables 1, 4), `mixing` (Tables 2, 5–7),
`categories` (Fig. 3 and fig5–17), `frequency` (Table 3, Fig. 4, Tables 9–11), `expansion`
(Table 8), `tables` (display formatting), `readings` (generated prose). Statistics live in
`report_builder.stats.k21` and `stats.k21_figures`; charts in `report_builder.figures.charts`.

Layers are 0-based in the data and shown 1-based in charts, as in the paper. Paper numbers are
attached (``FigureResult.paper``) only under the ``paper`` preset and only for matching model sources.
"""
from __future__ import annotations

from report_builder.figures.k21.declarations import K21_IDS, SPECS

__all__ = ["SPECS", "K21_IDS"]
