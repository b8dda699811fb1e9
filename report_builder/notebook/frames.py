"""Tidy frames of a notebook `Decomposition`, and the tables `load_results` hands a user.

Both follow SPEC §8, as ``data.csv`` does (`site.figure_files.csv_frame`), so they join a figure's data
by name: the ``layer`` column counts from 1 (`schema.user_layers` is the one shift from the cache's
0-based tables), ratios are in percent, and each measured column carries its unit in its name
(`schema.unit_columns`: ``ATTN-N (%)``, ``value (row-normalised)``, ``value (raw norm)``), with
``frame.attrs["units"]`` giving each such column's unit in words (`schema.UNITS`).

Pitfall: the cache's parquet tables stay 0-based with bare column names and are never rewritten; only
the copies returned to a user are shifted and renamed, here.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from report_builder import schema


def user_tables(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The result tables of a cache as a user reads them: layers from 1, units in the column names
    (copies; the cache's frames are untouched)."""
    return {name: schema.unit_columns(schema.user_layers(df), schema.UNITS.get(name, {}))
            for name, df in tables.items()}


def frame(res: "Decomposition", table: str, unit: str, dataset: str) -> pd.DataFrame:
    """`Decomposition.to_frame`'s frame (arguments checked there)."""
    from report_builder.stats.maps import row_normalise, valid_pairs_mask

    cols = schema.TABLES[table]
    rows: list[pd.DataFrame] = []
    units: dict[str, str] = {}
    if table in ("k24_maps", "k21_maps"):
        names = res.scopes if table == "k24_maps" else res.methods
        if not names:
            what = "scopes" if table == "k24_maps" else "methods"
            raise ValueError(f"no {what} were decomposed; call decompose(..., {what}='all')")
        key = "scope" if table == "k24_maps" else "method"
        # a K21 map's raw value is a weight for the -W methods: the cache's k21_maps unit, so they join
        units = {"value": schema.UNITS["k21_maps"]["value"] if table == "k21_maps" and unit == schema.RAW_NORM
                 else unit}
        for k, s in enumerate(res.sequences):
            n = len(s)
            ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            valid = valid_pairs_mask(n, res.causal) if table == "k24_maps" else np.ones((n, n), bool)
            toks = np.asarray(s.tokens, dtype=object)
            for layer in res.layers:
                for name in names:
                    m = s.maps[layer][name].float().cpu().numpy()
                    if unit == schema.ROW_NORMALISED:
                        m = row_normalise(m)  # exactly as the site's k24_maps
                    rows.append(pd.DataFrame({
                        "model": res.model, "example": res.example_name(k), "layer": layer, key: name,
                        "i": ii[valid], "j": jj[valid], "token_i": toks[ii[valid]], "token_j": toks[jj[valid]],
                        "value": m[valid].astype("float32")}))
    elif table == "k21_tokens":
        units = schema.UNITS["k21_tokens"]
        for k, s in enumerate(res.sequences):
            for layer in res.layers:
                rows.append(pd.DataFrame({
                    "model": res.model, "dataset": dataset, "seq": k, "layer": layer, "pos": range(len(s)),
                    "token": s.tokens, "category": s.categories,
                    **{m: s.ratios[layer][m].float().cpu().numpy().astype("float32") for m in schema.K21_METHODS}}))
    else:
        worst: dict[tuple[int, str], float] = {}
        for s in res.sequences:
            for layer, per in s.errors.items():
                for point, e in per.items():
                    worst[(layer, point)] = max(worst.get((layer, point), 0.0), e)
        order = {p: k for k, p in enumerate(res.layout.checks)}
        rows.append(pd.DataFrame(
            [dict(model=res.model, dataset=dataset, layer=l, scope=p, max_rel_error=e)
             for (l, p), e in sorted(worst.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99)))],
            columns=cols))
    out = pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)
    return schema.unit_columns(out, units)
