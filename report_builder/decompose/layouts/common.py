"""Building blocks shared by the layouts' mathematics: whether to skip the pairs j > i, float32 norms,
context-mixing ratios, the diagonal of a source-major chunk or tile, and K21's weight-based maps; for the
GPU rule, its budget (`gpu_budget`, sized outside the layer step) and its check kept on the device
(`DeviceCheck`, read once per batch).

Pitfall: `add_diag` adds the residual (diagonal) term through a *view*, in place, so the chunk or tile
must be contiguous in its source-major order ``(..., n_src, c, D)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from report_builder.decompose.attention import causal_violation, is_causal
from report_builder.decompose.chunks import GPU_FREE_FRACTION
from report_builder.decompose.layer import LayerResult, error_rows

NOT_CAUSAL = ("causal=True, but the attention probabilities are not causal (a probability above the diagonal "
              "is not zero)")


def resolve_causal(alpha: Tensor, causal: bool | None, rule: str = "cpu") -> bool:
    """Whether the n^2 steps may cover the pairs j <= i only. None: whether ``alpha`` is causal
    (`attention.is_causal`; the GPU rule reads one flag for the whole batch); True: required (a ValueError
    when a probability above the diagonal is not zero; the GPU rule checks it with the layer's errors,
    without stopping the device here, `decompose.layouts`); False: every pair, as for a bidirectional model."""
    if causal is False:
        return False
    if rule == "gpu":
        return True if causal else not bool(causal_violation(alpha))
    found = is_causal(alpha)
    if causal and not found:
        raise ValueError(NOT_CAUSAL)
    return found


@dataclass
class DeviceCheck:
    """The GPU rule's check of one layer of a batch, still on the device: ``errors`` (points, B) float32, the
    relative reconstruction error of each check point ``keys`` per sequence over its real rows
    (`layer.error_rows`), and the deferred causality ``flag`` (0-dim: ``causal=True`` was given but a
    probability above the diagonal is not zero). Nothing is read on the host until `read`, which a caller
    running layer after layer does once per batch, after the layers."""

    keys: tuple[str, ...] = ()
    errors: Tensor | None = None
    flag: Tensor | None = None

    @staticmethod
    def of_sequences(checks: list["DeviceCheck"]) -> "DeviceCheck":
        """One check for a batch from its sequences' checks (each over a batch of one): the errors side by
        side, the flag raised if any sequence's is."""
        errs = [c.errors for c in checks if c.errors is not None]
        flags = [c.flag for c in checks if c.flag is not None]
        return DeviceCheck(checks[0].keys if errs else (), torch.cat(errs, 1) if errs else None,
                           torch.stack(flags).any() if flags else None)

    def rows(self) -> Tensor | None:
        """``errors`` with the flag as one more row ((points [+ 1], B) float32 on the device), or None."""
        rows = [] if self.errors is None else [self.errors]
        if self.flag is not None:
            like = self.errors if self.errors is not None else self.flag
            b = self.errors.shape[1] if self.errors is not None else 1
            rows.append(self.flag.to(torch.float32).expand(1, b).to(like.device))
        return torch.cat(rows) if rows else None

    def read(self, results: list[LayerResult]) -> None:
        """One host read: each result's ``errors`` (check point -> error), or the ValueError of a non-causal
        ``alpha`` given as causal (`read_checks` of this one step)."""
        read_checks([(results, self)])

    def fill(self, results: list[LayerResult], vals: list[list[float]], flagged: bool) -> None:
        """Each result's errors from the host copy ``vals`` of `rows` (``flagged``: its last row is the flag)."""
        if flagged and vals[-1][0]:
            raise ValueError(NOT_CAUSAL)
        for b, r in enumerate(results):
            r.errors.update({k: vals[c][b] for c, k in enumerate(self.keys)})


def read_checks(steps: list[tuple[list[LayerResult], DeviceCheck]]) -> None:
    """`DeviceCheck.read` of several layer steps (``(results, check)``, `layouts.batch_step`) in one host read:
    the check of a batch, once, after its layers."""
    rows = [c.rows() for _, c in steps]
    kept = [r for r in rows if r is not None]
    if not kept:
        return
    vals = torch.cat(kept).tolist()  # the one host read
    at = 0
    for (results, c), r in zip(steps, rows):
        if r is None:
            continue
        c.fill(results, vals[at:at + r.shape[0]], c.flag is not None)
        at += r.shape[0]


def device_check(sums: dict[str, Tensor], refs: dict[str, Tensor] | None, lengths: list[int],
                 flag: Tensor | None) -> DeviceCheck:
    """The `DeviceCheck` of a batch's ``sums`` against ``refs`` (each (B, n, d)), with the causality ``flag``."""
    keys = tuple(k for k in (refs or {}) if k in sums)
    errors = error_rows([sums[k] for k in keys], [refs[k] for k in keys], lengths) if keys else None
    return DeviceCheck(keys, errors, flag)


def gpu_budget(device: torch.device, budget_bytes: int | None) -> int:
    """The GPU rule's buffer budget on ``device``: `GPU_FREE_FRACTION` of the memory free there (CUDA: the
    device's free memory plus what torch's allocator holds unused; CPU: the available RAM), capped by
    ``budget_bytes`` when one is given (``max_memory``). A read of the device's (or host's) memory state:
    sized once per run or batch, outside the layer step, which takes the number as given (a step that read it
    would also recompile, compiled, whenever the free memory changed)."""
    free = None
    if device.type == "cuda":
        free_dev, _ = torch.cuda.mem_get_info(device)
        free = free_dev + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    elif budget_bytes is None:
        try:
            import psutil
            free = int(psutil.virtual_memory().available)
        except ImportError:  # pragma: no cover
            free = 2 << 30
    cap = None if free is None else int(GPU_FREE_FRACTION * free)
    if budget_bytes is None:
        return cap
    return budget_bytes if cap is None else min(budget_bytes, cap)


def norm32(t: Tensor) -> Tensor:
    """Euclidean norm over the last dim, accumulated in float32 whatever t's dtype."""
    return torch.linalg.vector_norm(t, dim=-1, dtype=torch.float32)


def ratio(ctx: Tensor, self_: Tensor) -> Tensor:
    """Context-mixing ratio ``||ctx|| / (||ctx|| + ||self||)`` per token (K21)."""
    c = norm32(ctx)
    s = norm32(self_)
    return c / (c + s).clamp_min(1e-30)


def ratios_of(pairs: dict[str, tuple[Tensor, Tensor]]) -> dict[str, Tensor]:
    """`ratio` of several (ctx, self) pairs of one shape with one norm over all their distinct vectors and
    one set of element-wise ops for all the ratios (a few kernels instead of five per ratio)."""
    vecs: list[Tensor] = []
    at: dict[int, int] = {}

    def slot(t: Tensor) -> int:
        if id(t) not in at:
            at[id(t)] = len(vecs)
            vecs.append(t)
        return at[id(t)]
    idx = [(slot(c), slot(s)) for c, s in pairs.values()]
    nv = norm32(torch.stack(vecs))
    c = torch.stack([nv[i] for i, _ in idx])  # not nv[[...]]: an index list is a copy from host memory
    s = torch.stack([nv[j] for _, j in idx])
    return dict(zip(pairs, (c / (c + s).clamp_min(1e-30)).unbind(0)))


def add_diag(t: Tensor, j0: int, start: int, vals: Tensor) -> None:
    """Add ``vals`` (..., c, D) to the diagonal terms ``j = i`` of a source-major tile, in place: t (..., S,
    c, D) holds sources ``j0 .. j0 + S`` of query rows ``start .. start + c``."""
    S, c = t.shape[-3], t.shape[-2]
    lo, hi = max(j0, start), min(j0 + S, start + c)
    if hi <= lo:
        return
    view = torch.diagonal(t[..., lo - j0:hi - j0, lo - start:hi - start, :], dim1=-3, dim2=-2)
    view.add_(vals[..., lo - start:hi - start, :].transpose(-1, -2))


def k21_weight_maps(res: LayerResult, alpha: Tensor, want: set, ratios: bool) -> None:
    """K21's weight-based maps and ratios (ATTN-W, ATTNRES-W) of one sequence, alpha (H, n, n)."""
    a_mean = alpha.mean(0)
    if "ATTN-W" in want:
        res.maps["ATTN-W"] = a_mean.float()
    if "ATTNRES-W" in want:
        eye = torch.eye(a_mean.shape[0], device=alpha.device, dtype=alpha.dtype)
        res.maps["ATTNRES-W"] = (0.5 * a_mean + 0.5 * eye).float()
    if ratios:
        diag = torch.diagonal(a_mean).float()
        res.ratios["ATTN-W"] = 1 - diag
        res.ratios["ATTNRES-W"] = 0.5 * (1 - diag)
