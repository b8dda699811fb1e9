"""Where a build of one output keeps what the next build of it reuses, and the secret that proves it.

A build of ``--out`` keeps its figure renders (`figure_cache`, `figure_files.RenderCache`), its build
record (``build.json``: may mkdocs be skipped?) and a copy of its manifest (``manifest.json``: the
"Changes" page's previous build) in one folder of its own, never beside the output:

- with a results cache (a folder carrying the cache marker, as every ``build`` and ``render`` has):
  ``<cache>/site/<out name>-<12 hex of the output's absolute path>/``. Two outputs never share a
  folder, so neither prunes the other's renders; each keeps only what its latest build used.
- without one (`build.render_site` called with tables only): ``<out>/.report_builder/``, a hidden
  folder written into the new site before it is swapped in (the swap carries it over; `serve` never
  serves it, and it is excluded from the site's digest).

Trust (docs/guide/safety.md): every render entry carries an HMAC-SHA-256 under the user's render key,
32 random bytes in the user's configuration folder (`key_file`: ``$XDG_CONFIG_HOME/report_builder/render-key``,
``~/.config/...`` by default), never in the results cache: a cache copied from someone else, or
restored from CI, carries entries signed with another key, and those are never used (their figures
are built and drawn again). A key that is not a private regular file of this user (group or others
may read it, a link, another owner, the wrong size) is replaced by a new one, which invalidates every
entry. Older versions kept the key in ``<cache>/site/key``: it is no longer read (`clean` removes it),
so their entries are simply built again. Whatever an entry's signature says, its drawing is checked
again before it is published (`svgsafe`).

Pitfall: the in-output folder of the fallback is read from the old site and written into the new
one (hard links), so an interrupted build leaves the old site's folder as it was.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from report_builder import guard, site_marker
from report_builder.errors import UnsafeOutput

SITE_DIR = "site"
"""The folder of a results cache holding each output's state."""
IN_OUT = site_marker.STATE_DIR
"""The hidden folder inside ``--out`` holding the state when no results cache is given."""
KEY_BYTES = 32
_OUTPUT_ID = re.compile(r"[A-Za-z0-9._-]{0,40}-[0-9a-f]{12}")


def output_id(out_dir: Path) -> str:
    """``<out name>-<12 hex>``: the name (safe characters, at most 40) and the SHA-256 of the output's
    absolute path (links resolved), so two outputs of the same name in different folders never share state."""
    p = Path(os.path.expanduser(out_dir)).resolve()
    name = re.sub(r"[^A-Za-z0-9._-]", "_", p.name)[:40].lstrip(".")
    return f"{name}-{hashlib.sha256(str(p).encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"


@dataclass(frozen=True)
class SiteState:
    """The state folder of one output (see the module docstring).

    Attributes:
        root: the folder: ``figure-renders/``, ``build.json``, ``manifest.json``.
        key_file: the secret of the entries' HMACs.
        lock_file: the site lock's fallback file, where directories cannot be locked (`guard.site_lock`).
        in_out: the fallback: ``root`` lies inside the output and is carried by its swap.
    """

    root: Path
    key_file: Path
    lock_file: Path
    in_out: bool

    @property
    def record(self) -> Path:
        return self.root / "build.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def ensure(self) -> Path:
        """``root`` in the results cache, made when missing, with no symbolic link on the way from the
        cache (`atomic.opened_dir`: a ``site/`` or state folder planted as a link is refused, never
        written through: `guard.UnsafeOutput`)."""
        from report_builder import atomic

        cache = self.root.parent.parent
        try:
            with atomic.opened_dir(cache, (self.root.parent.name, self.root.name), create=True):
                return self.root
        except (guard.UnsafeOutput, FileExistsError, NotADirectoryError) as e:
            raise guard.UnsafeOutput(f"the output's state folder in the cache {self.root} cannot be used: {e}; remove "
                                     f"what is in its way (the renders are made again)") from None

    def working(self, new_site: Path) -> Path:
        """The folder this build reads and writes its renders in: ``root`` itself with a results cache;
        in the fallback, ``<new_site>/.report_builder`` holding hard links (copies where links fail) of
        the old site's renders, so the swap carries what this build used and the old site stays whole:
        only regular files of folders named like entries (`FIGURE_ENTRY`, `RENDER_ENTRY`), no link
        followed (what was planted in the old site's hidden folder is not carried)."""
        check(self)
        if not self.in_out:
            return self.ensure()
        work = Path(new_site) / IN_OUT
        work.mkdir(parents=True, exist_ok=True)
        old = self.root / "figure-renders"
        if not old.is_dir() or old.is_symlink() or self.root.is_symlink():
            return work
        for top, dirs, files in os.walk(old):  # never into a linked folder
            rel = Path(top).relative_to(old)
            if rel.parts and not (FIGURE_ENTRY.fullmatch(rel.parts[0]) or RENDER_ENTRY.fullmatch(rel.parts[0])):
                dirs[:] = []
                continue
            for name in files if rel.parts else ():
                src = Path(top) / name
                try:
                    if not stat.S_ISREG(os.lstat(src).st_mode):
                        continue
                except OSError:
                    continue
                dst = work / "figure-renders" / rel / name
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(src, dst, follow_symlinks=False)
                except OSError:
                    shutil.copyfile(src, dst, follow_symlinks=False)
        return work

    def key(self) -> bytes | None:
        """The HMAC secret (`secret`)."""
        return secret(self.key_file)


FIGURE_ENTRY = re.compile(r"fig-(?P<id>[a-z0-9][a-z0-9-]*)-(?P<key>[0-9a-f]{24})")
"""Names of `figure_cache.FigureCache` entries (a figure by the key of its inputs)."""
RENDER_ENTRY = re.compile(r"[0-9a-f]{12}-vl[\w.]+")
"""Names of `figure_files.RenderCache` entries (drawings by content hash)."""


def check(state: SiteState) -> None:
    """Refuse (`UnsafeOutput`, one line) a state folder that report_builder did not make as it is: a
    symbolic link, or something else than a folder, as ``<cache>/site``, the output's folder or its
    ``figure-renders``; a build record or manifest that is a link or not a regular file (a FIFO would
    hang the build that reads it). Nothing the state holds is then read or written through a link."""
    folders = [state.root, state.root / "figure-renders"] + ([] if state.in_out else [state.root.parent])
    for p in folders:
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            raise UnsafeOutput(f"refusing to use {p} for the output's state folder: it is "
                               f"{'a symbolic link' if p.is_symlink() else 'not a folder'}, which report_builder "
                               "never makes; remove it (the renders are made again)")
    for p in (state.record, state.manifest):
        if p.is_symlink() or (p.exists() and not p.is_file()):
            raise UnsafeOutput(f"refusing to read {p}: it is {'a symbolic link' if p.is_symlink() else 'not a regular file'}"
                               ", which report_builder never makes; remove it (it is written again)")


def site_state(out_dir: Path, cache_dir: Path | None = None) -> SiteState:
    """The state folder of a build of ``out_dir``: in the results cache ``cache_dir`` when it is one
    (carries the marker), else inside the output; the key is the user's (`key_file`) either way. `check`
    it before it is used (`SiteState.working` does)."""
    out = Path(os.path.expanduser(out_dir)).resolve()
    if cache_dir is not None and guard.is_cache(Path(cache_dir)):
        base = Path(os.path.abspath(cache_dir)) / SITE_DIR
        root = base / output_id(out)
        return SiteState(root, key_file(), root / "lock", in_out=False)
    user = guard.user_cache_dir()
    return SiteState(out / IN_OUT, key_file(), user / "site-locks" / f"{output_id(out)}.lock", in_out=True)


KEY_NAME = "render-key"
LEGACY_KEY = "key"
"""The name of the key older versions kept in ``<cache>/site/`` (no longer read; `clean` removes it)."""


def config_dir() -> Path:
    """The user's configuration folder of report_builder: ``REPORT_BUILDER_CONFIG`` when set, else
    ``$XDG_CONFIG_HOME/report_builder`` when ``XDG_CONFIG_HOME`` is set, else ``~/.config/report_builder``
    (``~/Library/Application Support/report_builder`` on macOS, ``%APPDATA%\\report_builder`` on Windows)."""
    own = os.environ.get("REPORT_BUILDER_CONFIG")
    if own:
        return Path(os.path.abspath(os.path.expanduser(own)))
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "report_builder"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "report_builder"
    if os.name == "nt" and os.environ.get("APPDATA"):
        return Path(os.environ["APPDATA"]) / "report_builder"
    return Path.home() / ".config" / "report_builder"


def key_file() -> Path:
    """The user's render key: ``<config_dir>/render-key``, outside every results cache and site."""
    return config_dir() / KEY_NAME


def secret(path: Path) -> bytes | None:
    """The 32-byte secret in ``path``, created (mode 0600, its folder 0700) when missing, and replaced
    when it is not a private regular file of this user of the right size (written to a temporary file
    first, then linked or renamed into place: never seen half-written); None when it can be neither
    read nor written (renders are then neither reused nor stored)."""
    path = Path(path)
    try:
        st = os.lstat(path)
        mine = not hasattr(os, "geteuid") or st.st_uid == os.geteuid()
        if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o077 and st.st_size == KEY_BYTES and mine:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                data = f.read(KEY_BYTES + 1)
            if len(data) == KEY_BYTES:
                return data
        replace = True
    except FileNotFoundError:
        replace = False
    except OSError:
        return None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        guard.sweep([path.parent], (f".{path.name}.tmp-",), legacy_age_s=None)  # a killed writer's
        tmp = path.with_name(f".{path.name}.tmp-{guard.tmp_tag()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES))
        try:
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)  # first writer wins: a concurrent build's key is kept
                except FileExistsError:
                    pass
        finally:
            if tmp.exists():
                tmp.unlink()
    except OSError:
        return None
    return _read(path)


def _read(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(KEY_BYTES + 1)
    except OSError:
        return None
    return data if len(data) == KEY_BYTES else None


def mac(key: bytes, *parts: str) -> str:
    """HMAC-SHA-256 (hex) of ``parts`` joined by NUL."""
    return hmac.new(key, "\0".join(parts).encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def verify(key: bytes | None, digest: object, *parts: str) -> bool:
    """Whether ``digest`` is the HMAC of ``parts`` under ``key`` (never with no key)."""
    return key is not None and isinstance(digest, str) and hmac.compare_digest(digest, mac(key, *parts))


def clean(cache_dir: Path) -> tuple[list[Path], list[Path]]:
    """Remove the state of every output from the results cache ``cache_dir`` (only folders named like
    an output's state, and the key older versions kept there with its temporary files); returns
    (removed, left: not the tool's). The user's key (`key_file`) stays."""
    base = Path(cache_dir) / SITE_DIR
    guard.check_no_symlink(base, "the site state folder")
    removed, left = [], []
    if not base.is_dir():
        return removed, left
    for c in sorted(base.iterdir()):
        if c.is_dir() and not c.is_symlink() and _OUTPUT_ID.fullmatch(c.name):
            shutil.rmtree(c)
            removed.append(c)
        elif c.name == LEGACY_KEY and c.is_file() and not c.is_symlink():
            c.unlink()
        elif c.name.startswith(".key.tmp-") and not c.is_symlink():
            c.unlink()
        else:
            left.append(c)
    try:
        base.rmdir()
    except OSError:
        pass
    return removed, left
