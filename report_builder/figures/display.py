"""Result tables as figures show them: token strings in their display form, raw strings kept beside.

Every figure reads tables through its `FigureContext`, which passes them through `display_tables`
once: each ``token`` / ``token_i`` / ``token_j`` column becomes the display form of
`report_builder.tokens` (byte-level BPE decoded with ``▁`` for a space, WordPiece ``##`` kept, a
causal model's first special token named ``BOS``) and the tokenizer's own string moves to
``token_raw`` / ``token_i_raw`` / ``token_j_raw``, so the CSVs carry both; a column of the data's own
text (`TEXT_COLUMNS`) shows its control characters as ``<0x1B>``.

Pitfall: the tokenizer style is judged per model from all of its tokens (never per token), and a
model counts as causal when its first token mixes nothing under ATTN-W in every sequence and layer
(a causal mask lets position 0 attend only to itself); without K21 results, a model whose layers
are not post-LN is taken as causal.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import pandas as pd

from report_builder import schema
from report_builder import tokens as tok

TOKEN_COLUMNS = {"token": "pos", "token_i": "i", "token_j": "j"}
TEXT_COLUMNS = ("context", "example")
"""Columns of a data file's text (K24's top pairs' snippet): control characters shown (`tokens.visible_controls`:
SVG cannot hold them, the chart renderer aborts the process on one)."""


def _causal_models(tables: dict[str, pd.DataFrame]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    models = tables.get("models")
    if models is not None and {"model", "ln_position"} <= set(models.columns):
        out.update({str(m): str(p) != schema.POST_LN.id for m, p in zip(models["model"], models["ln_position"])})
    k21 = tables.get("k21_tokens")
    if k21 is not None and not k21.empty and {"pos", "ATTN-W"} <= set(k21.columns):
        first = k21[k21["pos"] == 0]
        for m, g in first.groupby("model", sort=False):
            out[str(m)] = bool((g["ATTN-W"].abs() < 1e-9).all())
    return out


def _styles(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    seen: dict[str, set] = {}
    for df in tables.values():
        if df is None or "model" not in df.columns:
            continue
        for col in TOKEN_COLUMNS:
            if col in df.columns:
                for m, g in df.groupby("model", sort=False):
                    seen.setdefault(str(m), set()).update(g[col].dropna().astype(str).unique()[:20000])
    return {m: tok.token_style(v) for m, v in seen.items()}


def _display_one(df: pd.DataFrame, cols: list[str], styles: dict[str, str], causal: dict[str, bool]) -> pd.DataFrame:
    """``df`` with ``cols`` in display form and the raw strings beside them (a copy)."""
    df = df.copy()
    for col in cols:
        pos_col = TOKEN_COLUMNS[col]
        raw = df[col]
        first = (df[pos_col] == 0) if pos_col in df.columns else pd.Series(False, index=df.index)
        shown = raw.copy()
        for m, idx in df.groupby("model", sort=False).groups.items():
            style, is_causal = styles.get(str(m), tok.PLAIN), causal.get(str(m), False)
            keys = pd.Series(list(zip(raw.loc[idx], first.loc[idx])), index=idx)
            cache = {k: tok.display_token(k[0], style, causal=is_causal, first=bool(k[1])) for k in set(keys)}
            shown.loc[idx] = keys.map(cache)
        at = list(df.columns).index(col)
        df[col] = shown
        df.insert(at + 1, f"{col}_raw", raw)
    for col in TEXT_COLUMNS:  # a data file's own text: its control characters shown, never drawn
        if col in df.columns:
            df[col] = df[col].map(lambda v: tok.visible_controls(v) if isinstance(v, str) else v)
    return df


def _todo(df: pd.DataFrame | None) -> list[str]:
    """The token columns of ``df`` still to be put in display form."""
    if df is None or "model" not in getattr(df, "columns", ()):
        return []
    return [c for c in TOKEN_COLUMNS if c in df.columns and f"{c}_raw" not in df.columns]


def needs_display(df: pd.DataFrame | None) -> bool:
    """Whether reading ``df`` through `DisplayTables` changes it (token columns still raw)."""
    return bool(_todo(df))


def display_tables(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """A copy of ``tables`` with display tokens (idempotent: tables that have ``*_raw`` are kept)."""
    todo = {name: cols for name, df in tables.items() if (cols := _todo(df))}
    if not todo:
        return tables if isinstance(tables, dict) else dict(tables)
    styles, causal = _styles(tables), _causal_models(tables)
    out = dict(tables)
    for name, cols in todo.items():
        out[name] = _display_one(tables[name], cols, styles, causal)
    return out


class DisplayTables(Mapping):
    """`display_tables` done lazily: each table is put in display form the first time it is read.

    The tokenizer styles and causality are judged once, from all the raw tables, as `display_tables`
    does, so a table read here equals the same table of `display_tables`. A figure that is not built
    (its inputs unchanged since the last build, `site.figure_cache`) converts nothing.
    """

    display_ready = True  # `FigureContext` takes it as it is

    def __init__(self, raw: Mapping[str, pd.DataFrame], judged: tuple[dict[str, str], dict[str, bool]] | None = None):
        self.raw = dict(raw)
        self._done: dict[str, pd.DataFrame] = {}
        self._judged = judged  # given: a recorded judgement (`report_builder.citations.reproduce`), else judged on first use

    def judged(self) -> tuple[dict[str, str], dict[str, bool]]:
        """(tokenizer style per model, causal per model), judged from all the raw tables."""
        if self._judged is None:
            self._judged = (_styles(self.raw), _causal_models(self.raw))
        return self._judged

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._done:
            df = self.raw[name]
            cols = _todo(df)
            self._done[name] = _display_one(df, cols, *self.judged()) if cols else df
        return self._done[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


def is_causal(tables: dict[str, pd.DataFrame], model: str) -> bool:
    """Whether ``model`` is causal (see the module pitfall)."""
    return _causal_models(tables).get(model, False)
