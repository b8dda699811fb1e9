"""Synthetic, schema-exact K24 result tables for tests and for previewing the figures.

Two toy models — ``tiny-bert`` (post-LN encoder, 6 layers) and ``tiny-llama`` (pre-LN causal,
RMSNorm, gated FF, 8 layers) — on two datasets, ``wiki`` and ``sentiment-sample`` (the same names
as the K21 fixtures in ``figures/fixtures.py``). The FF-amp tables are produced by the real
`report_builder.analyses.k24_stats` helpers from synthetic maps over real-looking token sequences,
so categories and context snippets are genuine. Numbers are shaped like the paper's findings
(FF changes the maps, RES and LN largely undo it) but mean nothing.

Pitfall: keep it fast (< 1 s) — every figure test builds from these tables.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from report_builder.analyses import k24_stats as ks
from report_builder.figures.spec import Roles

MODELS = ("tiny-bert", "tiny-llama")
DATASETS = ("wiki", "sentiment-sample")

TEXTS = {
    "wiki": [
        "The New York Times reported that the city council approved the new stadium.",
        "Albert Einstein developed the theory of relativity while working in Bern.",
        "The river flows through Central Europe before reaching the Black Sea.",
        "In 1969, Neil Armstrong walked on the Moon during the Apollo mission.",
        "Marie Curie won the Nobel Prize twice, in physics and in chemistry.",
    ],
    "sentiment-sample": [
        "a gripping, funny and deeply moving film about growing up.",
        "the plot is thin, but the acting is superb throughout.",
        "an overlong and tiresome exercise in style over substance.",
        "Tom Hanks gives a warm, understated performance.",
        "it never quite decides what it wants to be.",
    ],
}

# Same rows as the K21 fixtures' ``models`` table (figures/fixtures.py), so the two can be combined.
_MODEL_ROWS = [
    dict(model="tiny-bert", source="fixture/tiny-bert", family="bert", class_name="BertModel",
         ln_position="post", norm="LayerNorm", activation="gelu", gated=False, d_model=128,
         layers=6, heads=4, kv_heads=4, ff_size=512, params=1_200_000,
         fingerprint="fixture-tiny-bert", dtype="float32", device="cpu", multipliers="", licence="synthetic fixture"),
    dict(model="tiny-llama", source="fixture/tiny-llama", family="llama", class_name="LlamaForCausalLM",
         ln_position="pre", norm="RMSNorm", activation="silu", gated=True, d_model=96,
         layers=8, heads=6, kv_heads=2, ff_size=256, params=900_000,
         fingerprint="fixture-tiny-llama", dtype="float32", device="cpu", multipliers="", licence="synthetic fixture"),
]


def k24_fixture_roles(preset: str = "default") -> Roles:
    """The `Roles` matching `k24_fixture_tables`."""
    return Roles(primary_encoder="tiny-bert", primary_causal="tiny-llama", encoders=MODELS, variants=(),
                 seed_group=(), datasets=DATASETS, preset=preset)


def _tokenize(text: str, style: str) -> ks.SeqInfo:
    """A toy tokenizer: WordPiece-like (lowercase, ``##``) or byte-BPE-like (``Ġ``), with offsets."""
    toks, offs, wids, special = [], [], [], []
    bos, eos = ("[CLS]", "[SEP]") if style == "wordpiece" else ("<s>", None)
    toks.append(bos), offs.append((0, 0)), wids.append(None), special.append(True)
    for w, m in enumerate(re.finditer(r"\w+|[^\w\s]", text)):
        word, s = m.group(), m.start()
        pieces = [word] if len(word) <= 6 else [word[:4], word[4:]]
        pos = s
        for k, p in enumerate(pieces):
            if style == "wordpiece":
                tok = p.lower() if k == 0 else "##" + p.lower()
            else:
                space = k == 0 and s > 0 and text[s - 1] == " "
                tok = ("Ġ" if space else "") + p
            toks.append(tok)
            offs.append((pos - 1 if (style == "bpe" and k == 0 and s > 0 and text[s - 1] == " ") else pos,
                         pos + len(p)))
            wids.append(w)
            special.append(False)
            pos += len(p)
    if eos:
        toks.append(eos), offs.append((0, 0)), wids.append(None), special.append(True)
    return ks.SeqInfo(tokens=toks, special=special, text=text, offsets=offs, word_ids=wids)


def _atb_map(rng, n: int, causal: bool) -> np.ndarray:
    """A plausible row-normalised ATB map: strong diagonal, previous token, first token, noise."""
    a = rng.gamma(0.6, 0.05, size=(n, n))
    a += np.eye(n) * rng.uniform(0.5, 1.2, size=n)
    a += np.eye(n, k=-1) * 0.15
    a[:, 0] += 0.1
    if causal:
        a = np.tril(a)
    return ks.row_normalise(a)


def _layer_maps(rng, info: ks.SeqInfo, layer: int, ln_position: str, strength: float) -> dict:
    """Maps at every scope for one layer: FF amplifies word-internal/name/adjacent pairs,
    RES pulls back towards the ATB map, LN perturbs a little."""
    n = len(info.tokens)
    causal = ln_position == "pre"
    scopes = ks.SCOPES[ln_position]
    cats = ks.pair_categories(info.tokens, info.word_ids, info.offsets, info.text, info.special)
    boost = np.select([cats == "same word", cats == "multi-word name", cats == "adjacent"],
                      [0.35, 0.25, 0.08], 0.0) * (1 - np.eye(n))
    atb = _atb_map(rng, n, causal)
    valid = ks.valid_pairs_mask(n, causal)
    ff_in = atb
    maps = {"ATB": atb}
    if ln_position == "pre":
        ff_in = ks.row_normalise(atb * rng.lognormal(0, 0.1, size=(n, n)) * valid)
        maps["ATBLN"] = ff_in
    ff = ks.row_normalise(np.clip(ff_in * rng.lognormal(0, strength, size=(n, n))
                                  + boost * rng.uniform(0.2, 1.0, size=(n, n)) * strength, 0, None) * valid)
    res = ks.row_normalise(0.85 * ff_in + 0.15 * ff)
    maps[scopes[-2] if ln_position == "post" else scopes[-1]] = res
    maps[scopes[1] if ln_position == "post" else scopes[2]] = ff
    if ln_position == "post":
        maps["ATBFFRESLN"] = ks.row_normalise(res * rng.lognormal(0, 0.05, size=(n, n)) * valid)
    return maps


def k24_fixture_tables(seed: int = 0, k: int = 10) -> dict[str, pd.DataFrame]:
    """Synthetic ``models``, ``k24_ctx``, ``k24_ffamp_pairs``, ``k24_ffamp_base``, ``k24_res_norms``,
    ``k24_ln_dims`` and ``k24_maps`` tables (columns exactly as in ARCHITECTURE.md)."""
    rng = np.random.default_rng(seed)
    models = pd.DataFrame(_MODEL_ROWS)
    seq_rows, pair_frames, base_frames, res_rows, ln_rows, map_rows = [], [], [], [], [], []
    for mrow in _MODEL_ROWS:
        model, lnp = mrow["model"], mrow["ln_position"]
        causal = lnp == "pre"
        style = "wordpiece" if lnp == "post" else "bpe"
        for dataset in DATASETS:
            infos = [_tokenize(t, style) for t in TEXTS[dataset]]
            n_layers, d_model = mrow["layers"], mrow["d_model"]
            for layer in range(n_layers):
                strength = 0.35 + 0.6 * layer / n_layers
                before_s, after_s = ks.FF_SCOPES[lnp]
                tp = ks.TopPairs(k=k, causal=causal)
                for seq, info in enumerate(infos):
                    maps = _layer_maps(rng, info, layer, lnp, strength)
                    for r in ks.sequence_ctx_changes(maps, lnp, causal):
                        seq_rows.append(dict(model=model, dataset=dataset, seq=seq, layer=layer, **r))
                    b, a = ks.row_normalise(maps[before_s]), ks.row_normalise(maps[after_s])
                    tp.add(seq, a - b, info, before=b, after=a)
                    if dataset == DATASETS[0] and seq < 2:
                        n = len(info.tokens)
                        for scope in ks.SCOPES[lnp]:
                            m = maps[scope]
                            for i in range(n):
                                for j in range(i + 1 if causal else n):
                                    map_rows.append((model, seq, layer, scope, i, j, info.tokens[i],
                                                     info.tokens[j], float(m[i, j])))
                grp = dict(model=model, dataset=dataset, layer=layer)
                pair_frames.append(tp.top_frame().assign(**grp))
                base_frames.append(tp.base_frame().assign(**grp))
                ntok = sum(len(x.tokens) for x in infos)
                res_norm = rng.gamma(20, 0.5 * (1 + 1.5 * layer / n_layers), size=ntok)
                ff_norm = res_norm * rng.lognormal(np.log(0.25 + 0.3 * layer / n_layers), 0.35, size=ntok)
                res_rows.append(dict(model=model, dataset=dataset, layer=layer,
                                     **ks.norm_ratio_summary(ff_norm, res_norm)))
                gamma = rng.lognormal(0, 0.3, size=d_model)
                gamma[rng.choice(d_model, 3, replace=False)] = rng.uniform(0.02, 0.1, size=3)
                ff_change = rng.gamma(2.0, 0.2, size=d_model)
                hot = rng.choice(d_model, 3, replace=False)
                ff_change[hot] *= 6
                gamma[hot] *= 0.15  # LN scales down the dimensions where FF's change concentrates
                ln_out = ff_change * gamma / np.sqrt(1 + ff_change) * 0.8
                for dim in range(d_model):
                    ln_rows.append(dict(model=model, dataset=dataset, layer=layer, dim=dim,
                                        ff_change=float(ff_change[dim]), ln_weight=float(gamma[dim]),
                                        ln_out_change=float(ln_out[dim]),
                                        kept_ratio=float(ks.kept_ratio(ff_change[dim], ln_out[dim]))))
    pair_cols = ["model", "dataset", "layer", "rank", "seq", "i", "j", "token_i", "token_j", "amp",
                 "before", "after", "category", "context"]
    pairs = pd.concat(pair_frames, ignore_index=True)[pair_cols]
    base_counts = pd.concat(base_frames, ignore_index=True)
    base = ks.category_shares(pairs, base_counts)
    maps_df = pd.DataFrame(map_rows, columns=["model", "example", "layer", "scope", "i", "j", "token_i",
                                              "token_j", "value"])
    return {
        "models": models,
        "k24_ctx": ks.summarise_ctx(pd.DataFrame(seq_rows)),
        "k24_ffamp_pairs": pairs,
        "k24_ffamp_base": base[["model", "dataset", "layer", "category", "top_count", "top_share",
                                "base_count", "base_share"]],
        "k24_res_norms": pd.DataFrame(res_rows)[["model", "dataset", "layer", "ff_norm_mean", "res_norm_mean",
                                                 "ratio_mean", "ratio_q10", "ratio_q50", "ratio_q90"]],
        "k24_ln_dims": pd.DataFrame(ln_rows),
        "k24_maps": maps_df,
    }
