"""One streaming sha256 of a file's bytes, for cache entries and dataset datasheets.

Pitfall: this reads the whole file every time; model weights go through the memoised
`report_builder.models.fingerprints.file_sha256` instead.
"""
from __future__ import annotations

import hashlib
import os


def sha256_of_file(path: str | os.PathLike) -> str:
    """Full sha256 hex digest of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
