"""Safety of what the tool writes: marker files, locks, temp-dir naming and sweeping, writable checks.

Rules (docs/guide/safety.md):
- A directory is replaced or removed only when it is missing, empty, or carries the tool's marker
  file (``.report_builder-site`` in every site it builds, ``.report_builder-cache`` in every cache);
  anything else is refused with one clear line (`UnsafeOutput`): nothing is adopted. A symbolic link
  given as ``--out`` is refused too (a swap would replace the link), and so are the working directory,
  its parents and the home directory.
- The cache and the output never nest (`check_not_nested`): the site swap would delete a cache inside it.
- Temporary dirs carry the creating process id and host (``….tmp-<pid>@<host>-…``); a sweep at start
  removes those whose process on this host is gone, never those of a live concurrent build (another
  host's only by age: its pid cannot be checked from here).
- Locks: a cache entry's or a converted model's is a `filelock` file next to it, inside the cache;
  the site's (`site_lock`) is a ``flock`` on the folder that holds ``--out``: no file is written
  beside the output.

Pitfall: the marker check and the swap must run under the same lock, or two builds may both pass
the check and race on the rename.
"""
from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat
import re
import shutil
import signal
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the site lock falls back to a lock file
    fcntl = None  # type: ignore[assignment]

from report_builder.errors import UnsafeOutput, option

SITE_MARKER = ".report_builder-site"
CACHE_MARKER = ".report_builder-cache"
CACHE_LOCK = ".report_builder-cache.lock"
"""The lock file of a results cache (`cache.using`): a folder holding only it counts as empty."""
MODEL_MARKER = ".report_builder-model.json"
LOCK_TIMEOUT_S = 6 * 3600  # a lock is held while one entry is computed: wait, do not fail
_TMP_PID = re.compile(r"\.(?:tmp|old)-(\d+)(?:@([0-9a-f]{8}))?-[^/]*$")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so every cleanup (`finally`) runs."""


def install_sigterm() -> None:
    """Turn SIGTERM into `Terminated` in the main thread (temp dirs are then removed as on Ctrl-C)."""
    def handler(signum, frame):  # noqa: ARG001
        raise Terminated()

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. an embedding application): leave it alone
        pass


def user_cache_dir() -> Path:
    """User cache dir for converted models and fingerprints (``REPORT_BUILDER_CACHE`` overrides)."""
    root = os.environ.get("REPORT_BUILDER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "report_builder")
    return Path(root)


RESULTS_DIR = "results"
"""The default results cache's folder in the user cache (`caches.default_dir`)."""


def placed_by(cache_dir: str | os.PathLike) -> str | None:
    """The environment variable that placed ``cache_dir`` when it is the default results cache
    (``REPORT_BUILDER_CACHE``, else ``XDG_CACHE_HOME``), else None: what a message about it names, since
    the user did not set ``cache_dir`` (``--cache``) then."""
    env = ("REPORT_BUILDER_CACHE" if os.environ.get("REPORT_BUILDER_CACHE")
           else "XDG_CACHE_HOME" if "XDG_CACHE_HOME" in os.environ else None)
    if env is None or os.path.abspath(cache_dir) != os.path.abspath(user_cache_dir() / RESULTS_DIR):
        return None
    return env


def cache_option(cache_dir: str | os.PathLike) -> str:
    """How a message says to choose another results cache: ``--cache`` (``cache_dir`` through the API:
    `errors.option`), and the environment variable that placed ``cache_dir`` when it did (`placed_by`)."""
    env = placed_by(cache_dir)
    return f"{option('cache_dir')} (or {env}, which places the default one)" if env else option("cache_dir")


# ------------------------------------------------------------------ what may be replaced


def _protected(p: Path) -> str | None:
    """Why ``p`` may never be replaced (the working directory, one of its parents, home, /), or None."""
    p = p.resolve()
    cwd = Path.cwd().resolve()
    if p == cwd or p in cwd.parents:
        return "it is the working directory or one of its parents"
    if p == Path.home().resolve() or p == Path(p.anchor):
        return "it is the home or root directory"
    return None


def check_replaceable(target: Path, marker: str, what: str, option: str, verb: str = "replace") -> None:
    """Raise `UnsafeOutput` unless ``target`` is missing, an empty dir, or a dir carrying ``marker``, and is
    not a mount point (an empty mounted volume given as ``--out``: the swap cannot rename it); ``verb``: `ADVICE`."""
    target = Path(target)
    why = _protected(target)
    if why is None and target.is_symlink():
        why = (f"it is a symbolic link (to {os.readlink(target)}); a build would replace the link itself — "
               f"give the folder it points to")
    elif why is None and target.exists():
        if not target.is_dir():
            why = "it is a file, not a directory"
        elif os.path.ismount(target):  # the swap renames it: EBUSY, after all the work
            why = (f"it is a mount point, which the site swap (renaming folders) cannot replace; give a folder "
                   f"inside it, e.g. {target / 'site'}")
        elif not (target / marker).is_file() and any(target.iterdir()):
            why = f"it is not empty and has no {marker} marker (report_builder did not create it)"
    if why:
        raise UnsafeOutput(f"refusing to {verb} {what} {target}: {why}; " + ADVICE[verb].format(option=option))


ADVICE = {"replace": "choose a new or empty directory with {option}",  # what to do about a refused output
          "clean": "nothing was removed; give {option} the folder a build wrote (it carries the marker)"}


def mark_cache(root: Path) -> None:
    """Create the cache dir with its marker; accept an existing one only when it carries the marker
    or is empty. Nothing is adopted: a folder holding anything else (even names the tool writes, such
    as ``results/``) is refused with `UnsafeOutput`."""
    root = Path(root)
    why = _protected(root)
    if why is None and root.is_symlink() and not root.exists():  # mkdir would say "File exists"
        why = f"it is a symbolic link to {os.readlink(root)}, which does not exist (create that folder first)"
    if why is None and root.exists():
        if not root.is_dir():
            why = "it is a file, not a directory"
        else:  # listed first, then the marker looked for: a marker a concurrent build adds meanwhile counts
            names = sorted(c.name for c in root.iterdir())
            if CACHE_MARKER not in names and not (root / CACHE_MARKER).is_file() and set(names) - {CACHE_LOCK}:
                why = (f"it is not empty ({', '.join(names[:3])}{', …' if len(names) > 3 else ''}) and has no "
                       f"{CACHE_MARKER} marker (report_builder did not create it)")
    if why:
        raise UnsafeOutput(f"refusing to use {root} as the cache: {why}; choose a new or empty directory with "
                           f"{cache_option(root)}")
    m = root / CACHE_MARKER
    try:
        root.mkdir(parents=True, exist_ok=True)
        try:  # the first thing in a new cache, created in one step (never truncated by a second build)
            fd = os.open(m, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write("results cache of report_builder; `report-builder clean` may delete what it wrote here\n")
    except OSError as e:
        raise UnsafeOutput(f"the cache directory {root} is not writable ({e.strerror or e}); choose another "
                           f"directory with {cache_option(root)} or fix its permissions") from None


def is_cache(root: Path) -> bool:
    """Whether ``root`` is a results cache the tool created (a directory carrying its marker)."""
    return (Path(root) / CACHE_MARKER).is_file()


def check_not_nested(out_dir: Path, cache_dir: Path) -> None:
    """Raise `UnsafeOutput` when the cache and the output are one folder or one holds the other (the
    site swap would delete a cache inside the output; a build would publish one beside the site)."""
    out, cache = Path(os.path.abspath(os.path.expanduser(out_dir))), Path(os.path.abspath(os.path.expanduser(cache_dir)))
    out_r, cache_r = out.resolve(), cache.resolve()
    for a, b in ((out, cache), (out_r, cache_r)):
        if a == b:
            raise UnsafeOutput(f"{option('cache_dir', cache)} and {option('out_dir', out)} are the same folder; give "
                               "them separate folders")
        if a in b.parents:
            raise UnsafeOutput(f"{option('cache_dir', cache)} is inside {option('out_dir', out)}: the site swap would "
                               "delete it; choose a cache outside the output")
        if b in a.parents:
            raise UnsafeOutput(f"{option('out_dir', out)} is inside {option('cache_dir', cache)}; choose an output "
                               "outside the cache")


def check_input_outside(out_dir: Path, path: str | os.PathLike, what: str) -> None:
    """Raise `UnsafeOutput` when an input of the command (its configuration file, a data file or folder, a
    model folder) is ``--out`` or lies inside it: the site swap would delete it (a build read
    ``site/my-config.yaml``, then removed it with the old site)."""
    out = Path(os.path.abspath(os.path.expanduser(out_dir)))
    p = Path(os.path.abspath(os.path.expanduser(path)))
    if any(a == b or a in b.parents for a, b in ((out, p), (out.resolve(), p.resolve()))):
        raise UnsafeOutput(f"{what} {path} is inside {option('out_dir', out_dir)}: the site swap would delete it; "
                           f"move it out of the output folder, or choose another {option('out_dir')}")


def check_no_symlink(path: Path, what: str) -> None:
    """Raise `UnsafeOutput` when ``path`` is a symbolic link (the tool never makes one, so what it points
    to cannot be proved its own)."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafeOutput(f"refusing to clean {what} {path}: it is a symbolic link (to {os.readlink(path)}), "
                           f"which report_builder never makes; remove the link or clean its target by hand")


def copy_dir_attrs(src: Path, dst: Path, *, keep_writable: bool = False) -> None:
    """Give the directory ``dst`` the mode (setgid included), owner, group and extended attributes
    (POSIX ACLs: ``system.posix_acl_access``/``_default``) of ``src``; what the process may not set is
    left as it is. Done on a new temporary site before anything is written into it, so its files
    inherit the group and default ACL as they would inside ``src`` (``keep_writable``: the owner keeps
    write access until the mode is copied again just before the swap)."""
    st = os.stat(src)
    for name in _xattrs(src):
        try:
            os.setxattr(dst, name, os.getxattr(src, name, follow_symlinks=False), follow_symlinks=False)
        except OSError:
            pass
    try:
        os.chown(dst, st.st_uid if os.geteuid() == 0 else -1, st.st_gid)
    except OSError:
        pass
    try:
        os.chmod(dst, stat.S_IMODE(st.st_mode) | (stat.S_IRWXU if keep_writable else 0))  # after chown
    except OSError:
        pass


def _xattrs(p: Path) -> list[str]:
    try:
        return os.listxattr(p, follow_symlinks=False)
    except (OSError, AttributeError):
        return []


def check_writable(d: Path, what: str, option: str) -> None:
    """Create ``d`` if needed and write/remove a probe file in it; raise `UnsafeOutput` with advice."""
    d = Path(d)
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=d)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UnsafeOutput(f"{what} {d} is not writable ({e.strerror or e}); choose another directory "
                           f"with {option} or fix its permissions") from None


# ------------------------------------------------------------------ locks


def lock_for(path: Path) -> FileLock:
    """The lock guarding ``path`` (a sibling ``.<name>.lock`` file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.parent / f".{path.name}.lock"), timeout=LOCK_TIMEOUT_S)


@contextmanager
def removing_locked(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock (`lock_for`) for the block, then delete the lock file too (used when
    ``path`` itself is removed: nothing is left behind)."""
    lock = lock_for(path)
    with lock:
        yield
    try:
        os.unlink(lock.lock_file)
    except OSError:
        pass


@contextmanager
def site_lock(out_dir: Path, fallback: Path | None = None, timeout: float = LOCK_TIMEOUT_S, *,
              what: str | None = None, holder: str = "another build", setting: str = "out_dir") -> Iterator[None]:
    """Exclusive lock of the output ``out_dir`` while it is checked and swapped: a ``flock`` on the
    folder that holds it (writes nothing). Where directories cannot be locked (NFS, not POSIX) the
    lock is the file ``fallback`` (inside the cache). `UnsafeOutput` when it cannot be taken.

    ``what`` (the locked folder in words), ``holder`` (who else takes this lock) and ``setting`` (the
    `errors.OPTIONS` key that gives another one) word that line for a lock that is not an output's
    (`reproduce`'s ``reproduced/`` folder)."""
    parent = Path(os.path.abspath(out_dir)).parent
    where = what or str(out_dir)
    setting = option(setting)
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError as e:
            raise UnsafeOutput((f"the output's parent directory {parent} cannot be opened to lock {option('out_dir')}"
                                if what is None else f"{what} cannot be opened to lock it") + f" ({e.strerror or e}); fix "
                               f"its permissions or choose another {setting}") from None
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise UnsafeOutput(f"{holder} holds the lock of {where} (waited {timeout:.0f} s); "
                                           f"wait for it or choose another {setting}") from None
                    time.sleep(0.05)
                except OSError as e:
                    if e.errno in (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                        os.close(fd)
                        fd = None  # this filesystem locks no directories: the fallback file
                        break
                    raise
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
    if fd is not None:
        try:
            yield
        finally:
            os.close(fd)  # releases the flock
        return
    if fallback is None:  # pragma: no cover - no lock possible: the renames alone
        yield
        return
    try:
        Path(fallback).parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(fallback), timeout=timeout):
            yield
    except Timeout:
        raise UnsafeOutput(f"{holder} holds the lock of {where} ({fallback}); wait for it or choose "
                           f"another {setting}") from None


def check_site_lock(out_dir: Path, fallback: Path | None = None) -> None:
    """Take and release the output's lock at once (`preflight`): a blocked lock is found before any
    work. A lock held by a concurrent build is fine (the swap waits for it)."""
    try:
        with site_lock(out_dir, fallback, timeout=0):
            pass
    except UnsafeOutput as e:
        if "another build holds" not in str(e):
            raise
    except OSError as e:
        raise UnsafeOutput(f"the lock of {option('out_dir', out_dir)} cannot be taken ({e.strerror or e}); fix "
                           f"the permissions or choose another {option('out_dir')}") from None


# ------------------------------------------------------------------ temporary dirs


@functools.lru_cache(maxsize=1)
def host_tag() -> str:
    """8 hex digits of this machine's host name. Temp names carry it next to the pid, so a sweep on one
    node of a cluster sharing a cache never judges another node's process by a pid meaningless here."""
    return hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]


def tmp_tag() -> str:
    """``<pid>@<host>-<random>``: the part of a temp name that says which process owns it."""
    return f"{os.getpid()}@{host_tag()}-{os.urandom(4).hex()}"


def make_tmp_dir(target: Path) -> Path:
    """A new empty temp dir next to ``target`` (same filesystem: the final rename is atomic)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}@{host_tag()}-", dir=target.parent))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temp_dirs(parent: Path, prefixes: tuple[str, ...] | None = None, *,
                    legacy_age_s: float | None = 3600.0) -> list[Path]:
    """Temp dirs under ``parent`` whose process is gone.

    Args:
        prefixes: only names starting with one of these (a folder the tool does not own, e.g. the
            parent of ``--out``); None: any ``.…tmp-…``/``.…old-…`` name (a folder the tool owns).
        legacy_age_s: names without a pid (older versions), or with another host's tag (a cluster
            node sharing the folder), count as stale after this many seconds; None: never.
    """
    parent = Path(parent)
    if not parent.is_dir():
        return []
    out = []
    for c in parent.iterdir():
        if prefixes is not None and not c.name.startswith(prefixes):
            continue
        if not c.name.startswith(".") or not (".tmp-" in c.name or ".old-" in c.name):
            continue
        m = _TMP_PID.search(c.name)
        if m and m.group(2) in (None, host_tag()):
            if not _alive(int(m.group(1))):
                out.append(c)
        elif legacy_age_s is not None:  # no pid, or another machine's process: judged by age only
            try:
                if time.time() - c.stat().st_mtime > legacy_age_s:
                    out.append(c)
            except OSError:
                pass
    return out


def sweep(parents: list[Path], prefixes: tuple[str, ...] | None = None,
          legacy_age_s: float | None = 3600.0) -> list[Path]:
    """Remove stale temp dirs (see `stale_temp_dirs`) under each of ``parents``; return them."""
    removed = []
    for parent in parents:
        for d in stale_temp_dirs(parent, prefixes, legacy_age_s=legacy_age_s):
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
            else:
                try:
                    d.unlink()
                except OSError:
                    continue
            removed.append(d)
    return removed


def site_temp_prefixes(out_dir: Path) -> tuple[str, ...]:
    """Name prefixes of the temporary folders a build of ``out_dir`` creates next to it."""
    n = Path(out_dir).name
    return (f".{n}.tmp-", f".{n}-docs.tmp-", f".{n}.old-")


@contextmanager
def removing(*paths: Path) -> Iterator[None]:
    """Remove ``paths`` when the block ends, however it ends (error, Ctrl-C, SIGTERM)."""
    try:
        yield
    finally:
        for p in paths:
            if Path(p).exists():
                shutil.rmtree(p, ignore_errors=True)


# ------------------------------------------------------------------ publishable paths


def public_path(value: str | os.PathLike | None) -> str | None:
    """A local path as it may appear in a published site: relative to the working directory when
    inside it (``<cache>/…`` inside the user cache first), else ``<home>/…`` or ``<local>/<name>``.

    Values that are not existing-looking paths (embedded names, hub ids) are returned unchanged.
    """
    if value is None:
        return None
    s = str(value)
    looks_like_path = os.path.isabs(s) or s.startswith(("~", "./", "../")) or os.path.exists(s)
    if not looks_like_path:
        return s
    p = Path(os.path.expanduser(s))
    if not p.is_absolute():
        return s
    p = Path(os.path.abspath(p))
    for root, label in ((user_cache_dir(), "<cache>"), (Path.cwd(), None), (Path.home(), "<home>")):
        try:
            rel = p.relative_to(Path(os.path.abspath(root)))
        except ValueError:
            continue
        if label is None:
            return rel.as_posix() or "."
        return f"{label}/{rel.as_posix()}" if rel.parts else label
    return f"<local>/{p.name}"


def public_config(d: dict) -> dict:
    """A config mapping (``Config.to_dict()``) with every local path made publishable."""
    out = dict(d)
    for k in ("cache_dir", "out_dir"):
        if k in out:
            out[k] = public_path(out[k])
    out["models"] = [{**m, "source": public_path(m.get("source")), "name": m.get("name")}
                     for m in out.get("models", [])]
    out["datasets"] = [{**x, "path": public_path(x.get("path"))} for x in out.get("datasets", [])]
    return out
