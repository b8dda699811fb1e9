"""One streaming sha256 of a file's bytes, for cache entries and dataset datasheets.

Pitfall: this reads the whole file every time; model weights go through the memoised
`report_builder.models.fingerprints.file_sha256` instead. A file read back from a cache is opened
first (`atomic.opened_regular`: regular, no link) and hashed from that descriptor (`sha256_of_fd`).
"""
from __future__ import annotations

import hashlib
import os


def sha256_of_file(path: str | os.PathLike) -> str:
    """Full sha256 hex digest of the file at ``path``, read in 1 MiB blocks."""
    with open(path, "rb") as fh:
        return sha256_of_fd(fh.fileno())


def sha256_of_fd(fd: int) -> str:
    """Full sha256 hex digest of what the open descriptor ``fd`` reads from its position on (not closed)."""
    h = hashlib.sha256()
    for block in iter(lambda: os.read(fd, 1 << 20), b""):
        h.update(block)
    return h.hexdigest()
