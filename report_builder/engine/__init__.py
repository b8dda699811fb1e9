"""The bridge from a loaded model and token ids to per-sequence, per-layer decompositions.

Two paths, one contract (``(seq_index, layer, LayerResult)`` in input order):

- **Deterministic (CPU, the default there).** Each sequence runs on its own, unpadded: its forward
  pass and its decomposition, with torch's intra-op threads pinned to 1, so every reduction has one
  order fixed by the sequence's own shapes. The result bytes therefore do not depend on the thread
  count, the batch size or which other sequences are in the run. Parallelism is across sequences:
  `cpu_workers` threads (torch ops release the GIL) share one model whose capture hooks write to a
  thread-local sink.
- **Batched (GPU, or on request).** Right-padded batches through the forward pass and through
  `decompose_batch` (pads masked exactly), so short sequences do not launch thousands of tiny kernels.
  Results equal the per-sequence ones to float rounding (~1e-6), not bit for bit. On a GPU the batches
  are sized from the device's free memory and the shapes (`batched.batch_size`), nothing waits for the
  device inside a layer (errors too are computed there), and a batch's results reach the host in one
  transfer while the next batch runs (`batched.decompose_batches`, `host.HostCopy`); a caller may
  reduce each layer on the device instead of moving its maps (`decompose_batches`' ``reduce``).

On both paths each layer is decomposed inside the forward pass, as soon as it has run. A long sequence
on the deterministic path (one worker) is also *streamed*: its forward pass runs in a helper thread
that hands each layer's result over as soon as it is decomposed and waits until it is taken, so one
layer's maps are held at a time rather than every layer's (`chunks.streams`); ``maps_dtype=float16``
keeps the maps in half precision instead (half the memory, rounding stated in `decompose_sequences`).

`check_model` (``report-builder check``) reports those errors for a few sentences.

Pitfall: the reconstruction error is measured against the HF tensors of the *same* forward pass,
before anything is stripped or reordered.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator

import torch

from report_builder.decompose.chunks import streams
from report_builder.decompose.feedforward import IGOptions
from report_builder.decompose.layer import LayerResult
from report_builder.decompose.layouts import decompose_layer
from report_builder.engine.batched import (PARTS, Batch, BatchOut, batch_tensor, decompose_batches, held_bytes,
                                          keep_parts)
from report_builder.engine.common import Tokens, enforce_bound, half_maps, inputs, on_device
from report_builder.engine.stream import Stream
from report_builder.models.capture import Capturer, LayerCapture, capture_hooks
from report_builder.models.loading import LoadedModel
from report_builder.schema import ERROR_BOUND, FIRST_LAYER

__all__ = ["Batch", "BatchOut", "ERROR_BOUND", "PARTS", "Tokens", "batch_tensor", "check_model", "cpu_workers",
           "decompose_batches", "decompose_sequences", "reduce_sequences", "set_cpu_workers", "cpu_settings",
           "restore_cpu_settings"]

_CPU_WORKERS = 1
_half_maps = half_maps  # the name the tests know


def set_cpu_workers(n: int) -> int:
    """Use ``n`` worker threads across sequences on CPU and pin torch's intra-op threads to 1.

    Called once per build (``--threads``); results are identical for every ``n``. Returns ``n``.
    """
    global _CPU_WORKERS
    _CPU_WORKERS = max(1, int(n))
    torch.set_num_threads(1)
    return _CPU_WORKERS


def cpu_settings() -> tuple[int, int]:
    """torch's intra-op threads and the engine's worker threads now, for `restore_cpu_settings` after a build
    (a notebook's session goes on with the user's own thread count)."""
    return torch.get_num_threads(), _CPU_WORKERS


def restore_cpu_settings(settings: tuple[int, int]) -> None:
    """Put back what `cpu_settings` returned."""
    global _CPU_WORKERS
    torch.set_num_threads(settings[0])
    _CPU_WORKERS = settings[1]


def cpu_workers() -> int:
    """Worker threads the deterministic CPU path uses (see `set_cpu_workers`)."""
    return _CPU_WORKERS


def _prepare(lm: LoadedModel, seqs: Iterable[Tokens], layers: list[int] | None, check: bool,
             enforce: bool | Iterable[str]) -> tuple[list[Tokens], list[int], bool | frozenset]:
    """The sequences (lengths checked), the layer indices, and what to enforce (float32 only)."""
    seqs = list(seqs)
    for s in seqs:
        lm.check_length(len(s.input_ids))
    idxs = list(range(lm.n_layers)) if layers is None else list(layers)
    if not (lm.placement is not None and any(lm.placement.offloaded)):
        for i in idxs:  # fill the weight cache before any worker thread reads it
            lm.layer_weights(i)
    if not isinstance(enforce, bool):  # only these check points; carried down as the set itself
        enforce = frozenset(enforce)
    return seqs, idxs, check and lm.dtype == torch.float32 and enforce


def _compute_kw(lm: LoadedModel, maps, ratios, extras, ig, chunk_rule, precision) -> dict:
    """`decompose_layer`'s / `decompose_batch`'s options, with the chunk rule and precision mode (the
    model's by default, `loading.load_for`)."""
    return dict(maps=tuple(maps), ratios=ratios, extras=extras, ig=ig,
                chunk_rule=chunk_rule or getattr(lm, "chunk_rule", "auto"),
                precision=precision or getattr(lm, "precision", "float32"))


def decompose_sequences(
    lm: LoadedModel,
    seqs: Iterable[Tokens],
    *,
    layers: list[int] | None = None,
    maps: Iterable[str] = (),
    ratios: bool = False,
    extras: bool = False,
    check: bool = True,
    enforce: bool | Iterable[str] = True,
    ig: IGOptions = IGOptions(),
    batch_size: int | None = None,
    budget_bytes: int = 512 << 20,
    on_batch: Callable[[int], None] | None = None,
    batched: bool | None = None,
    workers: int | None = None,
    maps_dtype: torch.dtype | None = None,
    stream: bool | None = None,
    returns: Iterable[str] = PARTS,
    chunk_rule: str | None = None,
    precision: str | None = None,
) -> Iterator[tuple[int, int, LayerResult]]:
    """Yield ``(seq_index, layer, LayerResult)`` for every sequence and layer: in input order on the
    deterministic path, batch by batch (sequences grouped by length, ties in input order) on the
    batched one.

    Args:
        lm: a loaded model. seqs: the sequences (unpadded).
        layers: layer indices (default: all). maps, ratios, extras, ig: see `decompose_layer`.
        check: compare with the HF tensors (``LayerResult.errors``).
        enforce: raise `ReconstructionError` above the precision mode's bound (`schema.PRECISIONS`;
            float32: `schema.ERROR_BOUND`; a model stored in half precision has its errors reported, not
            enforced): True at every check point, or only at the check points named (e.g.
            `Layout.pre_ff_checks` under a numerical IG, which is not complete).
        batch_size: at most this many sequences per padded batch on the batched path (None: on a GPU
            as many as its free memory holds, `batched.batch_size`; on the CPU `batched.CPU_BATCH`).
            The deterministic path runs each sequence alone, so the batch size cannot change its results.
        budget_bytes: memory budget of the FF chunk loop, shared by the concurrent sequences/batch.
        on_batch: called with the number of sequences finished (progress).
        batched: the padded batched path (default: on any device but the CPU).
        workers: worker threads of the deterministic path (default `cpu_workers`).
        maps_dtype: keep the maps in this dtype, converted as soon as each layer is decomposed.
            ``torch.float16`` halves their memory; its rounding: relative error <= 2^-11 (4.9e-4) for
            values in float16's normal range [2^-14, 65504], absolute error <= 2^-25 (3e-8) below
            (tested); a map with a value above 65504 stays float32 (never infinite). None: float32.
        stream: the deterministic path with one worker yields each layer's result as soon as it is
            decomposed (the forward pass in a helper thread; results identical), holding one layer's
            maps at a time instead of a whole sequence's. Default: for sequences whose maps for all
            layers would exceed `chunks.STREAM_BYTES` (`chunks.streams`).
        returns: the batched path moves only these parts of each result to the host (`PARTS`: maps,
            ratios, sums, extras, bias; the errors always); the others are left empty. The
            deterministic path computes on the host and returns every part.
        chunk_rule: the FF step's device class, ``auto``/``cpu``/``gpu`` (`decompose.chunks`; default the
            model's, ``lm.chunk_rule``). precision: the pair-GEMM mode (`schema.PRECISIONS`; default
            ``lm.precision``). Causality is the model's own (``lm.causal``; the reconstruction check would
            catch probabilities that are not: the FF sums would miss the pairs above the diagonal).
    """
    seqs, idxs, enforce = _prepare(lm, seqs, layers, check, enforce)
    if lm.placement is not None and any(lm.placement.offloaded):
        workers = 1  # the forward pass swaps offloaded weights in and out: one pass at a time
    kw = _compute_kw(lm, maps, ratios, extras, ig, chunk_rule, precision)
    if maps_dtype is not None and maps_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"maps_dtype: float32, float16 or bfloat16, not {maps_dtype}")
    maps_dtype = None if maps_dtype == torch.float32 else maps_dtype
    if batched is None:
        batched = lm.device.type != "cpu"
    if batched:
        parts = tuple(p for p in PARTS if p in set(returns))
        if set(returns) - set(PARTS):
            raise ValueError(f"returns: parts of a LayerResult ({', '.join(PARTS)}), "
                             f"not {sorted(set(returns) - set(PARTS))}")
        reduce, unpack = keep_parts(parts)
        longest = max((len(s.input_ids) for s in seqs), default=0)
        held = held_bytes(lm, longest, parts, len(kw["maps"]), ratios, extras)
        for out in decompose_batches(lm, seqs, idxs, kw, reduce=reduce, check=check, enforce=enforce,
                                     batch_size_cap=batch_size, budget_bytes=budget_bytes, held_per_layer=held,
                                     on_batch=on_batch):
            for k, layer, r in unpack(out):
                yield k, layer, half_maps(r, maps_dtype)
    else:
        workers = workers or _CPU_WORKERS
        if stream is None:
            stream = workers == 1 and streams(max((len(s.input_ids) for s in seqs), default=0), len(idxs),
                                             len(kw["maps"]), 2 if maps_dtype is not None else 4)
        kw["maps_dtype"] = maps_dtype
        yield from _deterministic(lm, seqs, idxs, kw, check, enforce, budget_bytes, on_batch,
                                  1 if stream else workers, stream)


def reduce_sequences(
    lm: LoadedModel,
    seqs: Iterable[Tokens],
    reduce: Callable[[Batch, int, list[LayerResult]], dict[str, torch.Tensor]],
    *,
    layers: list[int] | None = None,
    maps: Iterable[str] = (),
    ratios: bool = False,
    extras: bool = False,
    check: bool = True,
    enforce: bool | Iterable[str] = True,
    ig: IGOptions = IGOptions(),
    batch_size: int | None = None,
    budget_bytes: int = 512 << 20,
    reduce_bytes: int = 0,
    on_batch: Callable[[int], None] | None = None,
) -> Iterator[BatchOut]:
    """The batched path with a ``reduce`` step on the device instead of the results on the host: yields
    a `BatchOut` per batch (``reduce``'s tensors per layer, on the host; each sequence's errors).

    ``reduce(batch, layer, results)`` runs right after each layer is decomposed, on that layer's device
    (the results as `decompose_batch` gave them); ``reduce_bytes``: the device bytes per sequence it
    needs while it runs (the batches are sized with it). Other arguments as in `decompose_sequences`.
    On the CPU the same code runs on CPU tensors (batches of `batched.CPU_BATCH` unless ``batch_size``).
    """
    seqs, idxs, enforce = _prepare(lm, seqs, layers, check, enforce)
    kw = _compute_kw(lm, maps, ratios, extras, ig, None, None)
    yield from decompose_batches(lm, seqs, idxs, kw, reduce=reduce, check=check, enforce=enforce,
                                 batch_size_cap=batch_size, budget_bytes=budget_bytes, reduce_bytes=reduce_bytes,
                                 on_batch=on_batch)


def _to_cpu(r: LayerResult) -> LayerResult:
    """A result moved off its layer's device (a device map's layer on a GPU under a CPU main device)."""
    mv = lambda d: {k: v.cpu() for k, v in d.items()}  # noqa: E731
    return LayerResult(maps=mv(r.maps), ratios=mv(r.ratios), sums=mv(r.sums), errors=dict(r.errors),
                       extras=mv(r.extras), bias=mv(r.bias))


def _layer_step(lm: LoadedModel, idxs: list[int], decompose: Callable, emit: Callable | None = None) -> Callable:
    """The per-layer step run inside the forward pass (`capture_hooks`' ``on_layer``): layer ``idxs[pos]``
    decomposed on its own device right after it ran, its captured tensors dropped, the result on the CPU
    when that device is not the CPU; handed to ``emit`` (streaming) or returned."""
    def step(pos: int, c: LayerCapture):
        layer = idxs[pos]
        dev = lm.layer_device(layer)
        out = decompose(layer, lm.layer_weights(layer), on_device(c, dev))
        del c
        if dev.type != "cpu":
            out = [(layer, _to_cpu(r)) for layer, r in out]
        if emit is None:
            return out
        for item in out:
            emit(*item)
        return None
    return step


def _one(cap: Capturer, lm: LoadedModel, seqs: list[Tokens], k: int) -> list[tuple[int, LayerResult]]:
    """Forward pass and decomposition of sequence ``k`` alone (unpadded): every layer's result."""
    return [x for per_layer in cap.run(inputs(lm, seqs, [k])) for x in per_layer]


def _deterministic(lm, seqs, idxs, kw, check, enforce, budget_bytes, on_batch, workers, stream=False):
    workers = max(1, min(workers, len(seqs)))
    budget = max(1, budget_bytes // workers)
    kw = dict(kw)
    maps_dtype = kw.pop("maps_dtype", None)

    def decompose(layer, lw, c):
        refs = {name: t[0] for name, t in c.refs.items()} if check else None
        r = decompose_layer(lw, c.x[0], c.alpha[0], refs=refs, budget_bytes=budget, causal=lm.causal, **kw)
        if enforce:
            enforce_bound(lm, layer, r.errors, enforce, kw["precision"])
        return [(layer, half_maps(r, maps_dtype))]

    st = Stream() if stream else None
    prev = torch.get_num_threads()
    torch.set_num_threads(1)  # one reduction order per op, whatever the machine
    try:
        with capture_hooks(lm.model, lm.adapter, idxs,
                           on_layer=_layer_step(lm, idxs, decompose, st.emit if st else None)) as cap:
            if st is not None:
                yield from st.run(cap, lm, seqs, on_batch)
                return
            args = (cap, lm, seqs)
            if workers == 1:
                for k in range(len(seqs)):
                    for layer, r in _one(*args, k):
                        yield k, layer, r
                    if on_batch is not None:
                        on_batch(1)
                return
            ex = ThreadPoolExecutor(workers, thread_name_prefix="decompose",
                                    initializer=torch.set_num_threads, initargs=(1,))
            try:
                pending: deque = deque()
                nxt = 0
                for k in range(len(seqs)):
                    while nxt < len(seqs) and len(pending) < 2 * workers:  # bounded look-ahead (memory)
                        pending.append(ex.submit(_one, *args, nxt))
                        nxt += 1
                    for layer, r in pending.popleft().result():
                        yield k, layer, r
                    if on_batch is not None:
                        on_batch(1)
            finally:
                ex.shutdown(wait=True, cancel_futures=True)
    finally:
        torch.set_num_threads(prev)


def check_model(source: str, texts: list[str] | None = None, *, device: str = "cpu",
                dtype: str = "float32", chunk_rule: str = "auto") -> list[dict]:
    """Decompose a few sentences with the model at ``source`` and return the max relative
    reconstruction error per layer and check point (``report-builder check``; nothing enforced).

    ``dtype``: a precision mode (`schema.PRECISIONS`: the model in float32, the pair GEMMs in the mode);
    ``chunk_rule``: auto, cpu or gpu. Rows are ``{model, layer, scope, max_rel_error}`` with ``layer``
    counted from 1 (SPEC §8), as a user reads layers everywhere else."""
    from report_builder.models import loading
    from report_builder.schema import precision as precision_mode

    lm = loading.load(source, device=device, dtype="float32")
    lm.precision, lm.chunk_rule = precision_mode(dtype).id, chunk_rule
    texts = texts or ["The man went to the store. He bought a gallon of milk.",
                      "Residual connections and layer normalisation shrink the mixing of tokens."]
    tok = lm.tokenizer
    seqs = []
    for k, t in enumerate(texts, 1):
        enc = tok(t, verbose=False)
        if len(enc["input_ids"]) > lm.max_positions():  # `check` has no dataset max_length to advise
            from report_builder.errors import UsageError, for_terminal, option

            raise UsageError(f"{option('texts')}: text {k} has {len(enc['input_ids'])} tokens, more than "
                             f"{for_terminal(lm.name)}'s {lm.max_positions()} positions; give a shorter text")
        seqs.append(Tokens(enc["input_ids"], enc.get("token_type_ids")))
    rows: dict[tuple[int, str], float] = {}
    scopes = lm.layer_weights(0).scopes
    for _, layer, r in decompose_sequences(lm, seqs, maps=scopes, ratios=True, enforce=False):
        for s, e in r.errors.items():
            rows[(layer, s)] = max(rows.get((layer, s), 0.0), e)
    order = lm.layer_weights(0).checks
    return [dict(model=source, layer=l + FIRST_LAYER, scope=s, max_rel_error=rows[(l, s)])
            for l in range(lm.n_layers) for s in order if (l, s) in rows]
