"""K24 contribution maps: which pairs count, row normalisation and the FF-amp map (numpy only).

A map is an ``(n, n)`` array ``A[i, j]`` (row ``i`` = query/output token, column ``j`` = key/source
token) over the *unpadded* sequence; the compute side converts torch maps to numpy before calling
here. Causal models only have valid pairs ``j <= i``.

Pitfall: `row_normalise` leaves a row that sums to 0 all-zero (never nan), so an FF-amp row sums to
0 only when neither of its two rows is all-zero; pass causal maps with a zero upper triangle.
"""
from __future__ import annotations

import numpy as np


def valid_pairs_mask(n: int, causal: bool) -> np.ndarray:
    """Boolean ``(n, n)`` mask of the pairs that enter the statistics.

    All pairs for encoders; the lower triangle including the diagonal (``j <= i``) for causal models.
    """
    if causal:
        return np.tril(np.ones((n, n), dtype=bool))
    return np.ones((n, n), dtype=bool)


def row_normalise(m: np.ndarray) -> np.ndarray:
    """Divide each row (last axis) by its sum; rows that sum to 0 stay all-zero."""
    a = np.asarray(m, dtype=np.float64)
    s = a.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(s != 0, a / np.where(s != 0, s, 1.0), 0.0)
    return out


def ffamp(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """FF-amp map ``row_normalise(after) − row_normalise(before)``.

    Each row sums to 0 (unless exactly one of the two rows is all-zero). For causal models pass
    maps whose upper triangle is zero (it then stays zero).
    """
    return row_normalise(after) - row_normalise(before)
