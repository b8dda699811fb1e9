"""The generated K24 prose: one-sentence readings computed from this build's numbers.

Each function formats numbers a builder computed (means, changes, shares); verdicts such as "largely
cancel" follow from comparing those numbers, never from the paper. Layers are shown 1-based.
Pitfall: the component names in a verdict come from the model's layout (what follows FF), so a new
layout gets correct prose without a new branch here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder.precision import published as pub


def self_attribution(model: str, layer: int, diag: pd.Series, scopes) -> str:
    """K24 Fig. 1: mean diagonal of the row-normalised map per scope at one (0-based) layer."""
    return (f"{model} (layer {layer + 1}): self-attribution (mean diagonal of the row-normalised map) "
            + ", ".join(f"{s} {pub(diag.get(s, np.nan), '.0%')}" for s in scopes))


def scope_path(model: str, diag: pd.Series, scopes) -> str:
    """K24 maps: one model's mean self-attribution along its scopes."""
    return f"{model}: " + " → ".join(f"{s} {pub(diag.get(s, np.nan), '.0%')}" for s in scopes)


def explorer_reading(parts, n_long: int, max_tokens: int) -> str:
    """K24 maps: the per-model scope paths, and how many long examples were cut."""
    reading = ("Mean self-attribution (diagonal of the row-normalised map) over these examples and all layers: "
               + "; ".join(parts) + ".")
    if n_long:
        reading += (f" {n_long} example(s) reach the limit of {max_tokens} tokens: shown for the first {max_tokens} "
                    "tokens of their text only.")
    return reading


def ff_change_reading(by_model: pd.Series, top: pd.Series, models) -> str:
    """k24-ctx-ff: mean change through FF per model, and the largest (model, layer, dataset) cell."""
    return ("Mean change of the maps through FF alone (1 − ρ, mean over layers and datasets): "
            + ", ".join(f"{m} {pub(by_model[m], '.3f')}" for m in models if m in by_model.index)
            + f". Largest: {top['model']} layer {int(top['layer']) + 1} on {top['dataset']} ({pub(top['change'], '.3f')}).")


def components_reading(rows) -> str:
    """k24-ctx-components: ``rows`` of (model, mean change per component, layout), components in layout order."""
    parts = [f"{m}: " + ", ".join(f"{k} {pub(g.get(k, np.nan), '.3f')}" for k in lay.components) for m, g, lay in rows]
    return "Mean change per component (1 − ρ, over layers and datasets) — " + "; ".join(parts) + "."


def _fmt(x: float, p: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{p}f}"


def _step_verb(component: str, before: float, after: float) -> str:
    """What one component did to the cumulative change, from the numbers (never assumed)."""
    if not (np.isfinite(before) and np.isfinite(after)):
        return f"{component}: n/a"
    if abs(after - before) < 5e-4:
        return f"{component} leaves it unchanged ({pub(before, '.3f')} → {pub(after, '.3f')})"
    if after < before:
        return f"{component} undoes part of it ({pub(before, '.3f')} → {pub(after, '.3f')})"
    return f"{component} adds change ({pub(before, '.3f')} → {pub(after, '.3f')})"


def cancellation_reading(rows) -> str:
    """k24-ctx-cumulative / k24-models: ``rows`` of (model, layout, dataset, headline, path) where
    ``headline`` is `stats.headlines.cancellation` (the Home page's numbers) and ``path`` maps each
    scope to the mean cumulative change from ATB. Each component after FF gets the direction of its
    own step; the verdict compares the whole-layer change with the change right after FF."""
    parts = []
    for m, lay, dataset, head, path in rows:
        k = lay.components.index("FF")
        steps = [_step_verb(comp, path.get(lay.scopes[i], np.nan), path.get(lay.scopes[i + 1], np.nan))
                 for i, comp in enumerate(lay.components) if i > k]
        after_ff, whole = path.get(lay.ff_after, np.nan), path.get(lay.whole_layer, np.nan)
        after = lay.components[k + 1:]
        rest, one = " and ".join(after), len(after) == 1
        if not after:  # e.g. a parallel layer: FF's output is the layer's last term
            verdict = "nothing follows FF in this layer, so nothing undoes it"
        elif not (np.isfinite(after_ff) and np.isfinite(whole)):
            verdict = "n/a"
        elif whole < 0.5 * after_ff:
            verdict = f"{rest} together largely cancel FF's change" if not one else f"{rest} largely cancels FF's change"
        elif whole < after_ff:
            verdict = f"{rest} together partly undo it" if not one else f"{rest} partly undoes it"
        else:
            verdict = f"{rest} together do not undo it" if not one else f"{rest} does not undo it"
        ff_txt = (f"FF alone changes the maps by {_fmt(head.ff, 3)} ({lay.ff_before}→{lay.ff_after}) and the whole "
                  f"layer by {_fmt(head.whole, 3)} (ATB→{head.whole_scope})" if head is not None else "")
        then = (", then " + ", ".join(steps)) if steps else ""
        parts.append(f"{m} on {dataset}: {ff_txt}; from ATB the change after FF is {_fmt(after_ff, 3)}{then}: {verdict}")
    return "Mean over layers (1 − ρ). " + "; ".join(parts) + "."


def top_pairs_reading(shares: pd.Series, best: pd.Series) -> str:
    """k24-ffamp-top: the three commonest categories among top pairs and the most amplified pair."""
    return ("Among all top pairs (every layer, model and dataset), the commonest categories are "
            + ", ".join(f"{c} {pub(s, '.0%')}" for c, s in shares.head(3).items())
            + f". The most amplified pair is {best['token_i']} ← {best['token_j']} ({best['category']}, "
            f"{best['model']} layer {int(best['layer']) + 1}, amp {pub(best['amp'], '.3f')}): “{best['context']}”.")


def lift_reading(rows) -> str:
    """k24-ffamp-categories: ``rows`` of (model, top share, base share, lift) per category; names each
    model's most over-represented category."""
    parts = []
    for m, ts, bs, lift in rows:
        if len(lift):
            c = lift.idxmax()
            parts.append(f"{m}: {c} is {pub(ts[c], '.0%')} of top pairs vs {pub(bs[c], '.1%')} of all pairs (×{pub(lift[c], '.1f')})")
    return "Most over-represented category among FF-amplified pairs — " + "; ".join(parts) + "."


def res_norms_reading(rows) -> str:
    """k24-res-norms: ``rows`` of (model, its k24_res_norms rows); cells with median ratio below 1."""
    parts = []
    for m, g in rows:
        below = int((g["ratio_q50"] < 1).sum())
        parts.append(f"{m}: median ratio below 1 in {below} of {len(g)} layer×dataset cells "
                     f"(range {pub(g['ratio_q50'].min(), '.2f')}–{pub(g['ratio_q50'].max(), '.2f')})")
    return ("FF output norm relative to the residual it is added to — " + "; ".join(parts)
            + ". A ratio below 1 means the residual dominates the sum, so RES dilutes FF's change.")


def ln_dims_reading(dataset: str, rows) -> str:
    """k24-ln-dims: ``rows`` of (model, its `stats.k24_figures.ln_dims_summary` rows). A ρ or share that is
    undefined in a layer (|γ| equal in every dimension: nothing to rank; FF changing no dimension) is said
    in words, and a mean over layers names the layers it covers."""
    parts = [f"{m}: {_kept_share_text(g)}, {_rho_gamma_text(g)}" for m, g in rows]
    signed = any(g["rho_ff_gamma"].notna().any() for _, g in rows)
    return f"On {dataset} — " + "; ".join(parts) + (
        ". A negative ρ means LN's weight is small exactly where FF's change concentrates." if signed else ".")


def _layers_text(g: pd.DataFrame, ok: pd.Series) -> str:
    """``"over the k of n layers (undefined in layer 3, 5)"`` when some layers lack the number; else ``"mean
    over layers"``."""
    if ok.all():
        return "mean over layers"
    missing = ", ".join(str(int(x) + 1) for x in g.loc[~ok, "layer"])
    return f"mean over the {int(ok.sum())} of {len(g)} layers where it is defined, undefined in layer{'s' if (~ok).sum() > 1 else ''} {missing}"


def _kept_share_text(g: pd.DataFrame) -> str:
    ok = g["kept_share"].notna()
    if not ok.any():
        return "the share of FF's per-dimension change LN passes on is undefined (FF's change is 0 in every dimension)"
    return f"LN passes on {pub(g.loc[ok, 'kept_share'].mean(), '.0%')} of FF's per-dimension change ({_layers_text(g, ok)})"


def _rho_gamma_text(g: pd.DataFrame) -> str:
    ok = g["rho_ff_gamma"].notna()
    if not ok.any():
        return ("ρ(FF change, |γ|) is undefined: |γ| is the same in every dimension of every layer (an untrained or "
                "constant norm weight), so there is no ordering of γ to correlate with")
    layers = "" if ok.all() else f" ({_layers_text(g, ok)})"  # all layers: the share's "(mean over layers)" says it
    return f"ρ(FF change, |γ|) = {pub(g.loc[ok, 'rho_ff_gamma'].mean(), '+.2f')}{layers}"
