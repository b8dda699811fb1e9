"""Atomic publication of a directory: write everything into a temporary sibling, then rename.

Used for cache entries and converted models, so an interrupted run (Ctrl-C, a crash) never leaves a
half-written directory behind. Pitfall: the temporary dir must be on the same filesystem as the
target (a sibling), or the final rename is not atomic.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` when the block succeeds.

    On any exception (KeyboardInterrupt included) the temporary directory is removed and ``target``
    is left as it was.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
