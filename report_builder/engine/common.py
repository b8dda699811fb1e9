"""What both engine paths share: the sequences (`Tokens`), their padded input tensors, the one
error-bound check, a capture moved to a layer's device and half-precision maps.

Pitfall: `inputs` with ``pin=True`` copies through pinned memory without waiting (a plain host-to-device
copy waits for every kernel queued before it, which would stall the batched path's overlap).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Sequence

import torch

from report_builder.decompose.layer import LayerResult
from report_builder.errors import ReconstructionError
from report_builder.models.capture import LayerCapture
from report_builder.models.loading import LoadedModel


@dataclass(frozen=True)
class Tokens:
    """One sequence to analyse: token ids and (encoders) token type ids."""

    input_ids: Sequence[int]
    token_type_ids: Sequence[int] | None = None


def pad_id(lm: LoadedModel) -> int:
    tok = lm.tokenizer
    pid = getattr(tok, "pad_token_id", None)
    if pid is None:
        pid = getattr(lm.config, "pad_token_id", None)
    return int(pid) if pid is not None else 0


def inputs(lm: LoadedModel, seqs: list[Tokens], group: list[int], pin: bool = False) -> dict[str, torch.Tensor]:
    """Right-padded input tensors for ``group`` (a batch of one is exactly the unpadded sequence), on the
    model's device; ``pin``: through pinned host memory, without waiting for the device."""
    n_max = max(len(seqs[k].input_ids) for k in group)
    ids = torch.full((len(group), n_max), pad_id(lm), dtype=torch.long)
    mask = torch.zeros((len(group), n_max), dtype=torch.long)
    tt = None
    if any(seqs[k].token_type_ids is not None for k in group):
        tt = torch.zeros((len(group), n_max), dtype=torch.long)
    for b, k in enumerate(group):
        s = seqs[k]
        n = len(s.input_ids)
        ids[b, :n] = torch.tensor(list(s.input_ids))
        mask[b, :n] = 1
        if tt is not None and s.token_type_ids is not None:
            tt[b, :n] = torch.tensor(list(s.token_type_ids))
    dev = lm.device
    host = {"input_ids": ids, "attention_mask": mask}
    if tt is not None:
        host["token_type_ids"] = tt
    if pin:
        return {k: v.pin_memory().to(dev, non_blocking=True) for k, v in host.items()}
    return {k: v.to(dev) for k, v in host.items()}


def enforce_bound(lm: LoadedModel, layer: int, errors: dict[str, float], points: bool | frozenset = True,
                  mode: str = "float32") -> None:
    """The one error-bound check: every check point (``points`` True) or only those named. The bound is
    the precision mode's (`schema.PRECISIONS`): float32's is the package's ``engine.ERROR_BOUND``
    (`schema.ERROR_BOUND`), read at each call. ``layer`` is the engine's 0-based index; the message
    counts layers from 1, as every page and frame does (SPEC §8)."""
    from report_builder.schema import FIRST_LAYER, precision

    bound = sys.modules["report_builder.engine"].ERROR_BOUND if mode == "float32" else precision(mode).bound
    for scope, err in errors.items():
        if (points is True or scope in points) and not err <= bound:
            raise ReconstructionError(
                f"{lm.name}: layer {layer + FIRST_LAYER}, scope {scope}: relative reconstruction error "
                f"{err:.3g} exceeds {bound:g}" + ("" if mode == "float32" else f" (the {mode} bound)"))


def on_device(c: LayerCapture, dev: torch.device) -> LayerCapture:
    """A capture's tensors on ``dev`` (no copy where they already are: always, on one device)."""
    return LayerCapture(x=c.x.to(dev), alpha=c.alpha.to(dev), refs={k: t.to(dev) for k, t in c.refs.items()})


def half_maps(r: LayerResult, dtype: torch.dtype | None) -> LayerResult:
    """The result with its maps in ``dtype`` (float16: a map with a value above its range stays float32)."""
    if dtype is None:
        return r
    for k, m in r.maps.items():
        if dtype != torch.float16 or not bool((m.abs() > torch.finfo(torch.float16).max).any()):
            r.maps[k] = m.to(dtype)
    return r
