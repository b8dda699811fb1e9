"""The one chunk rule: how many query rows one FF chunk of the decomposition holds.

Used by every layout's FF step (`decompose.layouts`) and by the memory footprint of a plan
(`costs.footprint`), so the plan prices the chunks the decomposition really cuts. Torch-free.

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
