"""Synthetic, schema-exact K21 result tables for tests and page previews (no torch, < 1 s).

`k21_fixture_tables` returns every table a K21 figure reads (``k21_tokens``, ``k21_freq``,
``k21_expansion``, ``k21_maps``, ``models``, ``datasets``, ``recon_errors``) for an encoder
``tiny-bert`` (post-LN, the primary encoder) and a causal ``tiny-llama`` (pre-LN, RMSNorm, gated FF)
on two datasets (``wiki`` = the primary Wikipedia-like pairs, ``sst2``). The numbers are made up but
shaped like the paper's (ATTN-N ≈ 85 %, ATTNRESLN-N ≈ 18 %, frequent tokens mix more, [CLS]/[SEP]
mix less); `fixture_roles` gives the matching `Roles`. Optional model variants and a seed group
exercise the figures that need them.

Pitfall: these tables are *fixtures* — never let them reach a real build; every model's ``source`` is
``fixture/<name>`` so the paper-number lookup can never mistake them for a paper model.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder.analyses.k21_stats import METHODS
from report_builder.figures.spec import Roles

PRIMARY_ENCODER = "tiny-bert"
PRIMARY_CAUSAL = "tiny-llama"
DATASETS = ("wiki", "sst2")
EXAMPLE = "k21-pair"

_COMMON = [
    "the", ",", ".", "of", "and", "in", "to", "a", "was", "he", "is", "for", "on", "as", "by", "with",
    "it", "that", "his", "at", "from", "an", "were", "are", "which", "this", "be", "or", "had", "first",
    "not", "but", "their", "after", "also", "new", "one", "two", "they", "she", "her", "has", "been",
    "its", "who", "film", "city", "year", "time", "war", "state", "school", "world", "team", "music",
    "man", "went", "store", "bought", "gallon", "milk", "river", "album", "league", "church", "king",
]
_VOCAB = _COMMON + [f"w{k}" for k in range(len(_COMMON), 3000)] + [f"##x{k}" for k in range(400)]
# ranks 1 and 2 go to [CLS] and [SEP] (they occur in every sequence); words follow in list order.
_RANK = {t: k + 3 for k, t in enumerate(_VOCAB)}

_EXAMPLE_TEXT = (
    "the man went to the store . [SEP] he bought a gallon of milk . he went to the river with "
    "his team after the war . the city had a new church and a new school in its first year "
    ". she was in the film with her team"
).split()


def _model_rows(n_variants: int, n_seeds: int) -> list[dict]:
    base = dict(
        family="bert", class_name="BertModel", ln_position="post", norm="LayerNorm", activation="gelu",
        gated=False, d_model=128, layers=6, heads=4, kv_heads=4, ff_size=512, params=1_200_000,
        dtype="float32", device="cpu",
    )
    rows = [
        dict(base, model=PRIMARY_ENCODER, role="primary_encoder"),
        dict(
            base, model=PRIMARY_CAUSAL, role="primary_causal", family="llama",
            class_name="LlamaForCausalLM", ln_position="pre", norm="RMSNorm", activation="silu", gated=True,
            d_model=96, layers=8, heads=6, kv_heads=2, ff_size=256, params=900_000,
        ),
    ]
    for k in range(n_variants):
        rows.append(dict(base, model=f"tiny-bert-v{k}", role="variant", layers=2 + k % 5, d_model=64 * (1 + k % 3)))
    for k in range(n_seeds):
        rows.append(dict(base, model=f"tiny-bert-seed_{k}", role="seed_group"))
    for r in rows:
        r["source"] = f"fixture/{r['model']}"
        r["fingerprint"] = f"fixture-{r['model']}"
    return rows


def _sequence(rng: np.random.Generator, dataset: str, causal: bool) -> list[str]:
    zipf = np.minimum(rng.zipf(1.25, size=200) - 1, len(_VOCAB) - 1)
    words = [_VOCAB[z] for z in zipf]
    if dataset == "wiki":
        la, lb = int(rng.integers(15, 45)), int(rng.integers(15, 45))
        body = words[:la] + ["[SEP]"] + words[la : la + lb]
    else:
        body = words[: int(rng.integers(8, 30))]
    if causal:
        return ["<s>"] + [w for w in body if w != "[SEP]"]
    return ["[CLS]"] + body + ["[SEP]"]


def _category(tokens: np.ndarray) -> np.ndarray:
    cat = np.full(tokens.shape, "Normal", dtype=object)
    cat[tokens == "[CLS]"] = "[CLS]"
    cat[tokens == "<s>"] = "[CLS]"
    cat[tokens == "[SEP]"] = "[SEP]"
    cat[tokens == "[MASK]"] = "[MASK]"
    return cat


def _ratios(rng, tokens_orig, cat, pos, layer, n_layers, causal, noise=1.0) -> dict[str, np.ndarray]:
    """Paper-shaped ratios (percent) for flattened token rows."""
    n = len(tokens_orig)
    rank = np.array([_RANK.get(t, 1 if t in ("[CLS]", "<s>") else 2) for t in tokens_orig], float)
    special = (cat == "[CLS]") | (cat == "[SEP]")
    z = np.where(special, 0.5, (np.log(rank) - 4.0) / 1.5)  # frequent -> negative -> mixes more
    depth = layer / max(n_layers - 1, 1)
    masked = cat == "[MASK]"
    attn_w = 100 - 100 * rng.beta(1.2, 30, n) * (1 + 3 * special)
    attn_n = 100 * rng.beta(8, 1.5, n) - 25 * special
    res_n = 24 - 5 * z - 8 * special + 6 * masked + noise * rng.normal(0, 4, n)
    res_n = res_n * (1.15 - 0.3 * depth)
    resln_n = 0.85 * res_n + noise * rng.normal(0, 2, n) - 3 * special
    out = {
        "ATTN-W": attn_w,
        "ATTN-N": attn_n,
        "ATTNRES-W": attn_w / 2,
        "ATTNRES-N": res_n,
        "ATTNRESLN-N": resln_n,
    }
    for m in METHODS:
        v = np.clip(out[m], 0.5, 99.9)
        if m == "ATTNRES-W":
            v = np.clip(v, 0.25, 50.0)
        if causal:
            v = np.where(pos == 0, 0.0, v)  # the first token can only attend to itself
        out[m] = np.round(v, 4)
    return out


def _tokens_and_freq(rng, model: dict, datasets, n_seqs: dict[str, int], n_freq: dict[str, int]):
    causal = model["ln_position"] == "pre"
    L = model["layers"]
    tok_frames, freq_frames, ds_rows = [], [], []
    for ds in datasets:
        # masked inputs, every layer
        seqs = [_sequence(rng, ds, causal) for _ in range(n_seqs[ds])]
        lens = np.array([len(s) for s in seqs])
        orig = np.array([t for s in seqs for t in s], dtype=object)
        seq_id = np.repeat(np.arange(len(seqs)), lens)
        pos = np.concatenate([np.arange(k) for k in lens])
        tok = orig.copy()
        if not causal:
            normal = _category(orig) == "Normal"
            tok[normal & (rng.random(len(orig)) < 0.12)] = "[MASK]"
        cat = _category(tok)
        nt = len(tok)
        layer = np.repeat(np.arange(L), nt)
        idx = np.tile(np.arange(nt), L)
        r = _ratios(rng, orig[idx], cat[idx], pos[idx], layer, L, causal)
        tok_frames.append(
            pd.DataFrame(
                {
                    "model": model["model"], "dataset": ds, "seq": seq_id[idx], "layer": layer,
                    "pos": pos[idx], "token": tok[idx], "category": cat[idx], **r,
                }
            )
        )
        ds_rows.append((ds, float(lens.mean()), len(seqs)))
        # unmasked inputs, layer-averaged
        fseqs = [_sequence(rng, ds, causal) for _ in range(n_freq[ds])]
        flens = np.array([len(s) for s in fseqs])
        forig = np.array([t for s in fseqs for t in s], dtype=object)
        fpos = np.concatenate([np.arange(k) for k in flens])
        fcat = _category(forig)
        fr = _ratios(rng, forig, fcat, fpos, np.full(len(forig), L // 2), L, causal, noise=0.6)
        rank = np.array([_RANK.get(t, 1 if t in ("[CLS]", "<s>") else 2) for t in forig], dtype=np.int64)
        freq_frames.append(
            pd.DataFrame(
                {
                    "model": model["model"], "dataset": ds, "seq": np.repeat(np.arange(len(fseqs)), flens),
                    "pos": fpos, "token": forig, "category": fcat, "freq_rank": rank, **fr,
                }
            )
        )
    return tok_frames, freq_frames, ds_rows


def _maps(rng, model: dict, n_tokens: int) -> pd.DataFrame:
    causal = model["ln_position"] == "pre"
    words = (_EXAMPLE_TEXT * 3)[: n_tokens - 2]
    toks = (["<s>"] + [w for w in words if w != "[SEP]"])[:n_tokens] if causal else ["[CLS]"] + words + ["[SEP]"]
    toks = np.array(toks[:n_tokens], dtype=object)
    n = len(toks)
    special = np.isin(toks, ["[CLS]", "[SEP]", "<s>"])
    frames = []
    I = np.eye(n)
    for layer in range(model["layers"]):
        logits = rng.normal(0, 1.2, (n, n)) + 2.5 * special[None, :] + 1.0 * I
        logits += 1.5 * (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) == 1)
        if causal:
            logits = np.where(np.tril(np.ones((n, n))) > 0, logits, -np.inf)
        alpha = np.exp(logits - logits.max(1, keepdims=True))
        alpha /= alpha.sum(1, keepdims=True)
        fnorm = rng.uniform(1.0, 3.0, n) * np.where(special, 0.15, 1.0)  # ||f(x_j)||: small for specials
        attn_n = alpha * fnorm[None, :]
        xnorm = rng.uniform(8, 14, n)
        res_n = attn_n + np.diag(xnorm)
        s = rng.uniform(0.9, 1.4, n)[:, None]
        vals = {
            "ATTN-W": alpha,
            "ATTN-N": attn_n,
            "ATTNRES-W": 0.5 * alpha + 0.5 * I,
            "ATTNRES-N": res_n,
            "ATTNRESLN-N": res_n / s * rng.uniform(0.8, 1.2, (n, n)) ** 0.2,
        }
        ii, jj = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        keep = (jj <= ii) if causal else np.ones_like(ii, bool)
        ii, jj = ii[keep], jj[keep]
        for m in METHODS:
            frames.append(
                pd.DataFrame(
                    {
                        "model": model["model"], "example": EXAMPLE, "layer": layer, "method": m,
                        "i": ii, "j": jj, "token_i": toks[ii], "token_j": toks[jj],
                        "value": np.round(vals[m][ii, jj], 5),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def k21_fixture_tables(
    seed: int = 0, *, n_variants: int = 0, n_seeds: int = 0, map_tokens: int = 60
) -> dict[str, pd.DataFrame]:
    """Synthetic versions of every K21 result table (schema of ARCHITECTURE.md).

    Args:
        seed: RNG seed (the output is a pure function of the arguments).
        n_variants: extra encoder models ``tiny-bert-v0..`` (role ``variant``), primary dataset only.
        n_seeds: extra encoder models ``tiny-bert-seed_0..`` (role ``seed_group``), primary dataset only.
        map_tokens: length of the ``k21_maps`` example (the paper's pair, continued to this length).

    Returns:
        ``{"k21_tokens", "k21_freq", "k21_expansion", "k21_maps", "models", "datasets", "recon_errors"}``.
    """
    rng = np.random.default_rng(seed)
    models = _model_rows(n_variants, n_seeds)
    tok, freq, maps, exp, ds_rows, rec = [], [], [], [], [], []
    for m in models:
        main = m["role"] in ("primary_encoder", "primary_causal")
        dsets = DATASETS if main else DATASETS[:1]
        n_seqs = {"wiki": 40 if main else 12, "sst2": 40}
        n_freq = {"wiki": 200 if main else 30, "sst2": 60}
        t, f, dr = _tokens_and_freq(rng, m, dsets, n_seqs, n_freq)
        tok += t
        freq += f
        for ds, mean_len, n in dr:
            ds_rows.append(
                {
                    "dataset": ds, "model": m["model"],
                    "name": "Wikipedia sequence pairs (fixture)" if ds == "wiki" else "Movie-review sentences (fixture)",
                    "n_samples": n, "mean_tokens": round(mean_len, 2),
                    "domain": "Wikipedia" if ds == "wiki" else "movie reviews",
                    "source": "synthetic fixture", "licence": "CC0", "hash": f"fixture-{ds}",
                    "built": "2024-01-01T00:00:00Z",
                }
            )
        if main:
            maps.append(_maps(rng, m, map_tokens))
        L = m["layers"]
        exp.append(
            pd.DataFrame(
                {"model": m["model"], "layer": np.arange(L),
                 "expansion_rate": np.round(0.7 + 0.35 * np.sin(np.arange(L)) ** 2 + rng.normal(0, 0.05, L), 4)}
            )
        )
        scopes = ("ATB", "ATBFF", "ATBFFRES", "ATBFFRESLN") if m["ln_position"] == "post" else (
            "ATB", "ATBLN", "ATBLNFF", "ATBLNFFRES")
        for ds in dsets:
            for layer in range(L):
                for sc in scopes:
                    rec.append({"model": m["model"], "dataset": ds, "layer": layer, "scope": sc,
                                "max_rel_error": float(10 ** rng.uniform(-7, -5.5))})
    model_cols = ["model", "source", "family", "class_name", "ln_position", "norm", "activation", "gated",
                  "d_model", "layers", "heads", "kv_heads", "ff_size", "params", "fingerprint", "dtype", "device",
                  "multipliers", "licence"]
    for m in models:
        m.setdefault("multipliers", "")
        m.setdefault("licence", "synthetic fixture")
    return {
        "k21_tokens": pd.concat(tok, ignore_index=True),
        "k21_freq": pd.concat(freq, ignore_index=True),
        "k21_expansion": pd.concat(exp, ignore_index=True),
        "k21_maps": pd.concat(maps, ignore_index=True),
        "models": pd.DataFrame(models)[model_cols],
        "datasets": pd.DataFrame(ds_rows),
        "recon_errors": pd.DataFrame(rec),
    }


def fixture_roles(n_variants: int = 0, n_seeds: int = 0, preset: str = "default") -> Roles:
    """The `Roles` matching `k21_fixture_tables` called with the same ``n_variants`` / ``n_seeds``."""
    variants = tuple(f"tiny-bert-v{k}" for k in range(n_variants))
    seeds = tuple(f"tiny-bert-seed_{k}" for k in range(n_seeds))
    return Roles(
        primary_encoder=PRIMARY_ENCODER,
        primary_causal=PRIMARY_CAUSAL,
        encoders=(PRIMARY_ENCODER, PRIMARY_CAUSAL) + variants + seeds,
        variants=variants,
        seed_group=seeds,
        datasets=DATASETS,
        preset=preset,
    )
