"""The bridge from a loaded model and token ids to per-sequence, per-layer decompositions.

Runs the real forward pass in right-padded batches (capturing each layer's input, attention
probabilities and check-point tensors), then decomposes each sequence with its padding stripped,
so padding never changes the maps of real tokens. Pitfall: the reconstruction error is measured
against the HF tensors of the *same* forward pass, before anything is stripped or reordered.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import torch

from report_builder.decompose.feedforward import IGOptions
from report_builder.decompose.layer import LayerResult, decompose_layer
from report_builder.models.capture import forward_capture
from report_builder.errors import ReconstructionError
from report_builder.models.loading import LoadedModel

ERROR_BOUND = 1e-4


@dataclass(frozen=True)
class Tokens:
    """One sequence to analyse: token ids and (encoders) token type ids."""

    input_ids: Sequence[int]
    token_type_ids: Sequence[int] | None = None


def _batches(seqs: list[Tokens], size: int) -> Iterator[list[int]]:
    # group by length so padding stays small, but keep results in input order for the caller
    order = sorted(range(len(seqs)), key=lambda k: len(seqs[k].input_ids))
    for s in range(0, len(order), size):
        yield order[s:s + size]


def _pad_id(lm: LoadedModel) -> int:
    tok = lm.tokenizer
    pid = getattr(tok, "pad_token_id", None)
    if pid is None:
        pid = getattr(lm.config, "pad_token_id", None)
    return int(pid) if pid is not None else 0


def decompose_sequences(
    lm: LoadedModel,
    seqs: Iterable[Tokens],
    *,
    layers: list[int] | None = None,
    maps: Iterable[str] = (),
    ratios: bool = False,
    extras: bool = False,
    check: bool = True,
    enforce: bool = True,
    ig: IGOptions = IGOptions(),
    batch_size: int = 8,
    budget_bytes: int = 512 << 20,
    on_batch: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, int, LayerResult]]:
    """Yield ``(seq_index, layer, LayerResult)`` for every sequence and layer.

    Args:
        lm: a loaded model. seqs: the sequences (unpadded).
        layers: layer indices (default: all). maps, ratios, extras, ig: see `decompose_layer`.
        check: compare with the HF tensors (``LayerResult.errors``).
        enforce: raise `ReconstructionError` above `ERROR_BOUND` (``float32`` only; for half
            precision errors are reported, not enforced).
        on_batch: called with the number of sequences finished after each batch (progress).
    """
    seqs = list(seqs)
    for s in seqs:
        lm.check_length(len(s.input_ids))
    idxs = list(range(lm.n_layers)) if layers is None else list(layers)
    maps = tuple(maps)
    dev = lm.device
    pad = _pad_id(lm)
    enforce = enforce and lm.dtype == torch.float32
    for group in _batches(seqs, batch_size):
        n_max = max(len(seqs[k].input_ids) for k in group)
        ids = torch.full((len(group), n_max), pad, dtype=torch.long)
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
        inputs = {"input_ids": ids.to(dev), "attention_mask": mask.to(dev)}
        if tt is not None:
            inputs["token_type_ids"] = tt.to(dev)
        caps = forward_capture(lm.model, lm.adapter, inputs, idxs)
        for b, k in enumerate(group):
            n = len(seqs[k].input_ids)
            for cap, layer in zip(caps, idxs):
                lw = lm.layer_weights(layer)
                refs = {name: t[b, :n] for name, t in cap.refs.items()} if check else None
                r = decompose_layer(lw, cap.x[b, :n], cap.alpha[b, :, :n, :n], maps=maps, ratios=ratios,
                                    refs=refs, extras=extras, ig=ig, budget_bytes=budget_bytes)
                if check and enforce:
                    for scope, err in r.errors.items():
                        if not err <= ERROR_BOUND:
                            raise ReconstructionError(
                                f"{lm.name}: layer {layer}, scope {scope}: relative reconstruction error "
                                f"{err:.3g} exceeds {ERROR_BOUND:g}")
                yield k, layer, r
        del caps
        if on_batch is not None:
            on_batch(len(group))
