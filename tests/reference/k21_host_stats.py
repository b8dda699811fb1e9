"""The K21 analyses' host statistics as they were before issue #25, frozen: the unit tests' bit-for-bit
reference and the timing baseline of ``python -m tests.tools.bench_stats --k21-pass N``.

`NaiveTokenRows` is the per (sequence, layer) body of `k21_compute.mixing_ratios` before the rewrite,
kept verbatim: every layer extended Python lists with the sequence's tokens, categories and each
method's ratios (``tolist``), and the ``k21_tokens`` frame was built from those lists and sorted by
(seq, layer, pos). `naive_frequency_table` is `k21_compute.frequency_table` verbatim: a pandas
``groupby(...).mean()`` over six key columns and a Python dict of every token's id for the ranks.
The current code (`stats.k21_tables`) keeps each layer's ratios as one float32 block, orders blocks
instead of rows, and averages over layers with the same float32 compensated sum pandas runs.

Pitfall: ``add`` takes the engine's ratios (a dict of torch tensors), as the loop did; torch is only
touched through the tensors' own methods.
"""
from __future__ import annotations

import pandas as pd

from report_builder.schema import K21_METHODS


class NaiveTokenRows:
    """``k21_tokens`` rows accumulated per (sequence, layer) as `k21_compute.mixing_ratios` did."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {k: [] for k in ("seq", "layer", "pos", "token", "category", *K21_METHODS)}

    def add(self, e, layer: int, ratios: dict) -> None:
        cols = self.cols
        n = len(e)
        cols["seq"].extend([e.seq] * n)
        cols["layer"].extend([layer] * n)
        cols["pos"].extend(range(n))
        cols["token"].extend(e.tokens)
        cols["category"].extend(e.category)
        for m in K21_METHODS:
            cols[m].extend((100.0 * ratios[m].float().cpu().numpy()).tolist())

    def frame(self, model: str, dataset: str) -> pd.DataFrame:
        df = pd.DataFrame(self.cols)
        df.insert(0, "dataset", dataset)
        df.insert(0, "model", model)
        df = df.sort_values(["seq", "layer", "pos"], kind="mergesort").reset_index(drop=True)
        df[list(K21_METHODS)] = df[list(K21_METHODS)].astype("float32")
        return df


def naive_frequency_table(tokens_df: pd.DataFrame, encoded: list, ranks: dict[int, int]) -> pd.DataFrame:
    """``k21_freq``: layer-averaged ratios per token occurrence with its frequency rank (unmasked inputs)."""
    keys = ["model", "dataset", "seq", "pos", "token", "category"]
    df = tokens_df.groupby(keys, sort=False)[list(K21_METHODS)].mean().reset_index()
    worst = max(ranks.values()) if ranks else 1
    id_of = {(e.seq, p): tid for e in encoded for p, tid in enumerate(e.input_ids)}
    df.insert(6, "freq_rank", [int(ranks.get(id_of[(s, p)], worst)) for s, p in zip(df["seq"], df["pos"])])
    return df
