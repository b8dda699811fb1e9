"""k24-ffamp-example: one example sentence's FF-amplified token pairs as an annotated token map.

The paper's linguistic-evidence figure shows, in sentences, which token pairs FF amplifies. Here the
cached example maps (``k24_maps``, row-normalised) give, for the K21 example pair and one layer,
``FF-amp = Â^{after FF} − Â^{before FF}`` (`stats.maps.ffamp`); the map is drawn as a diverging
heatmap (query token i × source token j) and the top pairs (i ≠ j, positive amp) are numbered on it
and listed with their linguistic category (`stats.pair_categories`, word ids inferred from the
subword markers). The layer shown is the one whose top pair is amplified most (computed, stated in
the reading).

Pitfall: the example maps carry display tokens only, so special tokens are recognised by their
display form (``[CLS]``, ``<s>``, ``BOS``, …) and multi-word names are not searched (no offsets);
the dataset-wide analysis (k24-ffamp-top) uses the tokenizer's own word ids and offsets.
"""
from __future__ import annotations

import re

import altair as alt
import numpy as np
import pandas as pd

from report_builder import schema
from report_builder.stats.maps import ffamp
from report_builder.stats.pair_categories import pair_categories
from report_builder.figures import snippets, theme
from report_builder.figures.charts.data import inline_data
from report_builder.figures.k24 import selection as sel
from report_builder.figures.spec import FigureContext, FigureResult
from report_builder.precision import published as pub

TOP = 8
#: A rank's cell is dark (its label white) beyond this share of the colour domain's half-width.
RANK_ON_DARK = 0.6
UNITS = {"amp": schema.ROW_NORMALISED}
"""The units of the figure's data: ``amp`` is a difference of two row-normalised maps."""
_SPECIAL = re.compile(r"^(\[[A-Z]+\]|<[^>]+>|<\|[^|]+\|>|BOS|EOS)$")


def example_amp(maps: pd.DataFrame, layout: schema.Layout) -> tuple[pd.DataFrame, pd.DataFrame]:
    """FF-amp of one example and model at every layer, and its top pairs at the layer shown.

    Args:
        maps: ``k24_maps`` rows of one model and example.
        layout: the model's `schema.Layout`, whose FF scopes (``ff_before``, ``ff_after``) are compared.
    Returns:
        (cells: layer, i, j, token_i, token_j, amp for the layer shown;
         top: rank, i, j, token_i, token_j, amp, category — the top pairs of that layer).
    """
    before_s, after_s = layout.ff_before, layout.ff_after
    toks = maps.drop_duplicates("i").sort_values("i")["token_i"].astype(str).tolist()
    n = len(toks)
    special = [bool(_SPECIAL.match(t)) for t in toks]
    cats = pair_categories(tuple(toks), None, None, "", tuple(special))
    best, best_layer = -np.inf, None
    amps = {}
    for layer, g in maps.groupby("layer", sort=True):
        mats = {}
        for s in (before_s, after_s):
            gs = g[g["scope"] == s]
            m = np.zeros((n, n))
            m[gs["i"].to_numpy(), gs["j"].to_numpy()] = gs["value"].to_numpy()
            mats[s] = m
        a = ffamp(mats[before_s], mats[after_s])
        amps[int(layer)] = a
        off = a.copy()
        np.fill_diagonal(off, -np.inf)
        if off.max() > best:
            best, best_layer = float(off.max()), int(layer)
    if best_layer is None:
        raise ValueError("no layers in the example maps")
    a = amps[best_layer]
    ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    cells = pd.DataFrame({"layer": best_layer, "i": ii.ravel(), "j": jj.ravel(),
                          "token_i": [toks[k] for k in ii.ravel()], "token_j": [toks[k] for k in jj.ravel()],
                          "amp": a.ravel()})
    off = cells[(cells["i"] != cells["j"]) & (cells["amp"] > 0)].sort_values(["amp", "i", "j"],
                                                                                ascending=[False, True, True])
    top = off.head(TOP).reset_index(drop=True)
    top.insert(0, "rank", np.arange(1, len(top) + 1))
    top["category"] = [str(cats[i, j]) for i, j in zip(top["i"], top["j"])]
    return cells, top


def annotated_amp_map(cells: pd.DataFrame, top: pd.DataFrame, title: str, cell: int = 18) -> alt.LayerChart:
    """Diverging FF-amp heatmap (i × j) with the top pairs numbered on their cells."""
    n = int(cells["i"].max()) + 1
    lim = float(max(cells["amp"].abs().max(), 1e-9))
    lab = {int(r.i): f"{int(r.i)}:{r.token_i}" for r in cells.drop_duplicates("i").itertuples()}
    c = cells.assign(label_i=cells["i"].map(lab), label_j=cells["j"].map(lab))
    # a rank is dark on a light cell and white on a dark one, in either colour scheme (left to the scheme,
    # the dark one's light text vanished on the light cells); a flag, not a threshold in an expression,
    # so float noise in ``lim`` changes no byte of the spec
    t = top.assign(label_i=top["i"].map(lab), label_j=top["j"].map(lab),
                   on_dark=(top["amp"].abs() > RANK_ON_DARK * lim))
    x = alt.X("label_j:N", sort=alt.EncodingSortField("j", op="min"), title="j (source token)")
    y = alt.Y("label_i:N", sort=alt.EncodingSortField("i", op="min"), title="i (query token)")
    heat = alt.Chart(inline_data(c[["i", "j", "label_i", "label_j", "amp"]].to_dict("records"))).mark_rect().encode(
        x=x, y=y,
        color=alt.Color("amp:Q", scale=alt.Scale(scheme=theme.DIVERGING, domain=[-lim, lim]),
                        title="FF-amp (after − before FF)"),
        tooltip=[alt.Tooltip("label_i:N", title="i (query)"), alt.Tooltip("label_j:N", title="j (source)"),
                 alt.Tooltip("amp:Q", format="+.3f")])
    marks = alt.Chart(inline_data(t[["i", "j", "label_i", "label_j", "rank", "amp", "category", "on_dark"]]
                                  .to_dict("records"))).mark_text(fontWeight="bold", fontSize=theme.FONT_SIZE).encode(
        x=x, y=y, text=alt.Text("rank:Q"),
        color=alt.condition("datum.on_dark", alt.value("white"), alt.value("#222")),
        tooltip=[alt.Tooltip("rank:Q"), alt.Tooltip("label_i:N", title="i (query)"),
                 alt.Tooltip("label_j:N", title="j (source)"), alt.Tooltip("amp:Q", format="+.3f"),
                 alt.Tooltip("category:N")])
    return alt.layer(heat, marks).properties(width=cell * n, height=cell * n, title=title)


def build_ffamp_example(ctx: FigureContext) -> FigureResult:
    """k24-ffamp-example from ``k24_maps``: the primary model's first example (see module docstring)."""
    maps = sel.result_table(ctx, "k24_maps", snippets.K24_BOTH)
    model = sel.primaries(ctx, maps["model"].unique())[0]
    mm = maps[maps["model"] == model]
    example = schema.example_order(mm["example"].unique())[0]
    layout = sel.layouts(ctx, mm)[model]
    cells, top = example_amp(mm[mm["example"] == example], layout)
    layer = int(cells["layer"].iloc[0])
    chart = annotated_amp_map(cells, top, f"{model}, layer {layer + 1}: FF-amplified pairs of “{example}”")
    table = top.assign(pair=[f"{a} ← {b}" for a, b in zip(top["token_i"], top["token_j"])])[
        ["rank", "pair", "i", "j", "amp", "category"]].rename(
        columns={"rank": "Rank", "pair": "Pair (query ← source)", "amp": "FF-amp", "category": "Category"})
    if len(top):
        shares = top["category"].value_counts()
        lead = ", ".join(f"{k} {v}" for k, v in shares.items())
        reading = (f"In layer {layer + 1} of {model} (the layer whose top pair FF amplifies most), the most "
                   f"amplified pair is {top['token_i'].iloc[0]} ← {top['token_j'].iloc[0]} "
                   f"(+{pub(top['amp'].iloc[0], '.3f')} of the row's attribution); categories of the top {len(top)}: {lead}.")
    else:
        reading = f"FF amplifies no off-diagonal pair of this example in {model}."
    return FigureResult(data=cells.assign(model=model, example=str(example)), chart=chart, table=table,
                        reading=reading, models=(model,),
                        params={"example": str(example), "layer": layer, "top": TOP,
                                "scopes": [layout.ff_before, layout.ff_after]})
