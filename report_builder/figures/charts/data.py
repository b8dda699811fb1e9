"""Data plumbing shared by every chart builder: inline JSON data, field escaping, layer display.

Data is embedded inline as one JSON string per dataset (`inline_data`), so every spec is
self-contained, validates fast, and is independent of the active Altair data transformer (whose
default 5,000-row limit would reject map and scatter data); builders keep specs small instead
(compact map layout, rounding; callers subsample points). A renderer that wants the data out of the
page writes the whole spec to a content-hashed file.

Conventions: layers are 0-based in every result table and shown 1-based, as in the papers. Token
labels are ``"pos:token"`` so repeated tokens stay distinct, ordered by position.

Pitfall: Vega-Lite treats ``.`` and ``[`` ``]`` in *field names* as nested access; `field` escapes
them, so pass plain column names (hyphens are fine).
"""
from __future__ import annotations

import json
from typing import Sequence

import altair as alt
import pandas as pd


#: Default panel width for single charts (px); fits an 800 px column with a legend.
DEFAULT_WIDTH = 560
#: Axis title of every 1-based layer axis.
LAYER_TITLE = "layer (1 = first)"


def layer_x(name: str = "layer") -> alt.X:
    """The quantitative x axis of a 1-based layer column: it starts at layer 1 (no niced domain, no zero).

    Pitfall: Vega-Lite "nices" a quantitative domain by default, so a 30-layer model's ``[1, 30]``
    became ``[0, 30]`` and the axis showed a "layer 0" tick under a title saying 1 = first. And its
    ``tickMinStep`` does not reach the ticks Vega draws: a 2-layer model got ticks at 1, 1.5 and 2, labelled
    "1 2 2" by the integer format. A tick between two layers is left unlabelled (`LAYER_LABEL`; a scale-free
    expression, so it holds in facets with independent axes too).
    """
    return alt.X(f"{name}:Q", title=LAYER_TITLE,
                 axis=alt.Axis(tickMinStep=1, format="d", labelExpr=LAYER_LABEL),
                 scale=alt.Scale(zero=False, nice=False))


LAYER_LABEL = "datum.value % 1 ? '' : datum.label"
"""The layer axis' label of a tick: its layer, or nothing between two layers."""


def inline_data(data: pd.DataFrame | list[dict]) -> alt.InlineData:
    """Rows as inline Vega-Lite data: one compact JSON *string* with ``format: json``.

    A string keeps the spec small (no per-value indentation when the spec is pretty-printed) and makes
    schema validation O(1) instead of O(rows) — Altair validates inline record arrays element by element,
    which takes seconds for a few thousand rows. DataFrames are sanitised as Altair does (NaN -> null,
    timestamps -> ISO strings).
    """
    if isinstance(data, pd.DataFrame):
        from altair.utils.data import to_values

        data = to_values(data)["values"]
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return alt.InlineData(values=text, format=alt.DataFormat(type="json"))


def typed(df: pd.DataFrame, col: str) -> str:
    """``"col:Q"`` for numeric columns, ``"col:N"`` otherwise (inline data carries no dtype)."""
    kind = "Q" if pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]) else "N"
    return f"{field(col)}:{kind}"


def field(name: str) -> str:
    """Escape a column name for use in a Vega-Lite field definition."""
    return name.replace(".", "\\.").replace("[", "\\[").replace("]", "\\]")


def shown(df: pd.DataFrame) -> pd.DataFrame:
    """Layers are 0-based in the tables and shown 1-based, as in the papers (and the K21 charts)."""
    return df.assign(layer=df["layer"] + 1) if "layer" in df.columns else df


def token_labels(positions: Sequence[int] | pd.Series, tokens: Sequence[str] | pd.Series) -> pd.DataFrame:
    """``pos, label`` with ``label = "pos:token"`` (distinct even for repeated tokens), sorted by position."""
    lab = pd.DataFrame({"pos": pd.Series(positions).to_numpy(), "token": pd.Series(tokens).astype(str).to_numpy()})
    lab = lab.drop_duplicates("pos").sort_values("pos").reset_index(drop=True)
    lab["pos"] = lab["pos"].astype(int)
    lab["label"] = lab["pos"].astype(str) + ":" + lab["token"]
    return lab[["pos", "label"]]
