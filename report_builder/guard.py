"""Safety of what the tool writes: marker files, locks, temp-dir naming and sweeping, writable checks.

Rules (see README "Safety"):
- A directory is replaced or removed only when it is missing, empty, or carries the tool's marker
  file (``.report_builder-site`` in every site it builds, ``.report_builder-cache`` in every cache);
  anything else is refused with one clear line (`UnsafeOutput`). The working directory, its parents
  and the home directory are always refused.
- Temporary dirs carry the creating process id and host (``….tmp-<pid>@<host>-…``); a sweep at start
  removes those whose process on this host is gone, never those of a live concurrent build (another
  host's only by age: its pid cannot be checked from here).
- Locks are `filelock` files next to what they guard (a cache entry, a converted model, a site).

Pitfall: the marker check and the swap must run under the same lock, or two builds may both pass
the check and race on the rename.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import signal
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock

from report_builder.errors import UnsafeOutput

SITE_MARKER = ".report_builder-site"
CACHE_MARKER = ".report_builder-cache"
MODEL_MARKER = ".report_builder-model.json"
# files a cache written before markers existed may hold (such a cache is adopted: marker written)
LEGACY_CACHE_NAMES = {"results", "last_build.json", "models", "fingerprints.json", "freq", "locks",
                      "site-manifest.json"}
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


def check_replaceable(target: Path, marker: str, what: str, option: str) -> None:
    """Raise `UnsafeOutput` unless ``target`` is missing, an empty dir, or a dir carrying ``marker``."""
    target = Path(target)
    why = _protected(target)
    if why is None and target.exists():
        if not target.is_dir():
            why = "it is a file, not a directory"
        elif not (target / marker).is_file() and any(target.iterdir()):
            why = f"it is not empty and has no {marker} marker (report_builder did not create it)"
    if why:
        raise UnsafeOutput(f"refusing to replace {what} {target}: {why}; choose a new or empty directory "
                           f"with {option}")


def adopt_or_mark_cache(root: Path) -> None:
    """Create the cache dir with its marker; accept an existing one only if it is recognisably ours.

    A cache written before markers existed (only names the tool writes) is adopted: the marker is added.
    """
    root = Path(root)
    why = _protected(root)
    if why is None and root.exists():
        if not root.is_dir():
            why = "it is a file, not a directory"
        elif not (root / CACHE_MARKER).is_file():
            foreign = [c.name for c in root.iterdir() if c.name not in LEGACY_CACHE_NAMES
                       and not c.name.startswith((".tmp", "last_build.tmp", ".lock", "fingerprints.tmp"))]
            if foreign:
                why = (f"it holds files report_builder did not write ({', '.join(sorted(foreign)[:3])}) "
                       f"and no {CACHE_MARKER} marker")
    if why:
        raise UnsafeOutput(f"refusing to use {root} as the cache: {why}; choose a new or empty directory with --cache")
    m = root / CACHE_MARKER
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not m.exists():
            m.write_text("results cache of report_builder; `report-builder clean` may delete this directory's results\n")
    except OSError as e:
        raise UnsafeOutput(f"the cache directory {root} is not writable ({e.strerror or e}); choose another "
                           f"directory with --cache or fix its permissions") from None


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
