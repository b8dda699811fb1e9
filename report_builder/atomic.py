"""Atomic publication of a directory or a file: write everything into a temporary sibling, then rename.

Used for cache entries and converted models, so an interrupted run (Ctrl-C, SIGTERM, a crash) never
leaves a half-written directory behind. First writer wins: when ``target`` already exists at
publication (another process published it meanwhile) the new copy is discarded and the existing
one kept; callers that want to replace a damaged target remove it first, under its lock.
`write_text` replaces one file (a JSON record or memo) the same way. Both name their temporary sibling
``.<name>.tmp-<pid>@<host>-<random>`` (`guard.tmp_tag`): removed however the block ends, and a process
killed before that leaves a name the next start's sweep (`guard.sweep`) proves dead and removes.
`inside`, `remove_inside`, `replace_inside` and `read_inside` confine a write, a removal or a read to
a root (``--out``, ``--cache``) with no symbolic link followed on the way: what the citation stage and
``clean`` use on an earlier site or a cache, neither of which is trusted (docs/guide/safety.md).
Pitfall: the temporary dir must be on the same filesystem as the target (a sibling), or the final
rename is not atomic.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from report_builder import guard
from report_builder.errors import UnsafeOutput
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


def replace_dir(new: Path, target: Path) -> None:
    """Put ``new`` in place of ``target`` by renames; the old target is deleted only afterwards. An
    existing target's mode (setgid included), owner, group and extended attributes (ACLs) pass to
    ``new`` first (`guard.copy_dir_attrs`): the output keeps them though its inode changes.

    Between the two renames the old target is ``.<name>.old-<pid>@<host>-…``, whole: a process killed
    there (SIGKILL, power loss) leaves ``target`` missing, and `restore_swapped` puts it back. It is
    deleted under another name (``.<name>.tmp-…``), so a deletion cut short is swept, never restored. A
    link or file at ``target`` is moved aside and removed itself (never what a link leads to). When the
    new folder cannot be renamed in because another process put one there meanwhile (no lock: a filesystem
    that locks no folders), the old one is removed, not left beside it, and the error raised."""
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.parent / f".{target.name}.old-{tmp_tag()}"
    had_old = os.path.lexists(target)
    if had_old and target.is_dir() and not target.is_symlink():
        guard.copy_dir_attrs(target, new)
    if had_old:
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if had_old:
            try:
                os.rename(old, target)
            except OSError:
                if not os.path.lexists(target):
                    raise
                _trash(target, old)  # another process's folder is there now: it stays, the old one goes
        raise
    if had_old:
        _trash(target, old)


def _trash_name(name: str) -> str:
    """``.<name>.tmp-<pid>@<host>-<random>``: the temporary name a removal renames to first (a sweep removes
    it once its process is dead: `guard.stale_temp_dirs`)."""
    return f".{name}.tmp-{tmp_tag()}"


def _trash(target: Path, old: Path) -> None:
    """Delete ``old`` (the folder, file or link that was ``target``) under the target's own temporary name
    (swept with the output's: `guard.site_temp_prefixes`), never following a link."""
    trash = target.parent / _trash_name(target.name)
    os.rename(old, trash)
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink()


def remove_dir(path: Path) -> None:
    """Remove the folder ``path``: renamed first to ``.<name>.tmp-<pid>@<host>-…`` beside it, then deleted,
    so a removal cut short (SIGKILL, a second Ctrl-C) leaves a name the next start's sweep proves dead and
    removes, never a half-removed folder under its own name (which `clean` could no longer prove the tool's)."""
    _trash(Path(path), Path(path))


def restore_swapped(target: Path, lock_file: Path | None = None, *, lock_of: Path | None = None,
                    **words: str) -> Path | None:
    """Put ``target`` back when a process killed between the two renames of `replace_dir` left it missing:
    the newest ``.<name>.old-<pid>@<host>-…`` folder of a dead process of this host beside it is renamed to
    ``target`` (the swap never happened), under the lock the swap takes (`guard.site_lock` of ``lock_of``,
    default ``target``; ``lock_file`` its fallback: the site's generated pages are swapped under the site's
    lock). Returns the folder put back, or None. A live process's folder is never touched, nor anything
    when ``target`` exists (a stale ``.old-`` beside it is a swap that ended: `guard.sweep` removes it).
    ``words``: how the lock's line names it (`guard.site_lock`'s ``what``, ``holder``, ``setting``)."""
    target = Path(target)

    def stale() -> list[Path]:
        return [p for p in guard.stale_temp_dirs(target.parent, (f".{target.name}.old-",), legacy_age_s=None)
                if guard._TMP_PID.search(p.name).group(2) is not None and p.is_dir() and not p.is_symlink()]

    if os.path.lexists(target) or not stale():  # the common case: no lock taken (the folder may not exist yet)
        return None
    with guard.site_lock(lock_of or target, lock_file, **words):
        olds = stale()
        if os.path.lexists(target) or not olds:
            return None
        newest = max(olds, key=lambda p: p.lstat().st_ctime)  # a rename sets it: the last swap cut short
        os.rename(newest, target)
        return newest


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


# ------------------------------------------------------------------ inside a root, no link followed
#
# Every file the citation stage and `clean` write, remove or read back under ``--out``/``--cache`` goes
# through these: the path is checked to lie inside its root (lexically: no ``..`` out of it), and each
# folder from the root down is opened with ``O_NOFOLLOW`` relative to the previous one (``openat``), so a
# symbolic link anywhere on the way -- the root itself included -- is refused, not followed, and a folder
# swapped for a link between a check and its use cannot redirect the operation. A file is written to a
# temporary sibling and renamed over its name (a hard link at that name is replaced, never written
# through); read only when it is a regular file (not a link, device, FIFO or socket) and at most ``cap``
# bytes long.

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegular(OSError):
    """A file read back is not a regular file of at most the allowed size (a link, a device, a FIFO, a
    folder, or too large); the message says which."""


def inside(root: str | os.PathLike, path: str | os.PathLike) -> tuple[str, ...]:
    """The components of ``path`` below ``root`` (both made absolute, ``..`` resolved lexically, links not
    followed); `UnsafeOutput` when ``path`` is not strictly inside ``root``."""
    r, p = os.path.abspath(root), os.path.abspath(path)
    rel = os.path.relpath(p, r)
    parts = Path(rel).parts
    if rel in ("", ".") or parts[0] == ".." or os.path.isabs(rel):
        raise UnsafeOutput(f"refusing to touch {p}: it is not inside {r}")
    return parts


@contextmanager
def opened_dir(root: str | os.PathLike, parts: tuple[str, ...] = (), *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder ``root/parts…``, each folder opened with ``O_NOFOLLOW`` relative to the
    one before (``create``: missing folders are made); closed when the block ends.

    Raises:
        UnsafeOutput: ``root`` or a folder on the way is a symbolic link or not a folder.
        FileNotFoundError: a folder on the way is missing (and ``create`` is false).
    """
    where = Path(root)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise UnsafeOutput(f"refusing to use {where}: it is a symbolic link or not a folder ({e.strerror or e})") from None
    try:
        for name in parts:
            where = where / name
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as e:
                raise UnsafeOutput(f"refusing to follow {where}: it is a symbolic link or not a folder "
                                   f"({e.strerror or e})") from None
            os.close(fd)
            fd = nfd
        yield fd
    finally:
        os.close(fd)


def remove_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Remove ``path`` (a folder with everything in it, a file, or a link itself -- never its target) when it
    lies inside ``root`` with no link on the way (`inside`, `opened_dir`); False when it was missing."""
    parts = inside(root, path)
    try:
        with opened_dir(root, parts[:-1]) as fd:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(parts[-1], dir_fd=fd)  # descriptor-based: links inside are removed, not followed
            else:
                os.unlink(parts[-1], dir_fd=fd)
    except FileNotFoundError:
        return False
    return True


def remove_aside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """`remove_inside` rename-first: ``path`` (inside ``root``, no link on the way; a link is removed itself) is
    renamed out of ``root`` to ``.<root name>.tmp-<pid>@<host>-…`` beside it -- a name of the root's own
    temporary folders, which the sweep of a build or ``clean`` of that output removes (`guard.site_temp_prefixes`,
    `guard.sweep`) -- then deleted. A removal cut short (SIGKILL, power loss) leaves no half folder under its own
    name in ``root`` (nor an entry the site marker does not list), only a dead process's temporary folder. Where
    it cannot be renamed there (``root`` a mount point, its parent not writable) it is removed in place
    (`remove_inside`). False when it was missing."""
    parts = inside(root, path)
    parent = os.path.dirname(os.path.abspath(root))
    trash = _trash_name(os.path.basename(os.path.abspath(root)))
    with opened_dir(root, parts[:-1]) as fd:
        pfd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            try:
                os.rename(parts[-1], trash, src_dir_fd=fd, dst_dir_fd=pfd)
            except FileNotFoundError:
                return False
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EACCES, errno.EPERM, errno.EBUSY):
                    raise
                trash = None
            if trash is not None:
                if stat.S_ISDIR(os.stat(trash, dir_fd=pfd, follow_symlinks=False).st_mode):
                    shutil.rmtree(trash, dir_fd=pfd, ignore_errors=True)  # descriptor-based: no link followed
                else:
                    os.unlink(trash, dir_fd=pfd)
                return True
        finally:
            os.close(pfd)
    return remove_inside(root, path)


def entries(root: str | os.PathLike, path: str | os.PathLike | None = None) -> list[tuple[str, bool]]:
    """(name, is a real folder) of every entry of the folder ``path`` inside ``root`` (``root`` itself when
    None), sorted, no link followed (a link is never a folder here); [] when it is missing."""
    parts = inside(root, path) if path is not None and os.path.abspath(path) != os.path.abspath(root) else ()
    try:
        with opened_dir(root, parts) as fd:
            return sorted((e.name, e.is_dir(follow_symlinks=False)) for e in os.scandir(fd))
    except FileNotFoundError:
        return []


def move_inside(root: str | os.PathLike, src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Rename ``src`` to ``dst``, both inside ``root`` with no link on the way (a folder renamed onto an
    existing empty one replaces it; onto a non-empty one fails, as `os.rename`)."""
    s, d = inside(root, src), inside(root, dst)
    with opened_dir(root, s[:-1]) as sfd, opened_dir(root, d[:-1], create=True) as dfd:
        os.rename(s[-1], d[-1], src_dir_fd=sfd, dst_dir_fd=dfd)


def replace_inside(root: str | os.PathLike, path: str | os.PathLike, data: bytes | str | None = None, *,
                   link_fd: int | None = None) -> None:
    """Put ``data`` (bytes, or text as UTF-8) -- or, with ``link_fd``, the open file it designates, by hard
    link where the system allows (else a copy of its bytes) -- at ``path`` inside ``root``: written to a
    temporary sibling (created exclusively, no link followed), then renamed over the name, so an existing
    file or hard link there is replaced, never written through. Missing folders are made."""
    parts = inside(root, path)
    with opened_dir(root, parts[:-1], create=True) as fd:
        tmp = f".{parts[-1]}.tmp-{tmp_tag()}"
        try:
            if link_fd is not None and _link_fd(link_fd, fd, tmp):
                pass
            else:
                out = os.open(tmp, _NEW_FLAGS, 0o666, dir_fd=fd)
                with os.fdopen(out, "wb") as f:
                    if link_fd is not None:
                        os.lseek(link_fd, 0, os.SEEK_SET)
                        while chunk := os.read(link_fd, 1 << 20):
                            f.write(chunk)
                    else:
                        f.write(data.encode("utf-8") if isinstance(data, str) else (data or b""))
            os.replace(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
        finally:  # also after a rename between two links to one inode, which leaves both names
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass


def _link_fd(src_fd: int, dir_fd: int, name: str) -> bool:
    """Hard-link the file open at ``src_fd`` (the very inode that was read) as ``name`` in ``dir_fd``
    (Linux: through ``/proc/self/fd``); False where that is not possible (the caller copies)."""
    proc = f"/proc/self/fd/{src_fd}"
    if not os.path.exists(proc):
        return False
    try:
        os.link(proc, name, dst_dir_fd=dir_fd, follow_symlinks=True)
    except (OSError, NotImplementedError):
        return False
    return True


@contextmanager
def opened_regular(root: str | os.PathLike, path: str | os.PathLike, cap: int) -> Iterator[int]:
    """A read descriptor of the regular file ``path`` inside ``root`` (no link on the way or at the
    end, `inside`); `NotRegular` when it is a link, device, FIFO, socket or folder, or over ``cap`` bytes;
    FileNotFoundError when missing."""
    parts = inside(root, path)
    with opened_dir(root, parts[:-1]) as dfd:
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            raise
        except OSError as e:  # ELOOP: a link (O_NOFOLLOW); ENXIO: a socket
            raise NotRegular(f"a symbolic link, or not openable as a file ({e.strerror or e})") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular("not a regular file (a folder, device, FIFO or socket)")
            if st.st_size > cap:
                raise NotRegular(f"larger than {cap:,} bytes ({st.st_size:,})")
            yield fd
        finally:
            os.close(fd)


def read_json_inside(root: str | os.PathLike, path: str | os.PathLike, cap: int):
    """The JSON value of the regular file ``path`` inside ``root`` (`read_inside`), or None when it cannot be
    read back: missing, a link, FIFO or device, larger than ``cap``, not JSON, nested too deeply."""
    import json

    try:
        return json.loads(read_inside(root, path, cap))
    except (OSError, ValueError, RecursionError, UnsafeOutput):
        return None


def read_inside(root: str | os.PathLike, path: str | os.PathLike, cap: int) -> bytes:
    """The bytes of the regular file ``path`` inside ``root``, at most ``cap`` (`opened_regular`; a file
    that grows past ``cap`` while it is read is refused too)."""
    with opened_regular(root, path, cap) as fd:
        chunks, n = [], 0
        while chunk := os.read(fd, min(1 << 20, cap + 1 - n)):
            chunks.append(chunk)
            n += len(chunk)
            if n > cap:
                raise NotRegular(f"larger than {cap:,} bytes")
        return b"".join(chunks)
