"""The chunk rules: how the FF step of the decomposition is cut, one rule per device class.

- **CPU** (`ff_tiles`, `default_chunk_rows`): chunks of a few query rows whose terms stay near
  `CACHE_NUMBERS` (the element-wise passes over the terms run from cache; long sequences tile a
  chunk's sources), measured on a 2-core x86 CPU. The deterministic path's rule: a sequence is always
  cut the same way, so its results are byte-identical whatever runs it.
- **GPU** (`gpu_plan`): few, large blocks: every query row of the whole batch over every source in one
  block while the budget allows (the device's free memory, or an explicit ``max_memory``); causal
  models in row blocks over their source prefixes, sized so the pairs computed stay within
  `CAUSAL_EFFICIENCY` of the minimal n (n+1) / 2; blocks packed into buffers (`FFPlan.groups`) that
  each fit the budget, so the second FF matmul is one GEMM per buffer.

`rule_class` resolves ``chunk_rule`` (`schema.CHUNK_RULES`: ``auto`` = the device's class). Also the row
blocks of the causal attention step (`BLOCK_ROWS`) and the pairs a causal decomposition cut this way
covers (`pair_count`, `FFPlan.pairs`). Used by every layout's FF step (`decompose.layouts`), the FLOP
model (`costs.flops`) and the memory footprint of a plan (`costs.footprint`). Torch-free.

Pitfall: both rules depend only on the shapes and the budget, never on the data or the thread count;
the GPU rule's budget defaults to the device's free memory, which only caps blocks that would not fit
(a device kind with enough memory always cuts a shape the same way).
"""
from __future__ import annotations

from dataclasses import dataclass

from report_builder.schema import CHUNK_RULES

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


# ---------------------------------------------------------------- the device classes and the GPU rule


def rule_class(chunk_rule: str, device_type: str, precision: str = "float32") -> str:
    """The device class a ``chunk_rule`` (`schema.CHUNK_RULES`) names: ``cpu`` or ``gpu``. ``auto``: the
    device's own (``cpu`` on the CPU, ``gpu`` on any other device); a reduced ``precision`` runs the GPU
    rule's FF step (its GEMMs take the mode), so ``auto`` means ``gpu`` then, and ``cpu`` is refused."""
    if chunk_rule not in CHUNK_RULES:
        raise ValueError(f"chunk_rule: {chunk_rule!r} is not one of {', '.join(CHUNK_RULES)}")
    if chunk_rule == "auto":
        return default_class(device_type) if precision == "float32" else "gpu"
    if chunk_rule == "cpu" and precision != "float32":
        raise ValueError(f"precision {precision} runs the GPU rule's FF step; use chunk_rule gpu or auto")
    return chunk_rule


def default_class(device_type: str) -> str:
    """The class ``auto`` picks on a device of this type (the cache key names a rule only when it differs)."""
    return "cpu" if device_type == "cpu" else "gpu"


CAUSAL_EFFICIENCY = 0.9
"""The GPU rule cuts a causal sequence into row blocks over their source prefixes such that the minimal
pairs n (n+1) / 2 are at least this fraction of the pairs computed (the zero pairs j > i inside each
block are computed too)."""
MIN_BLOCK_ROWS = 8
"""Rows of the smallest causal block of the GPU rule: short sequences get few blocks (each block is a
few launches; below this, launches cost more than the zero pairs they save)."""
GPU_FREE_FRACTION = 0.5
"""The share of the device's free memory the GPU rule's buffers may take when no budget is given."""
GPU_BUFFER_BYTES = 4 << 30
"""The most one GPU-rule buffer holds, whatever the memory free: from ~10^5 pair rows on, the buffer's one
GEMM runs at the device's matmul rate, so larger buffers gain nothing and only fragment the allocator (a
48 GiB buffer for SmolLM2 at n = 4096 failed on an H200 with 50 GiB reserved but unallocated). It also
makes the cut the same on every device of a kind whatever else holds memory there."""


def ff_pair_bytes(d: int, d_ff: int, gated: bool, itemsize: int = 4, reduced: bool = False) -> int:
    """Bytes the GPU rule's buffers hold per (query, source) pair: the first projection's terms (gated:
    both), the FF output terms (the residual and norm terms reuse them in place), the map index, and a
    16-bit copy of the hidden terms in a reduced precision."""
    k = 2 if gated else 1
    return (k * d_ff + d) * itemsize + 8 + (2 * d_ff if reduced else 0)


RAGGED_SAVING = 0.25
"""The GPU rule cuts a padded batch per sequence (each over its own length, no pad pairs) once that saves
at least this share of the pairs the padded blocks would compute (more launches, fewer FLOPs)."""


@dataclass(frozen=True)
class FFPlan:
    """How the GPU rule cuts one layer's FF step for a batch.

    Attributes:
        blocks: row blocks ``(seq, start, stop, sources)``: query rows ``start:stop`` over the sources
            ``0:sources`` (``n``, or ``stop`` for a causal model) of sequence ``seq``, or of every
            sequence of the batch (``seq = -1``), in row order.
        groups: ``(first, last)`` block index ranges (last exclusive) packed into one buffer: the
            second FF matmul is one GEMM per group.
        pairs: (query, source) pairs computed for the batch (zero pairs j > i inside causal blocks
            included); `pair_count` gives the minimum per sequence.
        batch: the batch size. budget_bytes: the budget the groups were sized to.
    """

    blocks: tuple[tuple[int, int, int, int], ...]
    groups: tuple[tuple[int, int], ...]
    pairs: int
    batch: int
    budget_bytes: int

    @property
    def rows(self) -> int:
        """Rows of the largest block (what `ff_tiles` calls the chunk's rows)."""
        return max(b - a for _, a, b, _ in self.blocks)

    def block_pairs(self, block: tuple[int, int, int, int]) -> int:
        """Pairs one block computes (its sequences x rows x sources)."""
        seq, a, b, src = block
        return (self.batch if seq < 0 else 1) * (b - a) * src

    def group_pairs(self, g: int) -> int:
        """Pairs the buffer of group ``g`` holds (the rows of its one GEMM)."""
        a, b = self.groups[g]
        return sum(self.block_pairs(k) for k in self.blocks[a:b])


def _causal_blocks(n: int) -> list[tuple[int, int]]:
    """Row blocks of a causal sequence: the fewest equal blocks (at least `MIN_BLOCK_ROWS` rows each)
    whose source prefixes keep the minimal pairs >= `CAUSAL_EFFICIENCY` of those computed."""
    minimal = n * (n + 1) // 2
    m = 1
    while True:
        r = -(-n // m)
        blocks = [(s, min(n, s + r)) for s in range(0, n, r)]
        done = sum((b - a) * b for a, b in blocks)
        if minimal >= CAUSAL_EFFICIENCY * done or r <= MIN_BLOCK_ROWS:
            return blocks
        m += 1


def _seq_blocks(seq: int, n: int, nb: int, causal: bool, rows: int | None, cap: int) -> list[tuple[int, int, int, int]]:
    """The blocks of ``nb`` sequences (``seq``: one of them, or -1: the batch) of ``n`` tokens, each holding
    at most ``cap`` pairs (rows cut into equal sub-blocks over the same sources)."""
    if rows:
        spans = [(a, min(n, a + rows)) for a in range(0, n, rows)]
    else:
        spans = _causal_blocks(n) if causal else [(0, n)]
    out = []
    for a, b in spans:
        src = b if causal else n
        most = max(1, cap // max(nb * src, 1))  # rows one block may hold
        parts = -(-(b - a) // most)
        step = -(-(b - a) // parts)  # equal sub-blocks, each within `most` rows
        out += [(seq, s, min(b, s + step), src) for s in range(a, b, step)]
    return out


def gpu_plan(n: int, d: int, d_ff: int, *, budget_bytes: int, batch: int = 1, causal: bool = False,
             gated: bool = False, itemsize: int = 4, reduced: bool = False, rows: int | None = None,
             lengths: list[int] | None = None) -> FFPlan:
    """The GPU rule's blocks and buffers for ``batch`` sequences padded to ``n`` tokens.

    Bidirectional: one block of every row of the batch over every source while its pairs fit
    ``budget_bytes`` (`ff_pair_bytes` each), else the rows cut into equal blocks that do. Causal: the
    blocks of `_causal_blocks`, each cut further where it alone would not fit. A padded batch whose real
    ``lengths`` would save `RAGGED_SAVING` of the pairs is cut per sequence instead. Consecutive blocks are
    packed into groups up to the budget. Shape-only (and budget-capped), like the CPU rule. ``rows``:
    blocks of that many rows instead (tests; causal blocks still over their source prefixes).
    """
    per_pair = ff_pair_bytes(d, d_ff, gated, itemsize, reduced)
    cap = max(1, min(budget_bytes, GPU_BUFFER_BYTES) // max(per_pair, 1))  # pairs a buffer may hold
    lengths = list(lengths) if lengths is not None else [n] * batch
    dense = pair_count(n, causal) * batch
    ragged = sum(pair_count(k, causal) for k in lengths)
    if batch > 1 and ragged <= (1 - RAGGED_SAVING) * dense:
        blocks = [blk for b, k in enumerate(lengths) if k > 0 for blk in _seq_blocks(b, k, 1, causal, rows, cap)]
    else:
        blocks = _seq_blocks(-1, n, batch, causal, rows, cap)
    plan = FFPlan(tuple(blocks), (), 0, batch, budget_bytes)
    groups: list[tuple[int, int]] = []
    first, held = 0, 0
    for k, blk in enumerate(blocks):
        size = plan.block_pairs(blk)
        if k > first and held + size > cap:
            groups.append((first, k))
            first, held = k, 0
        held += size
    groups.append((first, len(blocks)))
    return FFPlan(plan.blocks, tuple(groups), sum(plan.block_pairs(b) for b in blocks), batch, budget_bytes)
