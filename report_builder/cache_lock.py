"""Who may use a results cache now: one ``clean``, or any number of builds, at a time.

`using` holds a ``flock`` on the cache's lock file (``.report_builder-cache.lock``, `guard.CACHE_LOCK`)
while a command runs: ``build``, ``analyze``, ``render`` and ``reproduce`` share it (they may run side
by side: each cache entry has its own lock, `cache.Cache`), ``clean`` takes it alone. A command that
cannot take it within `lock_wait` seconds stops with `CacheBusy` (one line, exit 3) naming the command
that holds it, as the holders recorded themselves in the file (one JSON line each). The cache is
created with its marker before the lock file, and ``clean`` removes the marker before the lock file
(`remove_if_empty`; a folder holding only the lock file counts as empty), so a cache is never left
holding files without its marker, however a command ends.

Pitfall: a waiting command may get the lock of a file ``clean`` has just removed; it checks that the
file it locked is still the one at the path (same inode) and starts over when not.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from report_builder import guard
from report_builder.errors import UnsafeOutput, option

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: `using` locks nothing
    fcntl = None  # type: ignore[assignment]


LOCK_NAME = guard.CACHE_LOCK
LOCK_WAIT_S = 10.0
"""How long a command waits for a cache another command holds before it stops (`lock_wait`)."""


class CacheBusy(UnsafeOutput):
    """Another command holds the results cache's lock (``clean`` during a ``build``, or the reverse): exit 3."""


def lock_wait() -> float:
    """Seconds to wait for a busy cache: ``REPORT_BUILDER_LOCK_WAIT`` (a number >= 0), else `LOCK_WAIT_S`."""
    try:
        wait = float(os.environ.get("REPORT_BUILDER_LOCK_WAIT", LOCK_WAIT_S))
    except ValueError:
        return LOCK_WAIT_S
    return wait if 0 <= wait < 1e7 else LOCK_WAIT_S


_held: dict[str, list] = {}  # cache folder -> [fd, exclusive, count]: this process's locks (nested commands)
_held_guard = threading.Lock()


@contextmanager
def using(cache_dir: str | os.PathLike, command: str, *, exclusive: bool = False, create: bool = True,
          wait: float | None = None) -> Iterator[None]:
    """Hold the lock of the results cache ``cache_dir`` while ``command`` runs: shared (``build``,
    ``analyze``, ``render``, ``reproduce``) or ``exclusive`` (``clean``). Nested uses in one process
    share the first one. ``create``: make the cache (with its marker, `Cache`) when missing or empty;
    otherwise a folder that is not a cache is not locked (there is nothing of the tool's to protect).

    Raises:
        CacheBusy: another command holds the lock in the other mode for ``wait`` seconds (`lock_wait`).
        UnsafeOutput: the folder is not the tool's, or the lock file is a link or cannot be opened.
    """
    base = Path(os.path.abspath(os.path.expanduser(cache_dir)))
    key = str(base)
    with _held_guard:
        mine = _held.get(key)
        if mine is not None and (mine[1] or not exclusive):
            mine[2] += 1
        else:
            mine = None
    if mine is not None:
        try:
            yield
        finally:
            with _held_guard:
                mine[2] -= 1
        return
    fd = _acquire(base, command, exclusive, create, lock_wait() if wait is None else wait) if fcntl else None
    if fd is None:
        yield
        return
    with _held_guard:
        _held[key] = entry = [fd, exclusive, 1]
    try:
        yield
    finally:
        with _held_guard:
            if _held.get(key) is entry:
                del _held[key]
        _release(fd, exclusive)


def _acquire(base: Path, command: str, exclusive: bool, create: bool, wait: float) -> int | None:
    """The open, locked lock file of ``base`` (None: not a cache and ``create`` is False)."""
    path = base / LOCK_NAME
    deadline = time.monotonic() + wait
    while True:
        if create:
            guard.mark_cache(base)  # before the lock file: a cache never holds files without its marker
        elif not guard.is_cache(base):
            return None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_CLOEXEC", 0), 0o644)
        except FileNotFoundError:  # the cache was removed meanwhile (a `clean` ended): look again
            continue
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # a read-only mount, another user's cache
                raise UnsafeOutput(f"the results cache {base} cannot be written ({e.strerror or e}: its lock file "
                                   f"{path}); choose another {guard.cache_option(base)} or fix its permissions") from None
            raise UnsafeOutput(f"the lock file {path} of the cache cannot be opened ({e.strerror or e}"
                               f"{'; it is a symbolic link, which report_builder never makes' if path.is_symlink() else ''}); "
                               f"remove it or choose another {option('cache_dir')}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted in its place
                raise UnsafeOutput(f"the lock file {path} of the cache is not a regular file, which report_builder "
                                   f"never makes; remove it or choose another {option('cache_dir')}")
            if _lock(fd, exclusive, deadline):
                st, now = os.fstat(fd), _stat(path)
                if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    _write_holder(fd, command, exclusive)
                    return fd
                os.close(fd)  # the file was replaced while this process waited (a `clean` removed it)
                continue
        except BaseException:
            os.close(fd)
            raise
        holder = _holder(fd)
        os.close(fd)
        shown = f"`{holder['command']}` (pid {holder['pid']}, started {holder['since']})" if holder else \
            "another report-builder command"
        raise CacheBusy(f"the results cache {base} is in use by {shown}; `{command}` waited {wait:g} s for it "
                        f"(REPORT_BUILDER_LOCK_WAIT sets how long): run it again when that command has finished, "
                        f"or give another {option('cache_dir')}")


def _lock(fd: int, exclusive: bool, deadline: float) -> bool:
    """Take the lock on ``fd``, polling until ``deadline``; False when it stayed held."""
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _write_holder(fd: int, command: str | None, exclusive: bool = False) -> None:
    """Record who takes (``command``) or leaves (None) the lock, one JSON line each (appended: whole lines
    even from commands starting together; an exclusive holder starts the file afresh), read by a command
    that has to wait; best effort."""
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    rec = {**me, "command": command, "since": time.strftime("%Y-%m-%d %H:%M:%S")} if command else {**me, "left": 1}
    try:
        if exclusive or os.fstat(fd).st_size > 1 << 16:
            os.ftruncate(fd, 0)
        os.write(fd, json.dumps(rec).encode() + b"\n")
    except OSError:
        pass


def _holder(fd: int) -> dict[str, Any] | None:
    """The latest recorded holder that has not left and whose process still runs (on this host; another
    host's cannot be checked), or None when none is known."""
    try:
        lines = os.pread(fd, 1 << 17, 0).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    holders: dict[tuple[int, str], dict[str, str]] = {}
    for line in lines:
        try:
            rec = json.loads(line)
            who = (int(rec["pid"]), str(rec["host"]))
            if rec.get("left"):
                holders.pop(who, None)
            else:
                holders.pop(who, None)
                holders[who] = {"command": str(rec["command"]), "since": str(rec["since"])}
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    for (pid, host), rec in reversed(list(holders.items())):
        if host != socket.gethostname():
            return {**rec, "pid": f"{pid} on {host}"}
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        return {**rec, "pid": pid}
    return None


def _release(fd: int, exclusive: bool) -> None:
    """Record that this process left (the records are cleared when no other command holds the lock any
    more), then unlock."""
    try:
        if exclusive or _try_exclusive(fd):
            os.ftruncate(fd, 0)
        else:
            _write_holder(fd, None)
    except OSError:
        pass
    finally:
        os.close(fd)  # releases the flock


def _try_exclusive(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def remove_if_empty(cache_dir: str | os.PathLike) -> bool:
    """At the end of ``clean`` (holding the cache alone, `using`): remove the lock file, and when nothing
    else but the marker is left, the marker, then the folder (a folder holding only the lock file counts
    as empty: `guard.mark_cache`). True when the folder is gone. A command waiting for the lock meanwhile
    finds its file gone and starts over (`_acquire`)."""
    base = Path(cache_dir)
    if not base.is_dir():
        return True
    names = {c.name for c in base.iterdir()}
    empty = names <= {guard.CACHE_MARKER, LOCK_NAME}
    for name in ((guard.CACHE_MARKER, LOCK_NAME) if empty else (LOCK_NAME,)):  # the marker before the lock
        p = base / name
        if p.is_file() and not p.is_symlink():
            p.unlink()
    if not empty:
        return False
    try:
        base.rmdir()
    except OSError:  # a command started meanwhile: it marked the folder again
        return False
    return True
