"""One Transformer layer as exact token-to-token terms at every scope of its layout (SPEC §1, §7).

`decompose_layer` (one sequence) and `decompose_batch` (a right-padded batch) dispatch on the layer's
`schema.Layout` through `MATHS`, one row per layout: post-LN and pre-LN share the batched fast path
(`post_pre`), sandwich norms (`sandwich`) and parallel attention + FF (`parallel`) run one sequence
at a time. Shared building blocks are in `common`; the chunk rules are `decompose.chunks`: ``chunk_rule``
picks a device class (``auto``: the device's), the CPU rule's chunk loop or the GPU rule's blocks
(`ff_blocks`, which also runs the pair GEMM in a reduced ``precision``, `schema.PRECISIONS`).

Every result carries the relative reconstruction error of each check point against the tensors the
real HF model computed (when given). Pitfall: a new layout is a `schema.Layout` row, a module here
and its row in `MATHS`; a layout without a row is refused, never decomposed by another's mathematics.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from torch import Tensor

from report_builder.decompose.attention import causal_violation
from report_builder.decompose.chunks import rule_class
from report_builder.decompose.feedforward import IGOptions
from report_builder.decompose.layer import LayerResult, LayerWeights, relative_error
from report_builder.decompose.layouts import parallel, post_pre, sandwich
from report_builder.decompose.layouts.common import DeviceCheck, device_check, gpu_budget, resolve_causal
from report_builder.schema import K21_METHODS, PARALLEL, POST_LN, PRE_LN, SANDWICH, Layout

DEFAULT_BUDGET = 512 << 20
"""The CPU rule's chunk budget when none is given (the GPU rule's default is the device's free memory)."""


@dataclass(frozen=True)
class LayoutMaths:
    """How one layout is decomposed.

    Attributes:
        one: ``(lw, x (n, d), alpha (H, n, n), want, *, ratios, extras, ig, chunk_rows, budget_bytes, causal,
            rule, precision)`` -> `LayerResult` of one unpadded sequence (errors not yet recorded); ``causal``:
            alpha is causal, so the n^2 steps may cover the pairs j <= i only; ``rule``: the device class
            (``cpu``/``gpu``, `chunks.rule_class`); ``precision``: the pair-GEMM mode.
        batch: the same for a right-padded batch, with the real ``lengths`` after alpha, ->
            ``(one result per sequence, DeviceCheck)`` (``causal`` as given: None is resolved after the pads
            are masked), its errors against ``refs`` when the rule is ``gpu`` kept on the device (the
            `common.DeviceCheck`, read by the caller); None: the batch runs one sequence at a time through
            ``one``.
    """

    one: Callable[..., LayerResult]
    batch: Callable[..., list[LayerResult]] | None = None


_POST_PRE = LayoutMaths(post_pre.decompose_one, post_pre.decompose_batch)
MATHS: dict[Layout, LayoutMaths] = {
    POST_LN: _POST_PRE,
    PRE_LN: _POST_PRE,
    SANDWICH: LayoutMaths(sandwich.decompose_one),
    PARALLEL: LayoutMaths(parallel.decompose_one),
}
"""Layout -> its mathematics (every row of `schema.LAYOUTS`)."""
_BY_ID = {lay.id: m for lay, m in MATHS.items()}
"""`MATHS` by layout id: the layer step looks a layout up by its id (a string), not by the `Layout` (whose own
hash TorchDynamo cannot trace: a lookup by it fails inside a compiled layer step)."""


def _maths(lw: LayerWeights) -> LayoutMaths:
    maths = _BY_ID.get(lw.layout.id)
    if maths is None:
        raise ValueError(f"layout {lw.layout.id!r} has no mathematics in decompose.layouts "
                         f"(known: {', '.join(lay.id for lay in MATHS)})")
    return maths


def _wanted(lw: LayerWeights, maps: Iterable[str]) -> set[str]:
    want = set(maps)
    unknown = want - set(lw.scopes) - set(K21_METHODS)
    if unknown:
        raise ValueError(f"unknown scopes {sorted(unknown)}; this layer has {lw.scopes} and {K21_METHODS}")
    return want


def _record_errors(res: LayerResult, refs: dict[str, Tensor] | None) -> None:
    for key, ref in (refs or {}).items():
        if key in res.sums:
            res.errors[key] = relative_error(res.sums[key], ref)


def _setup(x: Tensor, causal: bool | None, chunk_rule: str, precision: str,
           budget_bytes: int | None) -> tuple[str, int, bool]:
    """The device class, the budget (a default filled in: the CPU rule's `DEFAULT_BUDGET`; the GPU rule's
    `common.gpu_budget`, read here, at the call, when the caller did not size it) and whether the GPU rule
    checks ``causal=True`` with the errors (deferred: no host read mid-layer; a batch's after its pads are
    masked)."""
    rule = rule_class(chunk_rule, x.device.type, precision)
    if budget_bytes is None:
        budget_bytes = DEFAULT_BUDGET if rule == "cpu" else gpu_budget(x.device, None)
    return rule, budget_bytes, rule == "gpu" and causal is True


def decompose_layer(
    lw: LayerWeights,
    x: Tensor,
    alpha: Tensor,
    *,
    maps: Iterable[str] = (),
    ratios: bool = False,
    refs: dict[str, Tensor] | None = None,
    extras: bool = False,
    ig: IGOptions = IGOptions(),
    chunk_rows: int | None = None,
    budget_bytes: int | None = None,
    causal: bool | None = None,
    chunk_rule: str = "auto",
    precision: str = "float32",
) -> LayerResult:
    """Decompose one layer for one (unpadded) sequence.

    Args:
        lw: the layer's weights, on x's device and dtype.
        x: (n, d) layer input.
        alpha: (H, n, n) attention probabilities read from the model (eager attention).
        maps: which maps to compute: any of the layer's scopes and the K21 methods (`K21_METHODS`).
        ratios: compute the five K21 context-mixing ratios (no n x n x d tensor needed).
        refs: HF tensors at the check points (`LayerWeights.checks`), each (n, d); errors are computed
            for every check point whose sum was computed.
        extras: also return FF output, residual and the norm-after-FF quantities (K24 RES/LN analyses).
        ig: IG options (closed form by default).
        chunk_rows: query rows per chunk of the FF step (default: from ``budget_bytes``).
        budget_bytes: memory for the FF step's chunks (default: 512 MiB by the CPU rule, half the
            device's free memory by the GPU rule, read at the call: `common.gpu_budget`). The GPU rule takes
            a given budget as it is: a caller running layer after layer sizes it once with `gpu_budget` (which
            also caps it by the memory free), so that no layer step reads the device's memory state.
        causal: None (default) finds out whether ``alpha`` is causal (every probability above the
            diagonal exactly zero): then every n^2 step covers only the pairs j <= i (SPEC §8), and
            the maps hold exact zeros for j > i, as the full computation gives them. False computes
            every pair (the bench's side-by-side baseline); True requires a causal ``alpha`` (the GPU
            rule checks it when it reads the errors, without stopping the device mid-layer).
        chunk_rule: ``auto`` (the device's class), ``cpu`` or ``gpu`` (`decompose.chunks`).
        precision: the pair-GEMM mode (`schema.PRECISIONS`; a reduced one runs the GPU rule's FF step).
    Returns:
        A `LayerResult`.
    """
    res, check = _one_step(lw, x, alpha, maps=maps, ratios=ratios, refs=refs, extras=extras, ig=ig,
                           chunk_rows=chunk_rows, budget_bytes=budget_bytes, causal=causal, chunk_rule=chunk_rule,
                           precision=precision, check_causal=True)
    check.read([res])
    return res


def _one_step(lw: LayerWeights, x: Tensor, alpha: Tensor, *, maps, ratios, refs, extras, ig, chunk_rows,
              budget_bytes, causal, chunk_rule, precision, check_causal: bool) -> tuple[LayerResult, DeviceCheck]:
    """`decompose_layer` with the GPU rule's check left on the device (the CPU rule's errors recorded, its check
    empty). ``check_causal``: the GPU rule checks ``causal=True`` even without ``refs`` (`decompose_layer`);
    else only with them, as a batch does (without them, by the caller's own check)."""
    maths = _maths(lw)
    rule, budget_bytes, check = _setup(x, causal, chunk_rule, precision, budget_bytes)
    flag = causal_violation(alpha) if check and (check_causal or refs is not None) else None
    res = maths.one(lw, x, alpha, _wanted(lw, maps), ratios=ratios, extras=extras, ig=ig, chunk_rows=chunk_rows,
                    budget_bytes=budget_bytes, causal=resolve_causal(alpha, causal, rule), rule=rule,
                    precision=precision)
    if rule == "cpu":
        _record_errors(res, refs)
        return res, DeviceCheck()
    return res, device_check({k: v.unsqueeze(0) for k, v in res.sums.items() if v.dim() == 2},
                             None if refs is None else {k: t.unsqueeze(0) for k, t in refs.items()}, [x.shape[0]],
                             flag)


def decompose_batch(
    lw: LayerWeights,
    x: Tensor,
    alpha: Tensor,
    lengths: list[int],
    *,
    maps: Iterable[str] = (),
    ratios: bool = False,
    refs: dict[str, Tensor] | None = None,
    extras: bool = False,
    ig: IGOptions = IGOptions(),
    chunk_rows: int | None = None,
    budget_bytes: int | None = None,
    causal: bool | None = None,
    chunk_rule: str = "auto",
    precision: str = "float32",
) -> list[LayerResult]:
    """Decompose one layer for a right-padded batch at once (one set of GEMMs for all sequences).

    Args:
        x: (B, n_max, d) layer inputs; alpha: (B, H, n_max, n_max) probabilities; ``lengths`` the real
            lengths; refs: (B, n_max, d) per check point. Other arguments as in `decompose_layer`;
            ``budget_bytes`` bounds the whole batch's chunk.
    Returns:
        One `LayerResult` per sequence over its real tokens only. Pads are masked exactly: their
        inputs and attention probabilities (as queries and as keys) are set to zero, so every term a
        real token receives from a pad is an exact zero and pad rows are dropped. Equal to
        `decompose_layer` on each sequence alone up to float rounding (the GEMM shapes differ). A
        layout without a batched path (`LayoutMaths.batch`) runs its sequences one at a time, and so
        does the CPU rule for sequences of different lengths (bit for bit `decompose_layer`'s: on a CPU,
        pads cost arithmetic and one sequence at a time costs nothing); the GPU rule cuts such a batch
        per sequence when that saves pairs (`chunks.gpu_plan`). The GPU rule's errors are read on the host
        once, at the end (`batch_step` leaves them on the device).
    """
    out, check = batch_step(lw, x, alpha, lengths, maps=maps, ratios=ratios, refs=refs, extras=extras, ig=ig,
                            chunk_rows=chunk_rows, budget_bytes=budget_bytes, causal=causal, chunk_rule=chunk_rule,
                            precision=precision)
    check.read(out)
    return out


def batch_step(
    lw: LayerWeights,
    x: Tensor,
    alpha: Tensor,
    lengths: list[int],
    *,
    maps: Iterable[str] = (),
    ratios: bool = False,
    refs: dict[str, Tensor] | None = None,
    extras: bool = False,
    ig: IGOptions = IGOptions(),
    chunk_rows: int | None = None,
    budget_bytes: int | None = None,
    causal: bool | None = None,
    chunk_rule: str = "auto",
    precision: str = "float32",
) -> tuple[list[LayerResult], DeviceCheck]:
    """`decompose_batch`'s layer step, with the GPU rule's check left on the device: ``(results, check)``,
    where ``check.read(results)`` fills in their errors (and raises for a non-causal ``alpha`` given as
    causal) in one host read, once per batch after the layers. By the GPU rule with a sized ``budget_bytes``
    (`common.gpu_budget`) and ``causal`` given, nothing here reads the host or the device's state: the step
    traces as one graph (``torch.compile(..., fullgraph=True)``, tests/decompose/test_compiled_step.py). Layouts
    without a batched path run one sequence at a time, their checks gathered into the one returned (the causal
    flag, as for a batch, only with ``refs``). The CPU rule records its errors as `decompose_batch` does (the
    check returned is empty)."""
    maths = _maths(lw)
    rule, budget, check = _setup(x, causal, chunk_rule, precision, budget_bytes)
    if maths.batch is None or (len(set(lengths)) > 1 and rule == "cpu"):  # the CPU rule runs a ragged batch one sequence at a time: no pad work
        steps = [_one_step(lw, x[b, :n], alpha[b, :, :n, :n], maps=maps, ratios=ratios, extras=extras, ig=ig,
                           refs=None if refs is None else {k: t[b, :n] for k, t in refs.items()},
                           chunk_rows=chunk_rows, budget_bytes=budget, causal=causal, chunk_rule=chunk_rule,
                           precision=precision, check_causal=False)
                 for b, n in enumerate(lengths)]
        return [r for r, _ in steps], DeviceCheck.of_sequences([c for _, c in steps])
    check = check and refs is not None  # read with the errors; without them, by the caller's own check
    out, dev_check = maths.batch(lw, x, alpha, lengths, _wanted(lw, maps), ratios=ratios, extras=extras, ig=ig,
                                 chunk_rows=chunk_rows, budget_bytes=budget, causal=causal, rule=rule,
                                 precision=precision, refs=refs if rule == "gpu" else None, check_causal=check)
    if rule == "cpu":
        for b, (r, n) in enumerate(zip(out, lengths)):
            _record_errors(r, None if refs is None else {k: t[b, :n] for k, t in refs.items()})
    return out, dev_check
