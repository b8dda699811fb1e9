"""The engine's batched path (any device but the CPU, or on request): right-padded batches sized from
the device's free memory and the shapes, each layer decomposed inside the forward pass with no host
synchronisation, and everything a batch returns moved to the host in one transfer that overlaps the
next batch's compute.

- `batch_size` (the rule): as many sequences as the memory left after the FF chunk budget holds at
  the batch's padded length (a power of two, at most `MAX_BATCH`, or the caller's cap); on the CPU the
  caller's size (default `CPU_BATCH`), as before.
- `decompose_batches`: per batch and layer, `decompose.layouts.decompose_batch` and then a ``reduce``
  step on the device (what the caller keeps of the layer: the result's parts, or statistics computed
  there, `analyses.k24_device`); the reconstruction errors are computed on the device as well
  (`_errors`); a batch's tensors go to the host at once (`host.HostCopy`), and the batch is handed
  over after the next one has been launched.
- `decompose_each`: the generic consumer behind `engine.decompose_sequences`: per-sequence
  `LayerResult`s rebuilt on the host from the batch tensors (`keep_parts`, `unpack`).

Pitfall: a layer's result parts are usually views of one batch tensor (`_stacked` then moves that
tensor, not B slices); anything else is padded into one, which costs a copy per sequence.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
from torch import Tensor

from report_builder.decompose.layer import LayerResult, error_rows, real_rows
from report_builder.decompose.chunks import rule_class
from report_builder.decompose.layouts import decompose_batch, gpu_budget
from report_builder.engine.common import Tokens, enforce_bound, inputs, on_device
from report_builder.engine.host import HostCopy
from report_builder.models.capture import LayerCapture, capture_hooks
from report_builder.models.loading import LoadedModel

MAX_BATCH = 256
"""Most sequences in one padded batch: beyond this the per-layer Python work is already amortised."""
CPU_BATCH = 8
"""Sequences per batch on the CPU's batched path when the caller gives none (it is not memory-sized)."""
HEADROOM = 0.15
"""Share of the device's total memory the batch rule leaves free (allocator fragmentation, GEMM
workspaces, the forward pass's own temporaries)."""
PARTS = ("maps", "ratios", "sums", "extras", "bias")
"""The parts of a `LayerResult` (besides its errors) a batch can return to the host."""
SEQ_DIMS = {"maps": 2, "ratios": 1, "sums": 2, "extras": 2, "bias": 2}
"""Dims of one sequence's tensor in each part ((n, n) maps, (n,) ratios, (n, d) vectors); fewer: shared."""


@dataclass
class Batch:
    """One padded batch: ``group`` (indices into the sequences), their real ``lengths``, the padded
    length ``n``, and ``memo``, where a ``reduce`` step keeps what is the same for every layer."""

    group: list[int]
    lengths: list[int]
    n: int
    memo: dict = field(default_factory=dict)

    def to(self, device: torch.device, key: str, make: Callable[[], Tensor]) -> Tensor:
        """``make()`` (a host tensor) on ``device``, made and copied once per batch and device, through pinned
        memory without waiting for the device (a plain host-to-device copy waits for the queued work)."""
        k = (key, str(device))
        if k not in self.memo:
            t = make()
            self.memo[k] = t.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else t.to(device)
        return self.memo[k]

    def real(self, device: torch.device) -> Tensor:
        """(B, n) bool: the real (not padding) positions, on ``device`` (`decompose.layer.real_rows`)."""
        return real_rows(tuple(self.lengths), self.n, str(device))


def seq_bytes(lm: LoadedModel, n: int, *, layers: int, held_per_layer: int = 0, reduce_bytes: int = 0) -> int:
    """Device bytes one sequence of (padded) length ``n`` takes on the batched path: the forward pass
    and the decomposition of one layer at a time (mirrors `costs.footprint.layer_fixed_bytes`), plus
    ``held_per_layer`` bytes kept for each of ``layers`` layers until the batch's transfer (twice: the
    previous batch's are still being copied) and ``reduce_bytes`` of the reduce step's temporaries."""
    lw = lm.layer_weights(0)
    d, H, dff = lw.attn.d_model, lw.attn.n_heads, lw.ff.d_ff
    k = 2 if lw.ff.gated else 1
    item = torch.empty((), dtype=lm.dtype).element_size()
    forward = 3 * H * n * n + 14 * n * d + (k + 1) * n * dff
    decompose = 4 * H * n * n + 12 * n * n + n * H * (2 * d + k * dff) + 24 * n * d + 8 * k * n * dff
    return item * (forward + decompose) + 2 * layers * held_per_layer + reduce_bytes


def free_bytes(device: torch.device) -> int:
    """What the batch rule may use on ``device``: its free memory plus what this process's allocator holds
    unused, less `HEADROOM` of the total."""
    free, total = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return max(0, int(free + cached - HEADROOM * total))


def batch_size(per_seq: int, room: int, cap: int | None = None) -> int:
    """Sequences per batch: as many as ``room`` bytes hold at ``per_seq`` each, rounded down to a power of
    two (so a kind of device cuts the same batches run after run), at least 1, at most ``cap`` and
    `MAX_BATCH`."""
    b = max(1, min(cap or MAX_BATCH, MAX_BATCH, room // max(per_seq, 1)))
    return 1 << (b.bit_length() - 1)


def plan_batches(lengths: list[int], size_of: Callable[[int], int]) -> list[list[int]]:
    """Indices grouped into batches of sequences of similar length (sorted by length, ties in input
    order); each batch holds ``size_of(n)`` sequences for its longest length ``n``."""
    order = sorted(range(len(lengths)), key=lambda k: lengths[k])
    out, s = [], 0
    while s < len(order):
        b = size_of(lengths[order[s]])
        while True:  # the batch's longest sequence decides its size; the rule only shrinks with n
            nb = size_of(lengths[order[min(s + b, len(order)) - 1]])
            if nb >= b:
                break
            b = nb
        out.append(order[s:s + b])
        s += b
    return out


def _stacked(ts: list[Tensor], lengths: list[int], n: int, token_dims: int, seq_dims: int) -> tuple[Tensor, str]:
    """One tensor for a part's per-sequence tensors, and how to take sequence ``b`` back from it:
    ``"="`` every sequence shares it (a (d,) weight or bias term: fewer than ``seq_dims`` dims), ``"b"``
    row ``b`` of a stack, ``":"`` ``batch[b, :len_b]`` over the first ``token_dims`` dims after the batch
    dim, where ``batch`` is the sequences' common base when they are such views of it, else a
    zero-padded copy."""
    t0 = ts[0]
    if t0.dim() < seq_dims:
        return (t0, "=") if all(t is t0 for t in ts) else (torch.stack(ts), "b")
    base = t0._base
    if base is not None and base.dim() == t0.dim() + 1 and base.shape[0] == len(ts) and base.dtype == t0.dtype \
            and all(base.shape[1 + i] == n for i in range(token_dims)):
        ok = True
        for b, (t, ln) in enumerate(zip(ts, lengths)):
            want = (ln,) * token_dims + tuple(base.shape[1 + token_dims:])
            if not (t._base is base and tuple(t.shape) == want and t.stride() == base.stride()[1:]
                    and t.storage_offset() == base.storage_offset() + b * base.stride(0)):
                ok = False
                break
        if ok:
            return base, ":"
    out = t0.new_zeros((len(ts),) + (n,) * token_dims + tuple(t0.shape[token_dims:]))
    for b, (t, ln) in enumerate(zip(ts, lengths)):
        out[(b,) + (slice(0, ln),) * token_dims] = t
    return out, ":"


def batch_tensor(rs: list[LayerResult], part: str, key: str, batch: Batch) -> Tensor:
    """The batch tensor of one part of a layer's results: (B, n, n) maps, (B, n) ratios, (B, n, d) vectors
    (pad positions hold anything), or the one tensor every sequence shares (a (d,) weight)."""
    t, how = _stacked([getattr(r, part)[key] for r in rs], batch.lengths, batch.n, 2 if part == "maps" else 1,
                      SEQ_DIMS[part])
    return t


def _errors(rs: list[LayerResult], refs: dict[str, Tensor], batch: Batch) -> tuple[list[str], Tensor | None]:
    """The checked points and their relative reconstruction errors, (points, B) float32 on the device:
    ``max_i ||sum_i - ref_i|| / ||ref_i||`` over each sequence's real tokens (`decompose.layer.relative_error`)."""
    keys = [k for k in refs if k in rs[0].sums]
    if not keys:
        return [], None
    outs = []
    for k in keys:
        s, how = _stacked([r.sums[k] for r in rs], batch.lengths, batch.n, 1, 2)
        outs.append(s[:, None] if how == "b" else s)
    return keys, error_rows(outs, [refs[k] for k in keys], batch.lengths)


@dataclass
class BatchOut:
    """What `decompose_batches` hands over per batch, on the host: the ``reduce`` step's tensors per
    layer, and each sequence's errors per layer (``errors[b][layer]``: check point -> error)."""

    batch: Batch
    layers: dict[int, dict[str, Tensor]]
    errors: list[dict[int, dict[str, float]]]


def decompose_batches(lm: LoadedModel, seqs: list[Tokens], idxs: list[int], kw: dict, *,
                      reduce: Callable[[Batch, int, list[LayerResult]], dict[str, Tensor]], check: bool,
                      enforce: bool | frozenset, batch_size_cap: int | None, budget_bytes: int,
                      held_per_layer: int = 0, reduce_bytes: int = 0,
                      on_batch: Callable[[int], None] | None = None) -> Iterator[BatchOut]:
    """The batched path: yields a `BatchOut` per batch (see the module docstring).

    ``reduce(batch, layer, results)`` runs inside the forward pass right after ``layer`` is decomposed
    (its results on the layer's device) and returns what to keep of it: tensors moved to the host with
    the batch. ``kw``: `decompose_batch`'s options (maps, ratios, extras, ig). ``held_per_layer`` /
    ``reduce_bytes``: device bytes per sequence the reduce step keeps per layer / needs while it runs
    (they size the batches, `seq_bytes`). Errors above the bound raise `ReconstructionError` (``enforce``)
    when the batch reaches the host.
    """
    dev = lm.device
    cuda = dev.type == "cuda"
    lengths = [len(s.input_ids) for s in seqs]
    if cuda:
        room = max(0, free_bytes(dev) - budget_bytes)
        groups = plan_batches(lengths, lambda n: batch_size(
            seq_bytes(lm, n, layers=len(idxs), held_per_layer=held_per_layer, reduce_bytes=reduce_bytes),
            room, batch_size_cap))
    else:
        groups = plan_batches(lengths, lambda n: max(1, batch_size_cap or CPU_BATCH))
    causal = lm.causal  # the model's own (never causal for an encoder; a causal one's checked by the errors)
    # the GPU rule's budget per layer device, sized once for the run beside the batch rule (capped by the memory
    # free there): the layer steps take it as given and never read a device's memory state
    budgets = {}
    for layer in idxs:
        ld = lm.layer_device(layer)
        if str(ld) not in budgets:
            gpu = rule_class(kw.get("chunk_rule", "auto"), ld.type, kw.get("precision", "float32")) == "gpu"
            budgets[str(ld)] = gpu_budget(ld, budget_bytes) if gpu else budget_bytes
    current: list[Batch] = []

    def step(pos: int, c: LayerCapture):
        batch, layer = current[0], idxs[pos]
        ld = lm.layer_device(layer)
        c = on_device(c, ld)
        rs = decompose_batch(lm.layer_weights(layer), c.x, c.alpha, batch.lengths, budget_bytes=budgets[str(ld)],
                             causal=causal, **kw)
        keys, errs = _errors(rs, c.refs, batch) if check else ([], None)
        return layer, reduce(batch, layer, rs), keys, errs

    def finish(batch: Batch, per_layer: list, copy: HostCopy) -> BatchOut:
        host = iter(copy.wait())
        layers: dict[int, dict[str, Tensor]] = {}
        errors: list[dict[int, dict[str, float]]] = [{} for _ in batch.group]
        for layer, out, keys, errs in per_layer:
            layers[layer] = {name: next(host) for name in out}
            if errs:
                e = next(host).tolist()
                for b in range(len(batch.group)):
                    errors[b][layer] = {k: e[i][b] for i, k in enumerate(keys)}
        if enforce:
            for b in range(len(batch.group)):
                for layer in idxs:
                    enforce_bound(lm, layer, errors[b].get(layer, {}), enforce, kw.get("precision", "float32"))
        return BatchOut(batch, layers, errors)

    with capture_hooks(lm.model, lm.adapter, idxs, on_layer=step) as cap:
        pending = None
        for group in groups:
            batch = Batch(group, [lengths[k] for k in group], max(lengths[k] for k in group))
            current[:] = [batch]
            per_layer = cap.run(inputs(lm, seqs, group, pin=cuda))
            flat = [t for _, out, _, errs in per_layer for t in [*out.values(), *([errs] if errs is not None else [])]]
            copy = HostCopy(flat)
            del flat
            if pending is not None:  # the previous batch, while this one runs on the device
                out = finish(*pending)
                pending = None
                yield out
                if on_batch is not None:
                    on_batch(len(out.batch.group))
            pending = (batch, [(layer, list(out), keys, errs is not None) for layer, out, keys, errs in per_layer],
                       copy)
            del per_layer
        if pending is not None:
            out = finish(*pending)
            yield out
            if on_batch is not None:
                on_batch(len(out.batch.group))


def keep_parts(parts: tuple[str, ...]) -> tuple[Callable[[Batch, int, list[LayerResult]], dict[str, Tensor]], Callable]:
    """The reduce step that keeps ``parts`` of every result (as batch tensors), and its inverse on the
    host: ``unpack(out) -> [(seq index, layer, LayerResult)]`` in batch order, sequence by sequence."""

    def reduce(batch: Batch, layer: int, rs: list[LayerResult]) -> dict[str, Tensor]:
        kept = {}
        for part in parts:
            for key in getattr(rs[0], part):
                t, how = _stacked([getattr(r, part)[key] for r in rs], batch.lengths, batch.n,
                                  2 if part == "maps" else 1, SEQ_DIMS[part])
                kept[f"{how}{part}/{key}"] = t
        return kept

    def unpack(out: BatchOut) -> list[tuple[int, int, LayerResult]]:
        res = []
        for b, (k, n) in enumerate(zip(out.batch.group, out.batch.lengths)):
            for layer, kept in out.layers.items():
                r = LayerResult(errors=out.errors[b].get(layer, {}))
                for name, t in kept.items():
                    how, (part, key) = name[0], name[1:].split("/", 1)
                    getattr(r, part)[key] = (t if how == "=" else t[b] if how == "b" else
                                             t[b, :n, :n] if part == "maps" else t[b, :n])
                res.append((k, layer, r))
        return res

    return reduce, unpack


def held_bytes(lm: LoadedModel, n: int, parts: tuple[str, ...], n_maps: int, ratios: bool, extras: bool) -> int:
    """Bytes per sequence and layer `keep_parts` holds until the batch's transfer (float32 or the model's
    dtype, whichever is wider): maps, ratios, extras, and the check points' sums and bias terms."""
    d = lm.layer_weights(0).attn.d_model
    numbers = 0
    if "maps" in parts:
        numbers += n_maps * n * n
    if "ratios" in parts and ratios:
        numbers += 5 * n
    if "extras" in parts and extras:
        numbers += 3 * n * d
    checks = len(lm.layer_weights(0).checks)
    numbers += sum(checks * n * d for p in ("sums", "bias") if p in parts)
    return 4 * numbers
