"""K24 analyses on a loaded model: scope maps of every layer, contextualization change, FF-amp,
RES/LN norms and per-dimension LN effects, from the full-layer decomposition.

One pass over the sequences feeds every K24 table (maps are n x n per scope and are not kept beyond
the sequence). Pitfall: causal models use only pairs j <= i everywhere (Spearman, FF-amp, base rates).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from report_builder.analyses import k24_stats as ks
from report_builder.analyses.inputs import tokens_of
from report_builder.analyses.k21_compute import errors_frame
from report_builder.data.encode import EncodedSeq
from report_builder.decompose.feedforward import IGOptions
from report_builder.engine import decompose_sequences
from report_builder.models.loading import LoadedModel


def _info(e: EncodedSeq) -> ks.SeqInfo:
    return ks.SeqInfo(tokens=e.tokens, special=e.special, text=e.text, offsets=e.offsets, word_ids=e.word_ids)


def scope_analyses(lm: LoadedModel, encoded: list[EncodedSeq], *, model: str, dataset: str, top_k: int = 20,
                   include_special: bool = True, ig: IGOptions = IGOptions(), batch_size: int = 4,
                   budget_bytes: int = 512 << 20, on_batch: Callable[[int], None] | None = None,
                   workers: int | None = None) -> dict[str, pd.DataFrame]:
    """All K24 tables for one model and dataset.

    Args:
        workers: CPU worker threads of the deterministic engine path (default `engine.cpu_workers`).
        include_special: when False, pairs involving special tokens are left out of the
            contextualization change (FF-amp always reports them under the ``special token`` category).
        ig: FF IG options. A numerical IG is not complete, so under it the reconstruction bound is
            enforced only at the check points before FF; the FF scopes' errors are recorded in ``recon_errors``.
    Returns:
        ``k24_ctx``, ``k24_ffamp_pairs``, ``k24_ffamp_base``, ``k24_res_norms``, ``k24_ln_dims``, ``recon_errors``.
    """
    # one canonical order (by sequence id) for every accumulation, so the tables do not depend on
    # the order the sequences came in
    encoded = sorted(encoded, key=lambda e: e.seq)
    lay = lm.adapter.layout
    scopes = lay.scopes
    before_s, after_s = lay.ff_before, lay.ff_after
    causal = lm.causal
    ctx_rows: list[dict] = []
    tops: dict[int, ks.TopPairs] = {}
    ffn: dict[int, list] = {}
    resn: dict[int, list] = {}
    dims: dict[int, dict[str, np.ndarray]] = {}
    errs: dict[tuple[int, str], float] = {}
    # a numerical IG is not complete: the FF scopes' errors are then recorded, not enforced
    enforce = True if ig.method == "closed" else lay.pre_ff_checks
    for k, layer, r in decompose_sequences(lm, tokens_of(encoded), maps=scopes, extras=True, ig=ig, enforce=enforce,
                                           batch_size=batch_size, budget_bytes=budget_bytes, on_batch=on_batch,
                                           workers=workers):
        e = encoded[k]
        full = {s: r.maps[s].cpu().numpy() for s in scopes}
        maps = full
        if not include_special:
            keep = ~np.asarray(e.special)
            maps = {s: m[np.ix_(keep, keep)] for s, m in full.items()}
        for row in ks.sequence_ctx_changes(maps, lay.id, causal):
            ctx_rows.append(dict(seq=e.seq, layer=layer, **row))
        b, a = ks.row_normalise(full[before_s]), ks.row_normalise(full[after_s])
        tp = tops.setdefault(layer, ks.TopPairs(k=top_k, causal=causal))
        tp.add(e.seq, a - b, _info(e), before=b, after=a)
        ff = r.extras["ff"].float()
        res = r.extras["residual"].float()
        ffn.setdefault(layer, []).append(ff.norm(dim=-1).cpu().numpy())
        resn.setdefault(layer, []).append(res.norm(dim=-1).cpu().numpy())
        acc = dims.setdefault(layer, {"ff": 0.0, "ln": 0.0, "n": 0})  # float64 sums, canonical order
        acc["ff"] = acc["ff"] + ff.abs().double().sum(0).cpu().numpy()
        if "ln_ff" in r.extras:
            acc["ln"] = acc["ln"] + r.extras["ln_ff"].float().abs().double().sum(0).cpu().numpy()
            acc["gamma"] = r.extras["ln_weight"].float().cpu().numpy()
        acc["n"] += ff.shape[0]
        for s, v in r.errors.items():
            errs[(layer, s)] = max(errs.get((layer, s), 0.0), v)

    md = dict(model=model, dataset=dataset)
    ctx = ks.summarise_ctx(pd.DataFrame(ctx_rows).assign(**md)) if ctx_rows else pd.DataFrame()
    tops_df = pd.concat([tp.top_frame().assign(layer=l, **md) for l, tp in sorted(tops.items())], ignore_index=True)
    base_df = pd.concat([tp.base_frame().assign(layer=l, **md) for l, tp in sorted(tops.items())], ignore_index=True)
    shares = ks.category_shares(tops_df, base_df)
    res_rows = [dict(**md, layer=l, **ks.norm_ratio_summary(np.concatenate(ffn[l]), np.concatenate(resn[l])))
                for l in sorted(ffn)]
    dim_rows = []
    for l, acc in sorted(dims.items()):
        ffc = acc["ff"] / acc["n"]
        lnc = acc["ln"] / acc["n"] if "gamma" in acc else np.full_like(ffc, np.nan)
        gamma = acc.get("gamma", np.full_like(ffc, np.nan))
        dim_rows.append(pd.DataFrame(dict(**md, layer=l, dim=np.arange(ffc.shape[0]), ff_change=ffc, ln_weight=gamma,
                                          ln_out_change=lnc, kept_ratio=ks.kept_ratio(ffc, lnc))))
    order = ["model", "dataset", "layer", "rank", "seq", "i", "j", "token_i", "token_j", "amp", "before", "after",
             "category", "context"]
    return {
        "k24_ctx": ctx,
        "k24_ffamp_pairs": tops_df[order],
        "k24_ffamp_base": shares,
        "k24_res_norms": pd.DataFrame(res_rows),
        "k24_ln_dims": pd.concat(dim_rows, ignore_index=True),
        "recon_errors": errors_frame(model, dataset, errs),
    }


def example_maps(lm: LoadedModel, examples: list[EncodedSeq], names: list[str], *, model: str) -> pd.DataFrame:
    """``k24_maps``: row-normalised scope maps of every layer for a few example sequences."""
    scopes = lm.adapter.layout.scopes
    parts = []
    for k, layer, r in decompose_sequences(lm, tokens_of(examples), maps=scopes):
        e = examples[k]
        n = len(e)
        ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        valid = ks.valid_pairs_mask(n, lm.causal)
        for s in scopes:
            m = ks.row_normalise(r.maps[s].cpu().numpy())
            parts.append(pd.DataFrame(dict(model=model, example=names[k], layer=layer, scope=s,
                                           i=ii[valid], j=jj[valid],
                                           token_i=np.asarray(e.tokens, dtype=object)[ii[valid]],
                                           token_j=np.asarray(e.tokens, dtype=object)[jj[valid]],
                                           value=m[valid].astype("float32"))))
    return pd.concat(parts, ignore_index=True)
