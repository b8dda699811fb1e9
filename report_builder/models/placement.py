"""Models larger than one device: a `device_map` (accelerate) across the GPUs of a node, and where each
layer then lives and runs.

`infer_map` turns a mode (``auto``, ``balanced``, ``balanced_low_0``, ``sequential``; `config.DEVICE_MAPS`)
and a weights budget per device into an explicit module -> device map with accelerate's
``infer_auto_device_map`` on a weightless (meta) copy of the model, so a plan can show it without
reading a weight. `load` (models/loading.py) passes that map to ``from_pretrained``, which dispatches
the model: every layer gets accelerate hooks that move its inputs to its *execution device*; layers
that do not fit on a GPU stay in CPU memory (or on disk, read straight from the safetensors files) and
are streamed to the main device when they run ("offloaded").

`Placement` is what the engine reads afterwards: each layer's execution device and storage. The
engine decomposes layer ``l`` on that layer's execution device (its captured tensors moved there, its
weights materialised there by `onloaded`), right after the layer ran inside the forward pass, and
moves the result to the CPU, so activations of all layers never sit on one device at once.

Pitfalls: accelerate's forward hooks put offloaded weights back on the meta device as soon as a
module's forward returns, so the decomposition reloads them (`onloaded`: one more read per layer and
batch). Offloaded modules are swapped in and out by the forward pass itself, so such a model must not
run two forward passes at once (the engine uses one worker thread). A map never changes a result:
each layer's arithmetic is the same on whichever GPU of a node it runs.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch import nn

from report_builder.errors import MissingDependency, ModelError, option, shown

STORAGE_OFFLOAD = ("cpu", "disk")
"""Map values that keep weights off the execution device (streamed to it when the layer runs)."""


def device_name(d) -> str:
    """A map value or device as text: ``0`` -> ``cuda:0``, ``"cpu"``, ``"disk"``."""
    if isinstance(d, bool):
        raise ModelError(f"device_map value {shown(d)} is not a device (use a GPU index, cuda:N, cpu or disk)")
    if isinstance(d, int):
        return f"cuda:{d}"
    if isinstance(d, torch.device):
        return str(d) if d.type != "cuda" or d.index is not None else "cuda:0"
    return str(d)


@dataclass(frozen=True)
class Placement:
    """Where a dispatched model's layers live and run.

    Attributes:
        mode: how the map was made (a `config.DEVICE_MAPS` mode, or ``explicit`` for a given mapping).
        main_device: where the inputs go and offloaded layers run (accelerate's main device).
        layer_devices: per layer, the device its forward pass and its decomposition run on.
        layer_storage: per layer, where its weights are kept (``cuda:N``, ``cpu`` or ``disk``).
        map: the module -> device map as given to ``from_pretrained`` (values as text).
    """

    mode: str
    main_device: str
    layer_devices: tuple[str, ...]
    layer_storage: tuple[str, ...]
    map: dict[str, str] = field(default_factory=dict)

    @property
    def offloaded(self) -> tuple[bool, ...]:
        """Per layer: its weights are streamed to its execution device when it runs."""
        return tuple(s != d for s, d in zip(self.layer_storage, self.layer_devices))

    @property
    def devices(self) -> tuple[str, ...]:
        """The execution devices, in layer order, each once."""
        return tuple(dict.fromkeys(self.layer_devices))

    def describe(self) -> str:
        """One line, layers counted from 1: ``layers 1-12 cuda:0, 13-24 cuda:1, 25-30 cpu -> cuda:0``."""
        return describe_layers(self.layer_storage, self.layer_devices)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "main_device": self.main_device, "layers": self.describe(), "map": dict(self.map)}


def describe_layers(storage, devices) -> str:
    """Runs of consecutive layers with the same storage and execution device, counted from 1."""
    parts, start = [], 0
    keys = list(zip(storage, devices))
    for k in range(1, len(keys) + 1):
        if k == len(keys) or keys[k] != keys[start]:
            s, d = keys[start]
            span = f"{start + 1}" if k - start == 1 else f"{start + 1}-{k}"
            parts.append(f"{span} {d}" if s == d else f"{span} {s} -> {d}")
            start = k
    return ("layer " if len(keys) == 1 else "layers ") + ", ".join(parts) if parts else "no layers"


# ------------------------------------------------------------------ maps


def _module_names(model: nn.Module) -> dict[int, str]:
    return {id(m): n for n, m in model.named_modules()}


def owner_key(name: str, dmap: dict) -> str | None:
    """The map key that places module or parameter ``name`` (the longest prefix), or None."""
    best = None
    for k in dmap:
        if k == "" or name == k or name.startswith(k + "."):
            if best is None or len(k) > len(best):
                best = k
    return best


def check_map(model: nn.Module, dmap: dict) -> dict[str, str]:
    """An explicit map, checked against the (meta) model: every parameter placed, every value a device.

    Returns the map with text values. Raises `ModelError` naming the first unplaced parameter or the
    bad value (transformers would leave unplaced parameters on the meta device without a word).
    """
    out = {}
    for k, v in dmap.items():
        name = device_name(v)
        ok = name in STORAGE_OFFLOAD or name.startswith("cuda")
        if ok and name.startswith("cuda"):
            try:
                ok = torch.device(name).type == "cuda"
            except RuntimeError:
                ok = False
        if not ok:
            raise ModelError(f"device_map: {shown(k)} -> {shown(v)} is not a device; use a GPU index (0, 1, ...), "
                             f"cuda:N, cpu or disk")
        out[str(k)] = name
    missing = [n for n, _ in model.named_parameters() if owner_key(n, out) is None]
    if missing:
        raise ModelError(f"device_map places no device for {len(missing)} parameter(s) of the model, e.g. "
                         f"{shown(missing[0])}; give every top-level module a device (or use device_map: auto)")
    return out


def infer_map(meta_model: nn.Module, *, mode: str, device: str, dtype: torch.dtype,
              device_memory: int | None = None, reserve: int = 0) -> dict[str, str]:
    """The module -> device map of ``mode`` for a weightless copy of the model.

    Args:
        mode: ``auto`` (= ``balanced``: the layers spread evenly over the GPUs), ``balanced_low_0``
            (GPU 0 kept light), ``sequential`` (fill GPU 0, then GPU 1, ...).
        device: ``cuda`` (every visible GPU; what does not fit stays in CPU memory, then on disk) or
            ``cpu`` (what does not fit in ``device_memory`` of CPU memory stays on disk).
        device_memory: the weights budget of each device in bytes; default: each GPU's free memory
            less ``reserve``, or the available CPU memory.
        reserve: bytes left free on each GPU for activations and the decomposition (the FF budget).
    Raises:
        ModelError: no GPU, a budget that holds no layer on any GPU, or accelerate missing.
    """
    try:
        from accelerate import infer_auto_device_map
        from accelerate.utils import get_balanced_memory
    except ImportError as e:  # pragma: no cover - accelerate is part of [compute]
        from report_builder.extras import message

        raise MissingDependency(message("accelerate", "device_map")) from e
    import psutil

    no_split = list(getattr(meta_model, "_no_split_modules", None) or [])
    cpu_free = int(psutil.virtual_memory().available)
    if str(device).startswith("cuda"):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ModelError("device_map spreads a model over the GPUs, but torch sees no GPU here; "
                             "set device: cpu (and device_map: none, or auto to offload to disk)")
        mem: dict = {}
        for i in range(n):
            budget = device_memory if device_memory is not None else torch.cuda.mem_get_info(i)[0] - reserve
            mem[i] = max(0, int(budget))
        mem["cpu"] = cpu_free
        if mode in ("auto", "balanced", "balanced_low_0") and n > 1:
            mem = get_balanced_memory(meta_model, max_memory=mem, no_split_module_classes=no_split, dtype=dtype,
                                      low_zero=mode == "balanced_low_0")
    else:
        mem = {"cpu": int(device_memory if device_memory is not None else cpu_free)}
    dmap = infer_auto_device_map(meta_model, max_memory=mem, no_split_module_classes=no_split, dtype=dtype)
    dmap = {k: device_name(v) for k, v in dmap.items()}
    if str(device).startswith("cuda") and not any(v.startswith("cuda") for v in dmap.values()):
        raise ModelError(f"device_memory {_size(device_memory, mem)} per GPU holds no layer of the model; raise "
                         f"{option('device_memory')} (each GPU needs room for at least one layer plus max_memory for "
                         f"the decomposition)")
    return dmap


def _size(device_memory, mem) -> str:
    b = device_memory if device_memory is not None else max((v for k, v in mem.items() if k != "cpu"), default=0)
    return f"{b / (1 << 20):.0f}MiB"


# ------------------------------------------------------------------ a loaded model


def _hooks(module: nn.Module):
    hook = getattr(module, "_hf_hook", None)
    if hook is None:
        return []
    return list(getattr(hook, "hooks", None) or [hook])


def execution_device(module: nn.Module) -> torch.device | None:
    """The device accelerate runs ``module`` on (its hook's execution device), else its parameters'."""
    for h in _hooks(module):
        dev = getattr(h, "execution_device", None)
        if dev is not None:
            return torch.device(device_name(dev))
    for p in module.parameters():
        if p.device.type != "meta":
            return p.device
    return None


def is_offloaded(module: nn.Module) -> bool:
    """True when ``module`` (not its children) has weights that accelerate streams in for each forward."""
    return any(getattr(h, "offload", False) for h in _hooks(module))


def dispatched(model: nn.Module) -> bool:
    """True when accelerate hooks are attached (a model loaded with a device map)."""
    return any(_hooks(m) for m in model.modules())


def placement_of(model: nn.Module, layers: list[nn.Module], mode: str, dmap: dict[str, str]) -> Placement:
    """The `Placement` of a dispatched model, read from its hooks and its map."""
    names = _module_names(model)
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    main = execution_device(emb) if emb is not None else None
    devices, storage = [], []
    for layer in layers:
        dev = execution_device(layer) or main or torch.device("cpu")
        devices.append(device_name(dev))
        key = owner_key(names[id(layer)], dmap)
        if key is not None:
            storage.append(dmap[key])
        else:  # the layer is split below itself in the map: name the kinds its parts are kept on
            parts = sorted({v for k, v in dmap.items() if k.startswith(names[id(layer)] + ".")})
            storage.append("+".join(parts) or device_name(dev))
    if main is None:
        main = torch.device(devices[0]) if devices else torch.device("cpu")
    return Placement(mode=mode, main_device=device_name(main), layer_devices=tuple(devices),
                     layer_storage=tuple(storage), map=dict(dmap))


@contextlib.contextmanager
def onloaded(modules: list[nn.Module], device: torch.device) -> Iterator[None]:
    """Inside: every offloaded parameter of ``modules`` (and their children) is real, on ``device``.

    Runs the modules' accelerate hooks as a forward pass would (``pre_forward`` loads the weights from
    CPU memory or disk, ``post_forward`` puts them back on the meta device); tensors taken from the
    modules inside stay valid afterwards (they are new tensors, not the module's meta ones).
    """
    done = []
    seen = set()
    try:
        for root in modules:
            for m in root.modules():
                if id(m) in seen or not is_offloaded(m):
                    continue
                seen.add(id(m))
                for h in _hooks(m):
                    if getattr(h, "offload", False):
                        old = h.execution_device
                        h.execution_device = device
                        try:
                            h.pre_forward(m)
                        finally:
                            h.execution_device = old
                        done.append((h, m))
        yield
    finally:
        for h, m in reversed(done):
            h.post_forward(m, None)
