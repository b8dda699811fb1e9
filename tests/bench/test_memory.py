"""The benchmark's memory helpers: sizes read like every other size, a chunk budget under a limit."""
from __future__ import annotations

import pytest

from report_builder.bench.memory import GIB, MIB, chunk_budget, parse_bytes


def test_memory_helpers():
    assert parse_bytes("2GiB") == 2 * GIB
    assert parse_bytes("512MiB") == 512 * MIB
    assert parse_bytes(123) == 123 and parse_bytes(None) is None
    with pytest.raises(ValueError):
        parse_bytes("lots")
    # BERT-base n = 512 with ~1 GiB in use leaves a real chunk budget under a 2 GiB limit
    b = chunk_budget(2 * GIB, 512, 768, 3072, 12, False, 4, in_use=GIB)
    assert 64 * MIB < b < GIB
