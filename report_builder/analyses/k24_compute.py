"""K24 analyses on a loaded model: scope maps of every layer, contextualization change, FF-amp,
RES/LN norms and per-dimension LN effects, from the full-layer decomposition.

One pass over the sequences feeds every K24 table (maps are n x n per scope and are not kept beyond
the sequence); the per-sequence statistics on the maps are `report_builder.stats` (`HostStats`), the
reduce folds them exactly. Pitfall: causal models use only pairs j <= i everywhere (Spearman, FF-amp, base rates).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from report_builder.analyses.inputs import tokens_of
from report_builder.analyses.k21_compute import errors_frame
from report_builder.data.encode import EncodedSeq
from report_builder.decompose.options import IGOptions
from report_builder.stats.ctx_change import summarise_ctx
from report_builder.stats.host_stats import HostStats
from report_builder.stats.maps import row_normalise, valid_pairs_mask
from report_builder.stats.res_ln import kept_ratio, norm_ratio_summary
from report_builder.stats.top_pairs import TopPairs, category_shares

if TYPE_CHECKING:  # pragma: no cover - torch is imported by the functions that compute (a cached build never does)
    from report_builder.models.loading import LoadedModel


def scope_analyses(lm: LoadedModel, encoded: list[EncodedSeq], *, model: str, dataset: str, top_k: int = 20,
                   include_special: bool = True, ig: IGOptions = IGOptions(), batch_size: int | None = None,
                   budget_bytes: int = 512 << 20, on_batch: Callable[[int], None] | None = None,
                   workers: int | None = None, device_stats: bool | None = None) -> dict[str, pd.DataFrame]:
    """All K24 tables for one model and dataset: `reduce_scopes` of the one `scope_partials` of every sequence.

    Args:
        workers: CPU worker threads of the deterministic engine path (default `engine.cpu_workers`).
        batch_size: at most this many sequences per batch on the batched path (None: as the engine sizes them).
        device_stats: the statistics on the device (`k24_device.DeviceStats`, on the engine's batched
            path) instead of on the host (`stats.host_stats.HostStats`); default: off the CPU only, so
            CPU builds keep their byte-identical tables.
        include_special: when False, pairs involving special tokens are left out of the
            contextualization change (FF-amp always reports them under the ``special token`` category).
        ig: FF IG options. A numerical IG is not complete, so under it the reconstruction bound is
            enforced only at the check points before FF; the FF scopes' errors are recorded in ``recon_errors``.
    Returns:
        ``k24_ctx``, ``k24_ffamp_pairs``, ``k24_ffamp_base``, ``k24_res_norms``, ``k24_ln_dims``, ``recon_errors``.
    """
    part = scope_partials(lm, encoded, top_k=top_k, include_special=include_special, ig=ig, batch_size=batch_size,
                          budget_bytes=budget_bytes, on_batch=on_batch, workers=workers, device_stats=device_stats)
    return reduce_scopes([part], model=model, dataset=dataset, top_k=top_k, causal=lm.causal)


PARTIAL_TABLES = ("ctx_rows", "top_pairs", "base_counts", "token_norms", "dim_counts", "dim_sums", "ln_gamma",
                  "errors")
"""The sufficient statistics `scope_partials` returns for a range of sequences (see `reduce_scopes`)."""


def scope_partials(lm: LoadedModel, encoded: list[EncodedSeq], *, top_k: int = 20, include_special: bool = True,
                   ig: IGOptions = IGOptions(), batch_size: int | None = None, budget_bytes: int = 512 << 20,
                   on_batch: Callable[[int], None] | None = None, workers: int | None = None,
                   device_stats: bool | None = None) -> dict[str, pd.DataFrame]:
    """Sufficient statistics of the K24 tables over some sequences (a shard), one decomposition pass.

    Returns ``PARTIAL_TABLES``: ``ctx_rows`` (per sequence and layer: each component's and cumulative
    change), ``top_pairs`` (these sequences' top-k pairs per layer, `TopPairs.top_frame` columns
    without rank) and ``base_counts`` (layer, category, base_count), ``token_norms`` (per token: FF
    and residual norms, float32), ``dim_counts`` (per sequence and layer: tokens ``n``),
    ``dim_sums`` (per sequence, layer and dimension: the float64 sums ``ff``/``ln`` over its tokens of
    |FF| and of the change of the LN output; ``ln`` nan without that LN), ``ln_gamma`` (layer, dim,
    γ) and ``errors`` (max relative error per layer and scope). ``device_stats``: see `scope_analyses`.
    """
    from report_builder.engine import decompose_sequences

    # one canonical order (by sequence id) for every accumulation, so the tables do not depend on
    # the order the sequences came in
    encoded = sorted(encoded, key=lambda e: e.seq)
    lay = lm.adapter.layout
    scopes = lay.scopes
    # a numerical IG is not complete: the FF scopes' errors are then recorded, not enforced
    enforce = True if ig.method == "closed" else lay.pre_ff_checks
    if device_stats is None:
        device_stats = lm.device.type != "cpu"
    if device_stats:
        from report_builder.analyses.k24_device import DeviceStats
        from report_builder.engine import reduce_sequences

        dev = DeviceStats(lay, lm.causal, encoded, top_k=top_k, include_special=include_special, n_layers=lm.n_layers)
        longest = max((len(e) for e in encoded), default=0)
        for out in reduce_sequences(lm, tokens_of(encoded), dev.reduce, maps=scopes, extras=True, ig=ig,
                                    enforce=enforce, batch_size=batch_size, budget_bytes=budget_bytes,
                                    reduce_bytes=dev.reduce_bytes(longest), on_batch=on_batch):
            dev.add(out)
        return _partials(dev, sorted(dev.norms, key=lambda t: t[0]), sorted(dev.dim_rows, key=lambda t: t[0]),
                         dev.gamma, dev.errors)
    host = HostStats(lay, lm.causal, top_k=top_k, include_special=include_special, n_layers=lm.n_layers)
    norms: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    dim_rows: list[tuple[int, int, int, np.ndarray, np.ndarray]] = []
    gamma: dict[int, np.ndarray] = {}
    errs: dict[tuple[int, str], float] = {}
    for k, layer, r in decompose_sequences(lm, tokens_of(encoded), maps=scopes, extras=True, ig=ig, enforce=enforce,
                                           batch_size=batch_size, budget_bytes=budget_bytes, on_batch=on_batch,
                                           workers=workers):
        e = encoded[k]
        host.add(e, layer, {s: r.maps[s].cpu().numpy() for s in scopes})
        ff = r.extras["ff"].float()
        res = r.extras["residual"].float()
        norms.append((e.seq, layer, ff.norm(dim=-1).cpu().numpy(), res.norm(dim=-1).cpu().numpy()))
        ffs = ff.abs().double().sum(0).cpu().numpy()  # float64, folded over sequences by the reduce
        ln = np.full_like(ffs, np.nan)
        if "ln_ff" in r.extras:
            ln = r.extras["ln_ff"].float().abs().double().sum(0).cpu().numpy()
            gamma[layer] = r.extras["ln_weight"].float().cpu().numpy()
        dim_rows.append((e.seq, layer, int(ff.shape[0]), ffs, ln))
        for s, v in r.errors.items():
            errs[(layer, s)] = max(errs.get((layer, s), 0.0), v)
    return _partials(host, norms, dim_rows, gamma, errs)


def _partials(stats, norms: list, dim_rows: list, gamma: dict[int, np.ndarray],
              errs: dict[tuple[int, str], float]) -> dict[str, pd.DataFrame]:
    """`PARTIAL_TABLES` from the statistics' own tables (`HostStats` or `DeviceStats`) and the per-token
    norms, per-dimension sums, norm weights and errors of the pass."""
    return {
        **stats.tables(),
        "token_norms": pd.DataFrame({
            "seq": _repeat([q for q, *_ in norms], [len(f) for _, _, f, _ in norms]),
            "layer": _repeat([l for _, l, *_ in norms], [len(f) for _, _, f, _ in norms]),
            "ff_norm": np.concatenate([f for _, _, f, _ in norms] or [np.zeros(0, np.float32)]),
            "res_norm": np.concatenate([r for _, _, _, r in norms] or [np.zeros(0, np.float32)])}),
        "dim_counts": pd.DataFrame([(q, l, n) for q, l, n, _, _ in dim_rows], columns=["seq", "layer", "n"]),
        "dim_sums": pd.DataFrame({
            "seq": _repeat([q for q, *_ in dim_rows], [len(f) for *_, f, _ in dim_rows]),
            "layer": _repeat([l for _, l, *_ in dim_rows], [len(f) for *_, f, _ in dim_rows]),
            "dim": np.concatenate([np.arange(len(f)) for *_, f, _ in dim_rows] or [np.zeros(0, np.int64)]),
            "ff": np.concatenate([f for *_, f, _ in dim_rows] or [np.zeros(0)]),
            "ln": np.concatenate([g for *_, g in dim_rows] or [np.zeros(0)])}),
        "ln_gamma": pd.DataFrame({
            "layer": _repeat(list(gamma), [len(g) for g in gamma.values()]),
            "dim": np.concatenate([np.arange(len(g)) for g in gamma.values()] or [np.zeros(0, np.int64)]),
            "gamma": np.concatenate(list(gamma.values()) or [np.zeros(0, np.float32)])}),
        "errors": pd.DataFrame([dict(layer=l, scope=s, max_rel_error=v) for (l, s), v in errs.items()],
                               columns=["layer", "scope", "max_rel_error"]),
    }


def _repeat(values: list[int], counts: list[int]) -> np.ndarray:
    return np.repeat(np.asarray(values, dtype=np.int64), np.asarray(counts, dtype=np.int64))


def _in_seq_order(partials: list[dict[str, pd.DataFrame]], name: str) -> pd.DataFrame:
    """One partial table over every shard, rows in sequence order (stable: a sequence's rows keep theirs)."""
    frames = [p[name] for p in partials if len(p[name])]
    if not frames:
        return partials[0][name]
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return df.sort_values("seq", kind="mergesort", ignore_index=True)


def reduce_scopes(partials: list[dict[str, pd.DataFrame]], *, model: str, dataset: str, top_k: int,
                  causal: bool) -> dict[str, pd.DataFrame]:
    """The K24 tables from the `scope_partials` of consecutive sequence ranges, exactly.

    Exact for any split: per-sequence rows are taken in sequence order, top-k pairs are merged under
    the total order of `TopPairs` (amp, then seq, i, j), counts are summed, maxima taken, and the
    per-dimension float64 sums are folded over the per-sequence sums in sequence order — the same
    additions in the same order as over one range.
    """
    md = dict(model=model, dataset=dataset)
    ctx_rows = _in_seq_order(partials, "ctx_rows")
    ctx = summarise_ctx(ctx_rows.assign(**md)) if len(ctx_rows) else pd.DataFrame()

    layers = sorted({int(l) for p in partials for l in p["base_counts"]["layer"]})
    tops: dict[int, TopPairs] = {l: TopPairs(k=top_k, causal=causal) for l in layers}
    for p in partials:
        top, base = p["top_pairs"], p["base_counts"]
        for l in sorted({int(x) for x in base["layer"]}):
            tops[l].merge(top[top["layer"] == l], base[base["layer"] == l])
    tops_df = pd.concat([tp.top_frame().assign(layer=l, **md) for l, tp in sorted(tops.items())], ignore_index=True)
    base_df = pd.concat([tp.base_frame().assign(layer=l, **md) for l, tp in sorted(tops.items())], ignore_index=True)
    shares = category_shares(tops_df, base_df)

    norms = _in_seq_order(partials, "token_norms")
    res_rows = []
    for l in sorted({int(x) for x in norms["layer"]}):
        at = norms["layer"].to_numpy() == l
        res_rows.append(dict(**md, layer=l, **norm_ratio_summary(norms["ff_norm"].to_numpy()[at],
                                                                     norms["res_norm"].to_numpy()[at])))

    counts, sums = _in_seq_order(partials, "dim_counts"), _in_seq_order(partials, "dim_sums")
    gamma: dict[int, np.ndarray] = {}
    for p in partials:
        g = p["ln_gamma"]
        for l in {int(x) for x in g["layer"]}:
            gamma[l] = g["gamma"].to_numpy()[g["layer"].to_numpy() == l]
    dim_rows = []
    for l in sorted({int(x) for x in counts["layer"]}):
        n = sum(int(k) for k in counts["n"].to_numpy()[counts["layer"].to_numpy() == l])
        at = sums["layer"].to_numpy() == l
        d = int(sums["dim"].to_numpy()[at].max()) + 1
        ff_seq, ln_seq = sums["ff"].to_numpy()[at].reshape(-1, d), sums["ln"].to_numpy()[at].reshape(-1, d)
        acc_ff, acc_ln = 0.0, 0.0  # float64 sums over the per-sequence sums, in sequence order
        for k in range(ff_seq.shape[0]):
            acc_ff = acc_ff + ff_seq[k]
            if l in gamma:
                acc_ln = acc_ln + ln_seq[k]
        ffc = acc_ff / n
        lnc = acc_ln / n if l in gamma else np.full_like(ffc, np.nan)
        g = gamma.get(l, np.full_like(ffc, np.nan))
        dim_rows.append(pd.DataFrame(dict(**md, layer=l, dim=np.arange(ffc.shape[0]), ff_change=ffc, ln_weight=g,
                                          ln_out_change=lnc, kept_ratio=kept_ratio(ffc, lnc))))

    errs: dict[tuple[int, str], float] = {}
    for p in partials:
        e = p["errors"]
        for l, s, v in zip(e["layer"], e["scope"], e["max_rel_error"]):
            errs[(int(l), str(s))] = max(errs.get((int(l), str(s)), 0.0), float(v))

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
    from report_builder.engine import decompose_sequences

    scopes = lm.adapter.layout.scopes
    parts = []
    for k, layer, r in decompose_sequences(lm, tokens_of(examples), maps=scopes):
        e = examples[k]
        n = len(e)
        ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        valid = valid_pairs_mask(n, lm.causal)
        for s in scopes:
            m = row_normalise(r.maps[s].cpu().numpy())
            parts.append(pd.DataFrame(dict(model=model, example=names[k], layer=layer, scope=s,
                                           i=ii[valid], j=jj[valid],
                                           token_i=np.asarray(e.tokens, dtype=object)[ii[valid]],
                                           token_j=np.asarray(e.tokens, dtype=object)[jj[valid]],
                                           value=m[valid].astype("float32"))))
    return pd.concat(parts, ignore_index=True)
