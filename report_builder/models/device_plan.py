"""A build's device map, from its configuration: the `load` options it implies, the explicit map for
a model (inferred by `placement.infer_map` or checked by `placement.check_map`), and the placement a
build would give a model, planned from its config alone (no weight read).

`loading.load` calls `device_map_for` on the weightless meta copy it builds anyway; the plan and the
provenance (`api.placements`) call `planned_placement`, so both see the same map. Torch-free to
import: `placement_options` and a build without a device map never import torch (a cached build
imports none).

Pitfall: a map never enters a cache key (results are exact on any device of a node); only the
device kind does, through `Subject.base_params`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from report_builder.errors import ModelError, UsageError, shown
from report_builder.models.sources import auto_config, resolve
from report_builder.values import DEVICE_FORM

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

    from report_builder.models.placement import Placement


def device_problem(device: str) -> str | None:
    """Why this machine cannot run ``device`` (None: it can): not ``cpu``, ``cuda`` or ``cuda:N``, CUDA where
    torch has none (a CPU build of torch, no visible GPU), or an index past the GPUs."""
    if not isinstance(device, str) or DEVICE_FORM.fullmatch(device) is None:
        return "is not one of cpu, cuda, cuda:<index>"
    if device == "cpu":
        return None
    import torch

    if not torch.cuda.is_available():
        why = ("this torch is a CPU build" if torch.version.cuda is None else
               "torch sees no CUDA device (check the driver and CUDA_VISIBLE_DEVICES)")
        return f"{why} (torch {torch.__version__})"
    if int(device.partition(":")[2] or 0) >= torch.cuda.device_count():
        return f"this machine has {torch.cuda.device_count()} visible CUDA device(s), numbered from 0"
    return None


def require_device(device: str) -> None:
    """Refuse, in one line (`UsageError`, exit 2), a device this machine cannot run (`device_problem`), before a
    model is built: a config carried from a GPU machine, or ``--device cuda`` on a laptop, otherwise failed
    deep inside torch as an internal error."""
    why = device_problem(device)
    if why is None:
        return
    if why.startswith("is not"):
        raise UsageError(f"device {shown(device)} {why}")
    raise UsageError(f"device {device}: {why}; use device cpu here, or run on a machine with a GPU")


def device_map_for(meta: nn.Module, device_map, *, device: str, dtype: torch.dtype, device_memory: int | None,
                   reserve: int) -> tuple[str, dict[str, str] | None]:
    """(mode, explicit map) for ``from_pretrained``; (``none``, None) for a model on one device."""
    from report_builder.models.placement import check_map, infer_map

    if device_map is None or device_map == "none":
        return "none", None
    if isinstance(device_map, dict):
        return "explicit", check_map(meta, device_map)
    from report_builder.config import DEVICE_MAPS

    if device_map not in DEVICE_MAPS:
        raise ModelError(f"device_map {shown(device_map)} is not one of {', '.join(DEVICE_MAPS)} (or a mapping)")
    return device_map, infer_map(meta, mode=device_map, device=device, dtype=dtype, device_memory=device_memory,
                                 reserve=reserve)


def placement_options(cfg) -> dict:
    """The `load` keywords of a build configuration's device map (none when it has none)."""
    mode = getattr(cfg, "device_map", "none")
    if mode == "none":
        return {}
    from report_builder.config import parse_size

    mem = getattr(cfg, "device_memory", None)
    return {"device_map": mode, "device_memory": None if mem is None else parse_size(mem, key="device_memory"),
            "reserve": cfg.budget_bytes()}


def planned_placement(source: str, cfg, revision: str | None = None) -> Placement | None:
    """The placement a build of ``cfg`` would give ``source``, from its config alone (no weights read);
    None without a device map. Execution devices follow accelerate: a layer kept in CPU memory or on
    disk runs on the main device."""
    opts = placement_options(cfg)
    if not opts:
        return None
    import torch
    from transformers import AutoModel

    from report_builder.models import registry
    from report_builder.models.placement import STORAGE_OFFLOAD, Placement, owner_key

    path, kw = resolve(source, revision)
    config = auto_config(path, kw, source)
    adapter = registry.for_config(config)
    with torch.device("meta"):
        meta = AutoModel.from_config(config, attn_implementation="eager", trust_remote_code=False)
    # every precision mode (config ``dtype``) keeps the weights in float32
    mode, dmap = device_map_for(meta, opts["device_map"], device=cfg.device, dtype=torch.float32,
                                device_memory=opts["device_memory"], reserve=opts["reserve"])
    gpus = [v for v in dmap.values() if v not in STORAGE_OFFLOAD]
    main = gpus[0] if gpus else "cpu"
    names = {id(m): n for n, m in meta.named_modules()}
    storage = []
    for layer in adapter.layers(meta):
        key = owner_key(names[id(layer)], dmap)
        storage.append(dmap[key] if key is not None else main)
    devices = tuple(main if s in STORAGE_OFFLOAD else s for s in storage)
    return Placement(mode=mode, main_device=main, layer_devices=devices, layer_storage=tuple(storage), map=dmap)
