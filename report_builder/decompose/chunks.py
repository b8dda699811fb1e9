"""The one chunk rule: how many query rows one FF chunk of the decomposition holds and, for long
sequences, how its sources are tiled (`ff_tiles`); the row blocks of the causal attention step
(`BLOCK_ROWS`); and the pairs a causal decomposition cut this way covers (`pair_count`).

Used by every layout's FF step (`decompose.layouts`), by the FLOP model (`costs.flops`) and by the
memory footprint of a plan (`costs.footprint`), so the plan prices the chunks the decomposition
really cuts. Torch-free.

Pitfall: the rule depends only on the shapes and the budget, never on the data or the thread count,
so a sequence is always cut the same way (and its results are byte-identical whatever runs it).
"""
from __future__ import annotations

# Numbers one chunk's FF terms may hold for cache locality (~16 MB of float32): measured on a 2-core
# x86 CPU, chunks of a few query rows run the element-wise passes over the terms from cache and
# reach 64-88 % of the matmul roofline, whole-sequence chunks 45-75 % (`report-builder bench`).
CACHE_NUMBERS = 4 << 20


def default_chunk_rows(n: int, d: int, d_ff: int, *, budget_bytes: int = 512 << 20, itemsize: int = 4,
                       gated: bool = False, batch: int = 1) -> int:
    """Query rows per chunk: as many as keep one chunk's FF terms near `CACHE_NUMBERS` numbers, never
    more than ``budget_bytes`` allows.

    Per query row the loop holds at most ``n * (2 d' + 3 d)`` numbers (gated: both projections'
    terms; FF terms; residual terms), plus GEMM temporaries; the budget counts ``n * (3 d' + 5 d)``
    to leave room for them. Depends only on the shapes and the budget, never on the data or the
    thread count, so a sequence is always cut the same way. ``batch`` sequences share a chunk.
    """
    per_row = batch * n * (3 * d_ff + 5 * d) * itemsize
    by_budget = budget_bytes // max(per_row, 1)
    by_cache = CACHE_NUMBERS // max(batch * n * ((2 if gated else 1) * d_ff + 2 * d), 1)
    return max(1, min(n, by_budget, max(by_cache, 1)))


LONG_ROWS = 32
"""Query rows per FF chunk once one row's terms over every source exceed `CACHE_NUMBERS` (long
sequences, `ff_tiles`): the per-head vectors through W1 are then read once per 32 rows, not per row."""


def ff_tiles(n: int, d: int, d_ff: int, *, budget_bytes: int = 512 << 20, itemsize: int = 4, gated: bool = False,
             batch: int = 1) -> tuple[int, int]:
    """``(rows, sources)``: query rows per FF chunk, and sources per tile of a chunk's source range.

    While one row's terms over all ``n`` sources stay within `CACHE_NUMBERS`, a chunk is
    `default_chunk_rows` rows over every source (one tile: ``sources = n``). Beyond (long sequences),
    a chunk is `LONG_ROWS` rows and its sources are cut into tiles that keep a tile's terms near
    `CACHE_NUMBERS` (a chunk's sums then add its tiles' partial sums in source order), halving the rows
    while a tile would exceed ``budget_bytes``. Shape-only, like `default_chunk_rows`.
    """
    per_pair = batch * ((2 if gated else 1) * d_ff + 2 * d)
    if n * per_pair <= CACHE_NUMBERS:
        return default_chunk_rows(n, d, d_ff, budget_bytes=budget_bytes, itemsize=itemsize, gated=gated,
                                  batch=batch), n
    rows = max(1, min(n, LONG_ROWS))
    pair_bytes = batch * (3 * d_ff + 5 * d) * itemsize
    while True:
        tile = max(1, min(n, CACHE_NUMBERS // (rows * per_pair)))
        if rows == 1 or rows * tile * pair_bytes <= budget_bytes:
            return rows, tile
        rows //= 2


BLOCK_ROWS = 128
"""Rows per block of the causal attention step (`decompose.attention`: query rows for the head sums,
source rows for the Gram maps): large GEMMs, at most ``BLOCK_ROWS - 1`` zero pairs computed per row."""


def pair_count(n: int, causal: bool, rows: int | None = None) -> int:
    """The pairs (i, j) an n^2 step covers for one sequence of ``n`` tokens.

    Bidirectional: ``n^2``. Causal, the minimum: the ``n (n + 1) / 2`` pairs j <= i. Causal as the
    decomposition cuts it (``rows`` query rows per block, each block over its source prefix
    ``[0, stop)``, the zero pairs j > i inside a block included): ``sum (stop - start) stop``.
    """
    if not causal:
        return n * n
    if rows is None:
        return n * (n + 1) // 2
    rows = max(1, min(n, rows))
    full, last = divmod(n, rows)  # blocks of `rows` rows end at rows, 2 rows, ..., then one of `last` rows
    return rows * rows * full * (full + 1) // 2 + last * n


STREAM_BYTES = 256 << 20
"""A sequence whose maps for all its layers would exceed this is streamed layer by layer on the
deterministic path (`engine.decompose_sequences`), holding one layer's maps at a time."""


def streams(n: int, layers: int, n_maps: int, itemsize: int = 4) -> bool:
    """Whether a sequence of ``n`` tokens is streamed: its ``n_maps`` (n, n) maps for ``layers`` layers
    would exceed `STREAM_BYTES`. Shape-only; streaming changes no result, only what is held."""
    return layers * n_maps * n * n * itemsize > STREAM_BYTES
