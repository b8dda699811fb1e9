"""A build's provenance: what it used (versions, commit, machine, date, configuration, models, data,
parameters, device maps), recorded beside its tables and shown on every page (`citations.cite`).

`placements` also answers ``report-builder plan``: where each model's layers go with a device map,
from the configuration alone. Pitfalls: local paths (model sources, data files) never reach the
site — `guard` publishes them by name; library versions are read without importing transformers
(a build from the cache never loads it), and torch is imported only for a CUDA build's TF32 flag.
"""
from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from pathlib import Path
from typing import Any

from report_builder import __version__, guard
from report_builder.config import Config
from report_builder.decompose.chunks import rule_class as chunk_class
from report_builder.schema import precision


def git_commit() -> str:
    """The checkout's short commit (``-dirty`` with uncommitted changes), or ``unknown`` (an installed wheel)."""
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def lib_version(name: str) -> str:
    """``name.__version__`` when it is imported, else its installed distribution's version."""
    import sys
    from importlib import metadata

    mod = sys.modules.get(name)
    return str(mod.__version__) if mod is not None else metadata.version(name)


ANALYSIS_LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "pandas", "pyarrow",
                      "wordfreq", "gensim", "accelerate", "gguf")
"""Distributions a build's tables go through (recorded in every figure's recipe, `citations.recipe`)."""


def libraries() -> dict[str, str | None]:
    """The installed versions of `ANALYSIS_LIBRARIES` (read from metadata: nothing is imported)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in ANALYSIS_LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def placements(cfg: Config, *, strict: bool = True) -> dict[str, dict[str, Any]]:
    """Where a build of ``cfg`` puts each model's layers with its ``device_map`` (empty without one):
    model name -> `Placement.to_dict` (mode, main device, ``layers`` as one line, the module map).

    Computed from each model's config on weightless copies (no weight is read), as the build's loader
    does. ``strict=False``: a model whose map cannot be made here (no GPU) is left out instead of raising.
    """
    if cfg.device_map == "none":
        return {}
    from report_builder.errors import ReportBuilderError
    from report_builder.models import device_plan

    out = {}
    for mc in cfg.models:
        try:
            p = device_plan.planned_placement(mc.source, cfg, mc.revision)
        except (ReportBuilderError, OSError, ValueError):
            if strict:
                raise
            continue
        if p is not None:
            out[mc.name] = p.to_dict()
    return out


def build_provenance(cfg: Config, models: dict, datasets: dict, inputs: dict | None = None) -> dict[str, Any]:
    """What a build used: versions, machine, date, configuration, models, datasets, parameters.

    Args:
        models, datasets: the models' and datasets' provenance (`analyses.assemble.provenance`).
        inputs: analysis id -> its tasks' ``{model, dataset, params}`` (`analyses.assemble.provenance`):
            recorded as ``analyses.<id>.inputs``, from which each figure's recipe keeps the parameters
            of the analyses it reads (`citations.recipe`).
    """
    from report_builder.analyses import registry
    from report_builder.analyses.k24_scopes import ig_options

    cuda = str(cfg.device).startswith("cuda")
    if cuda:
        import torch
    return {
        "report_builder_version": __version__, "git_commit": git_commit(),
        "torch_version": lib_version("torch"), "transformers_version": lib_version("transformers"),
        "python_version": platform.python_version(), "device": cfg.device, "dtype": cfg.dtype,
        "tf32": bool(cuda and torch.backends.cuda.matmul.allow_tf32),
        "chunk_rule": chunk_class(cfg.chunk_rule, str(cfg.device).split(":")[0], cfg.dtype),
        "error_bound": precision(cfg.dtype).bound,  # the precision mode's (``dtype``) reconstruction bound
        "device_map": {m: p["layers"] for m, p in placements(cfg, strict=False).items()},
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "preset": cfg.preset,
        "config": guard.public_config(cfg.to_dict()),
        "models": {m: {**p, "source": guard.public_path(p["source"])} for m, p in models.items()},
        "datasets": datasets, "libraries": libraries(),
        "analyses": {a.id: {"version": a.version, "tables": list(a.tables),
                            **({"inputs": inputs[a.id]} if inputs and a.id in inputs else {})}
                     for a in registry.ANALYSES},
        "params": {"ig": ig_options(cfg).describe(), "mask_rate": cfg.k21.mask_rate, "seed": cfg.k21.seed,
                   "top_k": cfg.k24.top_k, "include_special": cfg.k24.include_special,
                   "ffamp_normalise": cfg.k24.ffamp_normalise, "max_memory": cfg.max_memory},
    }
