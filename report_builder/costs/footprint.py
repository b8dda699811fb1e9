"""Peak memory and disk of a task: the tensors a decomposition holds (as the chunking budget sizes
them) and the rows of the tables its cache entry stores.

Pitfall: the memory numbers mirror `decompose.layouts` and `engine` (what they hold per sequence and
per chunk); change them together.
"""
from __future__ import annotations

from typing import Iterable

from report_builder.costs.flops import Shape

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


MAPS_KEPT = 7
"""Upper bound on the ``(n, n)`` maps a layer's result keeps (the scopes of the longest layout)."""


def capture_bytes(s: Shape, n: int, itemsize: int) -> int:
    """What the forward pass and the capture hold for one sequence. The engine decomposes each layer
    inside the forward pass and drops its captures (`models.capture`, streaming), so one layer's
    probabilities, input and 6 check-point tensors are held at a time, plus every finished layer's
    maps (at most `MAPS_KEPT` of ``n x n``)."""
    return sequence_capture_bytes(n, s.d, s.heads, 1, itemsize) + s.layers * MAPS_KEPT * n * n * itemsize


def sequence_capture_bytes(n: int, d: int, heads: int, layers: int, itemsize: int) -> int:
    """`capture_bytes` from the sizes alone (``bench.memory.batch_for_budget`` sizes forward batches by it)."""
    return itemsize * layers * (2 * heads * n * n + 8 * n * d)


def layer_fixed_bytes(n: int, d: int, d_ff: int, heads: int, gated: bool, itemsize: int) -> int:
    """Numbers `decompose_layer` holds outside the chunk loop (probabilities, Gram products, per-head
    vectors through W1, per-token vectors, maps), in bytes."""
    k = 2 if gated else 1
    numbers = 4 * heads * n * n + 12 * n * n + n * heads * (2 * d + k * d_ff) + 24 * n * d + 8 * k * n * d_ff
    return numbers * itemsize


def chunk_bytes(s: Shape, n: int, budget: int, itemsize: int, batch: int = 1) -> int:
    """The FF chunk loop's numbers: rows per chunk as `decompose.chunks.default_chunk_rows` picks them."""
    from report_builder.decompose.chunks import default_chunk_rows

    rows = default_chunk_rows(n, s.d, s.d_ff, budget_bytes=budget, itemsize=itemsize, gated=s.gated, batch=batch)
    return batch * rows * n * (3 * s.d_ff + 5 * s.d) * itemsize


ROW_BYTES: dict[str, float] = {"k21_tokens": 28, "k21_maps": 3.2, "k21_freq": 48, "k24_ffamp_pairs": 52,
                               "k24_ln_dims": 30, "k24_maps": 6.3}
"""Parquet bytes per row of the long result tables, measured on the smoke build's cache entries
((file sizes - `PARQUET_FILE_BYTES` each) / rows; runs and dictionaries compress well: a map row is
3-6 bytes). Other tables are estimated from their columns (`_row_bytes`); they are small, so their
files' fixed size dominates."""

# bytes per stored cell where a table has no measured row size (uncompressed widths)
_CELL = {"str": 1, "token": 6, "num": 4, "int": 2, "context": 60}


def _row_bytes(cols: Iterable[str]) -> int:
    b = 0
    for c in cols:
        if c in ("model", "dataset", "scope", "method", "category", "example", "source", "family", "norm"):
            b += _CELL["str"]
        elif c.startswith("token"):
            b += _CELL["token"]
        elif c == "context":
            b += _CELL["context"]
        elif c in ("seq", "layer", "pos", "i", "j", "rank", "dim", "freq_rank"):
            b += _CELL["int"]
        else:
            b += _CELL["num"]
    return b


PARQUET_FILE_BYTES = 8 * KIB
"""Fixed size of one small parquet file (schema, statistics, footer): the smoke build's one-row
tables are 5-11 KiB."""


def table_rows(analysis: str, s: Shape, lengths: list[int], causal: bool, top_k: int, n_scopes: int) -> dict[str, int]:
    """Rows of each table an analysis writes, as the analysis declares them (`Work.rows`; estimates
    where the count depends on the data)."""
    from report_builder.analyses import registry
    from report_builder.analyses.base import TableSize

    return registry.get(analysis).work.rows(TableSize(s.layers, s.d, tuple(lengths), causal, top_k, n_scopes))


def disk_bytes(rows: dict[str, int]) -> int:
    """Bytes of a cache entry with these table rows (columns from `schema.TABLES`)."""
    from report_builder.schema import TABLES

    return int(sum(PARQUET_FILE_BYTES + r * ROW_BYTES.get(t, _row_bytes(TABLES.get(t, ()))) for t, r in rows.items())
               + 2 * KIB)
