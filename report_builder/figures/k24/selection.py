"""Row selection and ordering for the K24 builders: tables, model layouts, model and dataset order.

A model's layer layout (post-LN or pre-LN, `report_builder.schema.Layout`) is read from the ``models``
table; only when a table comes without it (hand-made tables) is it recognised from the scopes present
(`schema.layout_for_scopes`), defaulting to the first layout when only the shared ``ATB`` is there.
Pitfall: scope names differ between layouts; always go through a model's `Layout` (its scopes,
components, ``ff_after``, ``whole_layer``) instead of assuming one order or parsing a name.
"""
from __future__ import annotations

import pandas as pd

from report_builder import schema
from report_builder.stats import k24_figures as figstats
from report_builder.figures import snippets
from report_builder.figures.spec import FigureContext, NotConfigured

#: The layout each primary role is drawn with when the ``models`` table does not say (K24 Fig. 1).
ROLE_LAYOUTS: tuple[tuple[str, schema.Layout], ...] = (("primary_encoder", schema.POST_LN),
                                                        ("primary_causal", schema.PRE_LN))


def result_table(ctx: FigureContext, name: str, entry: str = snippets.K24_BOTH) -> pd.DataFrame:
    """The result table ``name``; `NotConfigured` with ``entry`` when it is missing or empty."""
    df = ctx.tables.get(name)
    if df is None or len(df) == 0:
        raise NotConfigured(f"no K24 results ({name}) — configure at least one model and dataset for K24", entry)
    return df


def layouts(ctx: FigureContext, df: pd.DataFrame | None = None) -> dict[str, schema.Layout]:
    """model -> `schema.Layout`, from the models table or (fallback) from the scopes in ``df``."""
    return figstats.model_layouts(ctx.tables.get("models"), df)


def model_order(ctx: FigureContext, present) -> list[str]:
    """Models present in the data, in configuration order (primary encoder, primary causal, others)."""
    present = list(dict.fromkeys(present))
    r = ctx.roles
    order = [m for m in (r.primary_encoder, r.primary_causal, *r.encoders, *r.variants, *r.seed_group) if m]
    return [m for m in dict.fromkeys(order) if m in present] + sorted(m for m in present if m not in order)


def dataset_order(ctx: FigureContext, present) -> list[str]:
    """Datasets present in the data, in configuration order, unknown ones after by name."""
    present = list(dict.fromkeys(present))
    return [d for d in ctx.roles.datasets if d in present] + sorted(d for d in present if d not in ctx.roles.datasets)


def primaries(ctx: FigureContext, present) -> list[str]:
    """The primary encoder and primary causal model where they have data; else every model present."""
    prim = [m for m in (ctx.roles.primary_encoder, ctx.roles.primary_causal) if m and m in set(present)]
    return prim or model_order(ctx, present)


def scope_sort(lays) -> list[str]:
    """Every scope of the given layouts, layouts in `schema.LAYOUTS` order, each scope once."""
    ids = {lay.id for lay in lays}
    out: list[str] = []
    for lay in schema.LAYOUTS:
        if lay.id in ids:
            out += [s for s in lay.scopes if s not in out]
    return out
