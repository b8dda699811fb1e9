"""The K24 pass's statistics on the scope maps, one sequence and layer at a time (host CPU, numpy).

`HostStats` takes each sequence's scope maps of one layer as the pass produces them (torch maps
already converted to numpy) and keeps the contextualization changes, the FF-amp top pairs and the
pair categories' base counts (`analyses.k24_compute.scope_partials` turns them into its partial
tables). A sequence is anything with the attributes of `data.encode.EncodedSeq` it reads: ``seq``,
``tokens``, ``special``, ``text``, ``offsets`` and ``word_ids``.

Pitfall: each sequence's pair categories are computed once and reused by its later layers, so
``n_layers`` must be the number of layers every sequence comes with (its pairs are dropped after
its last one); the tables are bit-identical to computing them anew in every layer.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder.stats.ctx_change import sequence_ctx_changes
from report_builder.stats.maps import row_normalise
from report_builder.stats.top_pairs import PAYLOAD, SeqInfo, SeqPairs, TopPairs, seq_pairs


def _info(e) -> SeqInfo:
    return SeqInfo(tokens=e.tokens, special=e.special, text=e.text, offsets=e.offsets, word_ids=e.word_ids)


class HostStats:
    """The K24 pass's statistics on the scope maps, one sequence and layer at a time (host CPU, numpy):
    contextualization changes (`sequence_ctx_changes`: each scope ranked once) and the FF-amp
    top pairs and base counts (`TopPairs`), with each sequence's pair categories computed once for
    all its layers (`seq_pairs`, dropped after its last layer).

    Args:
        lay: the model's `schema.Layout`. causal: pairs ``j ≤ i`` only.
        include_special: when False, the contextualization change leaves out pairs of special tokens.
        n_layers: layers each sequence comes with (when its pairs can be dropped).
    """

    CTX_COLS = ("seq", "layer", "kind", "component", "from_scope", "to_scope", "change")

    def __init__(self, lay, causal: bool, *, top_k: int, include_special: bool, n_layers: int):
        self.lay, self.causal, self.top_k = lay, causal, top_k
        self.include_special, self.n_layers = include_special, n_layers
        self.ctx_rows: list[dict] = []
        self.tops: dict[int, TopPairs] = {}
        self._pairs: dict[int, tuple[SeqPairs, int]] = {}  # seq -> (its pairs, layers still to come)

    def add(self, e, layer: int, full: dict[str, np.ndarray]) -> None:
        """One sequence's scope maps (scope -> ``(n, n)`` array) of one layer."""
        lay = self.lay
        maps = full
        if not self.include_special:
            keep = ~np.asarray(e.special)
            maps = {s: m[np.ix_(keep, keep)] for s, m in full.items()}
        for row in sequence_ctx_changes(maps, lay.id, self.causal):
            self.ctx_rows.append(dict(seq=e.seq, layer=layer, **row))
        b, a = row_normalise(full[lay.ff_before]), row_normalise(full[lay.ff_after])
        info = _info(e)
        pairs, left = self._pairs.get(e.seq) or (seq_pairs(info, self.causal), self.n_layers)
        if left > 1:
            self._pairs[e.seq] = (pairs, left - 1)
        else:
            self._pairs.pop(e.seq, None)
        tp = self.tops.setdefault(layer, TopPairs(k=self.top_k, causal=self.causal))
        tp.add(e.seq, a - b, info, before=b, after=a, pairs=pairs)

    def tables(self) -> dict[str, pd.DataFrame]:
        """``ctx_rows``, ``top_pairs`` and ``base_counts`` of `scope_partials`."""
        tops = sorted(self.tops.items())
        return {
            "ctx_rows": pd.DataFrame(self.ctx_rows, columns=list(self.CTX_COLS)),
            "top_pairs": _concat([tp.top_frame().drop(columns="rank").assign(layer=l) for l, tp in tops],
                                 ["layer", *PAYLOAD]),
            "base_counts": _concat([tp.base_frame().assign(layer=l) for l, tp in tops],
                                   ["layer", "category", "base_count"]),
        }


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
