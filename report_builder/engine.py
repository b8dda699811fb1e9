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
  Results equal the per-sequence ones to float rounding (~1e-6), not bit for bit.

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

import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch

from report_builder.decompose.chunks import streams
from report_builder.decompose.feedforward import IGOptions
from report_builder.decompose.layer import LayerResult
from report_builder.decompose.layouts import decompose_batch, decompose_layer
from report_builder.models.capture import Capturer, LayerCapture, capture_hooks
from report_builder.errors import ReconstructionError
from report_builder.models.loading import LoadedModel
from report_builder.schema import FIRST_LAYER, precision as precision_mode

_CPU_WORKERS = 1


def set_cpu_workers(n: int) -> int:
    """Use ``n`` worker threads across sequences on CPU and pin torch's intra-op threads to 1.

    Called once per build (``--threads``); results are identical for every ``n``. Returns ``n``.
    """
    global _CPU_WORKERS
    _CPU_WORKERS = max(1, int(n))
    torch.set_num_threads(1)
    return _CPU_WORKERS


def cpu_workers() -> int:
    """Worker threads the deterministic CPU path uses (see `set_cpu_workers`)."""
    return _CPU_WORKERS


@dataclass(frozen=True)
class Tokens:
    """One sequence to analyse: token ids and (encoders) token type ids."""

    input_ids: Sequence[int]
    token_type_ids: Sequence[int] | None = None


def _batches(seqs: list[Tokens], size: int) -> Iterator[list[int]]:
    # group by length so padding stays small; results are put back in input order by the caller
    order = sorted(range(len(seqs)), key=lambda k: len(seqs[k].input_ids))
    for s in range(0, len(order), size):
        yield order[s:s + size]


def _pad_id(lm: LoadedModel) -> int:
    tok = lm.tokenizer
    pid = getattr(tok, "pad_token_id", None)
    if pid is None:
        pid = getattr(lm.config, "pad_token_id", None)
    return int(pid) if pid is not None else 0


def _inputs(lm: LoadedModel, seqs: list[Tokens], group: list[int]) -> dict[str, torch.Tensor]:
    """Right-padded input tensors for ``group`` (a batch of one is exactly the unpadded sequence)."""
    n_max = max(len(seqs[k].input_ids) for k in group)
    ids = torch.full((len(group), n_max), _pad_id(lm), dtype=torch.long)
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
    inputs = {"input_ids": ids.to(dev), "attention_mask": mask.to(dev)}
    if tt is not None:
        inputs["token_type_ids"] = tt.to(dev)
    return inputs


def _enforce(lm: LoadedModel, layer: int, r: LayerResult, points: bool | frozenset = True,
             mode: str = "float32") -> None:
    """The one error-bound check: every check point (``points`` True) or only those named, against the
    precision mode's bound (`schema.PRECISIONS`)."""
    bound = precision_mode(mode).bound
    for scope, err in r.errors.items():
        if (points is True or scope in points) and not err <= bound:
            raise ReconstructionError(
                f"{lm.name}: layer {layer}, scope {scope}: relative reconstruction error "
                f"{err:.3g} exceeds {bound:g}" + ("" if mode == "float32" else f" (the {mode} bound)"))


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
    batch_size: int = 8,
    budget_bytes: int = 512 << 20,
    on_batch: Callable[[int], None] | None = None,
    batched: bool | None = None,
    workers: int | None = None,
    maps_dtype: torch.dtype | None = None,
    stream: bool | None = None,
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
            a model stored in half precision has its errors reported, not enforced): True at every check
            point, or only at the check points named (e.g. `Layout.pre_ff_checks` under a numerical IG,
            which is not complete).
        batch_size: sequences per padded batch on the batched path (the deterministic path runs
            each sequence alone, so the batch size cannot change its results).
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
        chunk_rule: the FF step's device class, ``auto``/``cpu``/``gpu`` (`decompose.chunks`; default:
            the model's, ``lm.chunk_rule``). precision: the pair-GEMM mode (`schema.PRECISIONS`; default
            ``lm.precision``). Causality is the model's (``lm.causal``), checked once per layer with
            the errors.
    """
    seqs = list(seqs)
    for s in seqs:
        lm.check_length(len(s.input_ids))
    idxs = list(range(lm.n_layers)) if layers is None else list(layers)
    if lm.placement is not None and any(lm.placement.offloaded):
        workers = 1  # the forward pass swaps offloaded weights in and out: one pass at a time
    else:
        for i in idxs:  # fill the weight cache before any worker thread reads it
            lm.layer_weights(i)
    if not isinstance(enforce, bool):  # only these check points; carried down as the set itself
        enforce = frozenset(enforce)
    enforce = check and lm.dtype == torch.float32 and enforce
    mode = precision or getattr(lm, "precision", "float32")
    kw = dict(maps=tuple(maps), ratios=ratios, extras=extras, ig=ig, causal=lm.causal, precision=mode,
              chunk_rule=chunk_rule or getattr(lm, "chunk_rule", "auto"))
    if maps_dtype is not None and maps_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"maps_dtype: float32, float16 or bfloat16, not {maps_dtype}")
    kw["maps_dtype"] = None if maps_dtype == torch.float32 else maps_dtype
    if batched is None:
        batched = lm.device.type != "cpu"
    if batched:
        yield from _batched(lm, seqs, idxs, kw, check, enforce, batch_size, budget_bytes, on_batch)
    else:
        workers = workers or _CPU_WORKERS
        if stream is None:
            stream = workers == 1 and streams(max((len(s.input_ids) for s in seqs), default=0), len(idxs),
                                             len(kw["maps"]), 2 if kw["maps_dtype"] is not None else 4)
        yield from _deterministic(lm, seqs, idxs, kw, check, enforce, budget_bytes, on_batch,
                                  1 if stream else workers, stream)


def _to_cpu(r: LayerResult) -> LayerResult:
    """A result moved off its layer's device, so a batch's results never pile up on a GPU."""
    mv = lambda d: {k: v.cpu() for k, v in d.items()}  # noqa: E731
    return LayerResult(maps=mv(r.maps), ratios=mv(r.ratios), sums=mv(r.sums), errors=dict(r.errors),
                       extras=mv(r.extras), bias=mv(r.bias))


def _on_device(c: LayerCapture, dev: torch.device) -> LayerCapture:
    """A capture's tensors on ``dev`` (no copy where they already are: always, on one device)."""
    return LayerCapture(x=c.x.to(dev), alpha=c.alpha.to(dev), refs={k: t.to(dev) for k, t in c.refs.items()})


def _half_maps(r: LayerResult, dtype: torch.dtype | None) -> LayerResult:
    """The result with its maps in ``dtype`` (float16: a map with a value above its range stays float32)."""
    if dtype is None:
        return r
    for k, m in r.maps.items():
        if dtype != torch.float16 or not bool((m.abs() > torch.finfo(torch.float16).max).any()):
            r.maps[k] = m.to(dtype)
    return r


def _layer_step(lm: LoadedModel, idxs: list[int], decompose: Callable, emit: Callable | None = None) -> Callable:
    """The per-layer step run inside the forward pass (`capture_hooks`' ``on_layer``): layer ``idxs[pos]``
    decomposed on its own device right after it ran, its captured tensors dropped, the result on the CPU
    when that device is not the CPU; handed to ``emit`` (streaming) or returned."""
    def step(pos: int, c: LayerCapture):
        layer = idxs[pos]
        dev = lm.layer_device(layer)
        out = decompose(layer, lm.layer_weights(layer), _on_device(c, dev))
        del c
        if dev.type != "cpu":
            out = [(layer, _to_cpu(r)) for layer, r in out]
        if emit is None:
            return out
        for item in out:
            emit(*item)
        return None
    return step


class _Stopped(BaseException):
    """Raised in the streaming thread's forward pass once the reader has stopped (never escapes)."""


class _Stream:
    """Results handed from a forward pass in a helper thread to the reader, one at a time: the thread
    waits until its last result is taken, and stops (`_Stopped` inside the forward pass) once the
    reader has gone."""

    def __init__(self):
        self.q: queue.Queue = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.seq = 0

    def put(self, item: tuple) -> None:
        while True:
            if self.stop.is_set():
                raise _Stopped
            try:
                self.q.put(item, timeout=0.05)
                return
            except queue.Full:
                pass

    def emit(self, layer: int, r: LayerResult) -> None:
        self.put(("layer", self.seq, layer, r))

    def run(self, cap: Capturer, lm: LoadedModel, seqs: list[Tokens], on_batch) -> Iterator:
        def work():
            torch.set_num_threads(1)  # the deterministic path's one reduction order, in this thread too
            try:
                for k in range(len(seqs)):
                    self.seq = k
                    cap.run(_inputs(lm, seqs, [k]))
                    self.put(("seq", k, None, None))
                self.put(("end", None, None, None))
            except _Stopped:
                return
            except BaseException as e:  # noqa: BLE001 - re-raised in the reader's thread, as itself
                try:
                    self.put(("error", e, None, None))
                except _Stopped:
                    pass

        th = threading.Thread(target=work, name="decompose-stream", daemon=True)
        th.start()
        try:
            while True:
                kind, a, b, c = self.q.get()
                if kind == "layer":
                    yield a, b, c
                elif kind == "seq":
                    if on_batch is not None:
                        on_batch(1)
                elif kind == "error":
                    raise a
                else:
                    return
        finally:
            self.stop.set()
            th.join()


def _one(cap: Capturer, lm: LoadedModel, seqs: list[Tokens], k: int) -> list[tuple[int, LayerResult]]:
    """Forward pass and decomposition of sequence ``k`` alone (unpadded): every layer's result."""
    return [x for per_layer in cap.run(_inputs(lm, seqs, [k])) for x in per_layer]


def _deterministic(lm, seqs, idxs, kw, check, enforce, budget_bytes, on_batch, workers, stream=False):
    workers = max(1, min(workers, len(seqs)))
    budget = max(1, budget_bytes // workers)
    kw = dict(kw)
    maps_dtype = kw.pop("maps_dtype", None)

    def decompose(layer, lw, c):
        refs = {name: t[0] for name, t in c.refs.items()} if check else None
        r = decompose_layer(lw, c.x[0], c.alpha[0], refs=refs, budget_bytes=budget, **kw)
        if enforce:
            _enforce(lm, layer, r, enforce, kw["precision"])
        return [(layer, _half_maps(r, maps_dtype))]

    st = _Stream() if stream else None
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


def _batched(lm, seqs, idxs, kw, check, enforce, batch_size, budget_bytes, on_batch):
    lengths: list[int] = []
    kw = dict(kw)
    maps_dtype = kw.pop("maps_dtype", None)

    def decompose(layer, lw, c):
        rs = decompose_batch(lw, c.x, c.alpha, lengths, refs=c.refs if check else None,
                             budget_bytes=budget_bytes, **kw)
        if enforce:
            for r in rs:
                _enforce(lm, layer, r, enforce, kw["precision"])
        return [(layer, _half_maps(r, maps_dtype)) for r in rs]

    with capture_hooks(lm.model, lm.adapter, idxs, on_layer=_layer_step(lm, idxs, decompose)) as cap:
        for group in _batches(seqs, batch_size):
            lengths[:] = [len(seqs[k].input_ids) for k in group]
            per_layer = cap.run(_inputs(lm, seqs, group))  # per layer: [(layer, result of sequence b)]
            for b, k in enumerate(group):
                for results in per_layer:
                    layer, r = results[b]
                    yield k, layer, r
            del per_layer
            if on_batch is not None:
                on_batch(len(group))


def check_model(source: str, texts: list[str] | None = None, *, device: str = "cpu",
                dtype: str = "float32", chunk_rule: str = "auto") -> list[dict]:
    """Decompose a few sentences with the model at ``source`` and return the max relative
    reconstruction error per layer and check point (``report-builder check``; nothing enforced).

    ``dtype``: a precision mode (`schema.PRECISIONS`: the model in float32, the pair GEMMs in the mode).
    Rows are ``{model, layer, scope, max_rel_error}`` with ``layer`` counted from 1 (SPEC §8), as a
    user reads layers everywhere else."""
    from report_builder.models import loading

    lm = loading.load(source, device=device, dtype="float32")
    lm.precision, lm.chunk_rule = precision_mode(dtype).id, chunk_rule
    texts = texts or ["The man went to the store. He bought a gallon of milk.",
                      "Residual connections and layer normalisation shrink the mixing of tokens."]
    tok = lm.tokenizer
    seqs = []
    for t in texts:
        enc = tok(t)
        seqs.append(Tokens(enc["input_ids"], enc.get("token_type_ids")))
    rows: dict[tuple[int, str], float] = {}
    scopes = lm.layer_weights(0).scopes
    for _, layer, r in decompose_sequences(lm, seqs, maps=scopes, ratios=True, enforce=False):
        for s, e in r.errors.items():
            rows[(layer, s)] = max(rows.get((layer, s), 0.0), e)
    order = lm.layer_weights(0).checks
    return [dict(model=source, layer=l + FIRST_LAYER, scope=s, max_rel_error=rows[(l, s)])
            for l in range(lm.n_layers) for s in order if (l, s) in rows]
