"""Atomic publication of a directory or a file: write everything into a temporary sibling, then rename.

Used for cache entries and converted models, so an interrupted run (Ctrl-C, SIGTERM, a crash) never
leaves a half-written directory behind. First writer wins: when ``target`` already exists at
publication (another process published it meanwhile) the new copy is discarded and the existing
one kept; callers that want to replace a damaged target remove it first, under its lock.
`write_text` replaces one file (a JSON record or memo) the same way. Both name their temporary sibling
``.<name>.tmp-<pid>@<host>-<random>`` (`guard.tmp_tag`): removed however the block ends, and a process
killed before that leaves a name the next start's sweep (`guard.sweep`) proves dead and removes.
Pitfall: the temporary dir must be on the same filesystem as the target (a sibling), or the final
rename is not atomic.
"""
from __future__ import annotations

import errno
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from report_builder.guard import make_tmp_dir, tmp_tag


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``target`` when the block succeeds.

    On any exception (KeyboardInterrupt included) the temporary directory is removed and ``target``
    is left as it was. If ``target`` exists when the block ends, it is kept (first writer wins).
    """
    target = Path(target)
    tmp = make_tmp_dir(target)
    try:
        yield tmp
        try:
            os.rename(tmp, target)  # fails if target exists and is not empty: never replaces content
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def replace_file(path: Path, fill: Callable[[Path], object]) -> None:
    """Replace ``path`` atomically with what ``fill(tmp)`` writes at ``tmp``: a reader sees the old file
    or the new one.

    ``tmp`` is ``.<name>.tmp-<pid>@<host>-<random>`` beside ``path`` (its folder created when missing),
    renamed over ``path`` when ``fill`` returns; on any exception (KeyboardInterrupt included) the
    temporary file is removed and the exception raised. Used by `write_text`, `copy_file` and the
    permalinks' hard links.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{tmp_tag()}")
    try:
        fill(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()


def copy_file(src: str | os.PathLike, dst: Path) -> None:
    """Replace ``dst`` atomically with a copy of ``src`` (`replace_file`)."""
    replace_file(dst, lambda tmp: shutil.copyfile(src, tmp))


def write_text(path: Path, text: str, *, encoding: str = "utf-8") -> None:
    """Replace ``path``'s content with ``text`` atomically (`replace_file`): the one way a JSON record is
    rewritten (never ``.tmp<pid>`` suffixes, which no sweep recognises)."""
    replace_file(path, lambda tmp: tmp.write_text(text, encoding=encoding))
