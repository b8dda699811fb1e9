"""Bytes of a file: one streaming sha256 (cache entries, dataset datasheets), and a bounded read of a
file read back (a cache's records), which must be a regular file.

Pitfall: this reads the whole file every time; model weights go through the memoised
`report_builder.models.fingerprints.file_sha256` instead.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def sha256_of_file(path: str | os.PathLike, *, regular: bool = False) -> str:
    """Full sha256 hex digest of the file at ``path``, read in 1 MiB blocks (``regular``: only a regular
    file that is not a link, else `OSError`: a FIFO or device is never read, `open_regular`)."""
    h = hashlib.sha256()
    with (os.fdopen(open_regular(path), "rb") if regular else open(path, "rb")) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def open_regular(path: str | os.PathLike, cap: int | None = None) -> int:
    """A read descriptor of ``path`` when it is a regular file (not a link, FIFO, device, socket or
    folder) of at most ``cap`` bytes; `OSError` naming what it is otherwise. Opening never blocks (a
    FIFO without a writer would hang a plain ``open``)."""
    fd = os.open(path, _READ_FLAGS)  # ELOOP for a link
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a folder, FIFO, device or socket)", str(path))
        if cap is not None and st.st_size > cap:
            raise OSError(errno.EFBIG, f"larger than {cap:,} bytes", str(path))
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, cap: int) -> bytes:
    """The bytes of the regular file ``path`` (`open_regular`), at most ``cap`` (also when it grows)."""
    with os.fdopen(open_regular(path, cap), "rb") as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise OSError(errno.EFBIG, f"larger than {cap:,} bytes", str(path))
    return data
