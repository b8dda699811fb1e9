"""K21 analyses on a loaded model: per-token mixing ratios, frequency table, expansion rates, example maps.

Each function is pure in its inputs (model, encoded sequences, parameters) and returns tidy tables
(see ARCHITECTURE.md). Pitfall: the frequency analysis must get **unmasked** inputs; the mixing
analysis gets the K21-masked ones (encoders) — the caller decides, these functions never mask.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from report_builder.data.encode import EncodedSeq
from report_builder.analyses.inputs import tokens_of
from report_builder.schema import K21_METHODS, RECON_ERRORS
from report_builder.stats import k21_tables
from report_builder.stats.k21_tables import TokenRows

if TYPE_CHECKING:  # pragma: no cover - torch is imported by the functions that compute (a cached build never does)
    from report_builder.models.loading import LoadedModel


def errors_frame(model: str, dataset: str, rows: dict[tuple[int, str], float]) -> pd.DataFrame:
    """``recon_errors`` rows from a {(layer, scope): max error} dict."""
    return pd.DataFrame([dict(model=model, dataset=dataset, layer=l, scope=s, max_rel_error=e)
                         for (l, s), e in sorted(rows.items())],
                        columns=RECON_ERRORS)


def max_errors(model: str, dataset: str, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """``recon_errors`` of several ranges of sequences: the maximum per (layer, scope)."""
    rows: dict[tuple[int, str], float] = {}
    for f in frames:
        for l, s, v in zip(f["layer"], f["scope"], f["max_rel_error"]):
            rows[(int(l), str(s))] = max(rows.get((int(l), str(s)), 0.0), float(v))
    return errors_frame(model, dataset, rows)


def mixing_ratios(lm: LoadedModel, encoded: list[EncodedSeq], *, model: str, dataset: str,
                  batch_size: int | None = None, budget_bytes: int = 512 << 20,
                  on_batch: Callable[[int], None] | None = None, batched: bool | None = None) -> dict[str, pd.DataFrame]:
    """Per-token context-mixing ratios of the five K21 methods at every layer.

    On the engine's batched path (a GPU; ``batched``) only the ratios and errors reach the host, once per
    batch; ``batch_size``: at most this many sequences per batch there (None: as the engine sizes them).

    Returns:
        ``k21_tokens``: model, dataset, seq, layer, pos, token, category, and one column per method
        (percent); ``recon_errors``: max relative error per layer and checked scope.
    """
    from report_builder.engine import decompose_sequences

    rows = TensorRows()
    errs: dict[tuple[int, str], float] = {}
    for k, layer, r in decompose_sequences(lm, tokens_of(encoded), ratios=True, batch_size=batch_size,
                                           budget_bytes=budget_bytes, on_batch=on_batch, batched=batched,
                                           returns=("ratios",)):
        rows.add(encoded[k], layer, r.ratios)
        for s, v in r.errors.items():
            errs[(layer, s)] = max(errs.get((layer, s), 0.0), v)
    df = rows.frame(model, dataset)
    assert len(rows.layers) in (0, lm.n_layers)
    return {"k21_tokens": df, "recon_errors": errors_frame(model, dataset, errs)}


class TensorRows(TokenRows):
    """`stats.k21_tables.TokenRows` fed a `LayerResult`'s ratios as they are (a dict of CPU tensors):
    each method's tensors are joined once, at the end, instead of one host copy per layer."""

    def stack(self, blocks: list[dict], total: int) -> np.ndarray:
        import torch

        out = np.empty((len(K21_METHODS), total), dtype=np.float32)
        for i, m in enumerate(K21_METHODS):
            parts = [b[m] for b in blocks]
            if parts[0].dtype == torch.float32 and parts[0].device.type == "cpu":
                col = torch.from_numpy(out[i])
                with warnings.catch_warnings():  # a wrong length resizes `col` (deprecated): refused below
                    warnings.simplefilter("ignore")
                    try:
                        torch.cat(parts, out=col)
                    except RuntimeError as e:  # longer than `total` (its storage cannot grow), not 1-D, ...
                        raise ValueError(f"{m} ratios do not fit {total} tokens: {e}") from None
            else:  # bfloat16/float16 widen to float32 exactly
                col = torch.cat([p.float().cpu() for p in parts])
                if col.shape == (total,):
                    out[i] = col.numpy()
            if col.shape != (total,):
                raise ValueError(f"{m} ratios of {col.numel()} values for {total} tokens")
        return out


def frequency_table(tokens_df: pd.DataFrame, encoded: list[EncodedSeq], ranks: dict[int, int]) -> pd.DataFrame:
    """``k21_freq``: layer-averaged ratios per token occurrence with its frequency rank (unmasked inputs);
    see `stats.k21_tables.frequency_table`."""
    return k21_tables.frequency_table(tokens_df, encoded, ranks)


def expansion_rates(lm: LoadedModel, *, model: str) -> pd.DataFrame:
    """``k21_expansion``: per layer, ``||T||_F / sqrt(d+1)`` of the augmented value->output affine map.

    ``f(x) = x W_V W_O + b_V W_O`` summed over heads (grouped-query heads read their group's W_V).
    """
    import torch

    from report_builder.decompose.attention import value_vectors

    rows = []
    for layer in range(lm.n_layers):
        aw = lm.layer_weights(layer).attn
        d = aw.d_model
        with torch.no_grad():
            eye = torch.eye(d, dtype=aw.w_o.dtype, device=aw.w_o.device)
            lin = value_vectors(aw.__class__(aw.w_v, None, aw.w_o, None, aw.n_heads, aw.n_kv_heads, aw.head_dim), eye).sum(1)
            bias = value_vectors(aw, torch.zeros(1, d, dtype=eye.dtype, device=eye.device)).sum(1)[0]
            t = torch.zeros(d + 1, d + 1, dtype=torch.float64)
            t[:d, :d] = lin.double().cpu()
            t[d, :d] = bias.double().cpu()
            t[d, d] = 1.0
            rate = float(torch.linalg.matrix_norm(t) / np.sqrt(d + 1))
        rows.append(dict(model=model, layer=layer, expansion_rate=rate))
    return pd.DataFrame(rows)


def example_maps(lm: LoadedModel, enc: EncodedSeq, *, model: str, example: str = "k21-example") -> dict[str, pd.DataFrame]:
    """``k21_maps``: the five K21 maps at every layer for one example (rows i = output, cols j = input)."""
    from report_builder.engine import decompose_sequences

    rows = []
    errs: dict[tuple[int, str], float] = {}
    for _, layer, r in decompose_sequences(lm, tokens_of([enc]), maps=K21_METHODS):
        for m in K21_METHODS:
            a = r.maps[m].float().cpu().numpy()
            n = a.shape[0]
            ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            rows.append(pd.DataFrame(dict(model=model, example=example, layer=layer, method=m, i=ii.ravel(), j=jj.ravel(),
                                          token_i=[enc.tokens[t] for t in ii.ravel()],
                                          token_j=[enc.tokens[t] for t in jj.ravel()], value=a.ravel())))
        for s, v in r.errors.items():
            errs[(layer, s)] = max(errs.get((layer, s), 0.0), v)
    return {"k21_maps": pd.concat(rows, ignore_index=True)}
