"""The benchmark's short-input case: 16 sentences of 8-20 tokens, the engine against the naive formulas.

Short inputs are where per-call work, not arithmetic, dominates: each method runs over the same 16
random sequences (lengths seeded, 8-20 tokens) for the timed layers, side by side and interleaved:

- ``naive_*``: `bench.naive.naive_k21` (ratios; maps) and `reference_layer` + `reference_maps` (full
  layer), one sequence at a time, as the K21 authors' and DecompX's code run;
- ``fast_*_b1``: the engine one sequence at a time (`decompose_layer`, the deterministic path's call);
- ``fast_*_batched``: the engine on the padded batch of 16 (`decompose_batch`, the batched path's call).

Ratios are naive / engine (> 1: the engine is faster). Pitfall: the sequences come from one padded
forward pass; a real token's inputs there equal its unpadded forward's to float rounding. `bench.run`
times it on the first timed layer only, without a warm-up (medians over the repeats).
"""
from __future__ import annotations

import statistics

import torch

from report_builder.bench.timing import time_call
from report_builder.schema import K21_METHODS

N_SEQS = 16
LENGTHS = (8, 20)
K21_N_MAPS = ("ATTN-N", "ATTNRES-N", "ATTNRESLN-N")
"""K21's norm-based maps: what the engine computes that the naive K21 formulas time against (`bench.run` too)."""
CASES = (("k21_ratios", "K21 ratios", "fast_ratios", "naive_k21_ratios"),
         ("k21_maps", "K21 maps", "fast_k21_maps", "naive_k21_maps"),
         ("full_layer", "full layer", "fast_full", "naive_full"))
"""(key, label, the engine's method, the naive method) of each timed case."""


def short_lengths(n_seqs: int = N_SEQS, seed: int = 0) -> list[int]:
    """Seeded lengths in `LENGTHS` (inclusive)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(LENGTHS[0], LENGTHS[1] + 1, (n_seqs,), generator=g).tolist()


def run_short(lm, layers: list[int], *, device: str, repeats: int, naive: bool = True, precision: str = "float32",
              chunk_rule: str = "auto", seed: int = 0) -> dict:
    """Time the short-input case on ``layers``; seconds are per layer for all 16 sequences (medians)."""
    from report_builder.bench.naive import naive_k21
    from report_builder.bench.shapes import capture_layers
    from report_builder.decompose.layouts import decompose_batch, decompose_layer
    from report_builder.decompose.reference import reference_layer, reference_maps

    lengths = short_lengths(seed=seed)
    n_max = max(lengths)
    vocab = int(lm.config.vocab_size)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(min(100, vocab // 2), vocab, (len(lengths), n_max), generator=g)
    mask = (torch.arange(n_max)[None, :] < torch.tensor(lengths)[:, None]).long()
    inputs = {"input_ids": ids.to(lm.device), "attention_mask": mask.to(lm.device)}
    kw = dict(causal=lm.causal, chunk_rule=chunk_rule, precision=precision)
    with torch.no_grad():
        caps = capture_layers(lm, inputs, layers)
        lws = [lm.layer_weights(i) for i in layers]
        one = [(lw, c.x[b, :n], c.alpha[b, :, :n, :n], {k: t[b, :n] for k, t in c.refs.items()})
               for lw, c in zip(lws, caps) for b, n in enumerate(lengths)]

        def b1(**a):
            return lambda: [decompose_layer(lw, x, al, **a, **kw) for lw, x, al, _ in one]

        def batched(**a):
            return lambda: [decompose_batch(lw, c.x, c.alpha, lengths, **a, **kw) for lw, c in zip(lws, caps)]

        full = dict(ratios=True)
        methods = {
            "fast_ratios_b1": b1(ratios=True), "fast_ratios_batched": batched(ratios=True),
            "fast_k21_maps_b1": b1(maps=K21_N_MAPS), "fast_k21_maps_batched": batched(maps=K21_N_MAPS),
            "fast_full_b1": lambda: [decompose_layer(lw, x, al, maps=lw.scopes + K21_METHODS, refs=r, **full, **kw)
                                     for lw, x, al, r in one],
            "fast_full_batched": lambda: [decompose_batch(lw, c.x, c.alpha, lengths, maps=lw.scopes + K21_METHODS,
                                                          refs=c.refs, **full, **kw) for lw, c in zip(lws, caps)],
        }
        if naive:
            methods.update({
                "naive_k21_ratios": lambda: [naive_k21(lw, x, al, maps=False, ratios=True) for lw, x, al, _ in one],
                "naive_k21_maps": lambda: [naive_k21(lw, x, al, maps=True) for lw, x, al, _ in one],
                "naive_full": lambda: [reference_maps(reference_layer(lw, x, al, ig="closed")) for lw, x, al, _ in one],
            })
        for fn in methods.values():  # warm-up: a first call builds per-shape caches (`--repeats 1` timed it)
            fn()
        raw: dict[str, list[float]] = {k: [] for k in methods}
        for _ in range(max(1, repeats)):
            for k, fn in methods.items():
                raw[k].append(time_call(fn, device))
    per_layer = {k: statistics.median(v) / len(layers) for k, v in raw.items()}
    speedup = {}
    for what, _, fast, slow in CASES:
        for how in ("b1", "batched"):
            if slow in per_layer:
                speedup[f"{what}_{how}"] = per_layer[slow] / per_layer[f"{fast}_{how}"]
    return {"n_seqs": len(lengths), "lengths": lengths, "tokens": sum(lengths), "seconds_per_layer": per_layer,
            "seconds_raw": raw, "speedup_vs_naive": speedup,
            "what": "16 random sequences of 8-20 tokens; per layer for all of them (medians); speedup = naive / engine"}


def format_short(r: dict) -> list[str]:
    """The short-input case's lines of the text report."""
    pl, sp = r["seconds_per_layer"], r["speedup_vs_naive"]
    lines = [f"short inputs: {r['n_seqs']} sequences of {min(r['lengths'])}-{max(r['lengths'])} tokens "
             f"({r['tokens']} tokens), s/layer for all of them; engine one at a time (b1) and as one padded batch"]
    for key, what, fast, slow in CASES:
        naive = f"naive {pl[slow]:.4f}" if slow in pl else "naive skipped"
        parts = [f"b1 {pl[fast + '_b1']:.4f}" + (f" ({sp[key + '_b1']:.1f}x)" if key + "_b1" in sp else ""),
                 f"batched {pl[fast + '_batched']:.4f}" + (f" ({sp[key + '_batched']:.1f}x)" if key + "_batched" in sp
                                                           else "")]
        lines.append(f"  {what:<11} {naive}; engine " + ", ".join(parts))
    return lines
