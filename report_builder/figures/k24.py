"""K24 figure declarations (Kobayashi et al., ICLR 2024: FF blocks through the lens of attention maps).

One `FigureSpec` per permanent id, in the order of SPEC §3: k24-fig1, k24-maps, k24-ctx-ff,
k24-ctx-components, k24-ctx-cumulative, k24-ffamp-top, k24-ffamp-categories, k24-res-norms,
k24-ln-dims, k24-models. Each builder reads the result tables named in ``analysis`` (see
ARCHITECTURE.md), draws with `charts_k24`, and computes a one-sentence ``reading`` from the data.
Layers are 0-based in the tables and shown (charts and readings) 1-based, as in the papers.

Pitfall: scope names differ between post-LN (ATB, ATBFF, ATBFFRES, ATBFFRESLN) and pre-LN models
(ATB, ATBLN, ATBLNFF, ATBLNFFRES); always look a model's LN position up (``models`` table, or the
scopes present) instead of assuming one order. No torch here.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from report_builder.analyses import k24_stats as ks
from report_builder.figures import charts_k24 as ck
from report_builder.figures.spec import FigureContext, FigureResult, FigureSpec, NotConfigured, register

PAPER = "K24"

CONFIG_BOTH = """models:
  - {name: all-MiniLM-L6-v2, source: minilm, role: primary_encoder}
  - {name: SmolLM2-135M-Instruct, source: smollm2, role: primary_causal}
datasets:
  - {id: wiki, n: 200}
"""
CONFIG_ENCODER = """models:
  - {name: all-MiniLM-L6-v2, source: minilm, role: primary_encoder}
datasets:
  - {id: wiki, n: 200}
"""
CONFIG_CAUSAL = """models:
  - {name: SmolLM2-135M-Instruct, source: smollm2, role: primary_causal}
datasets:
  - {id: wiki, n: 200}
"""
CONFIG_MANY = """models:
  - {name: all-MiniLM-L6-v2, source: minilm, role: primary_encoder}
  - {name: SmolLM2-135M-Instruct, source: smollm2, role: primary_causal}
  - {name: bert-base-uncased, source: bert-base-uncased, role: variant}
  - {name: gpt2, source: gpt2, role: variant}
datasets:
  - {id: wiki, n: 200}
  - {id: sentiment-sample, n: 200}
"""

IG_NOTE = ("FF terms use the closed-form Integrated Gradients attribution (zero baseline; exact "
           "completeness) unless the build was configured for numerical IG.")
CTX_NOTE = ("Change = 1 − Spearman ρ between the two maps A[i, j] = ‖z_{i←j}‖ of one sequence, over all "
            "non-pad pairs (only j ≤ i for causal models; bias terms excluded), averaged over the "
            "sequences of the dataset (sequences where ρ is undefined are dropped).")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _table(ctx: FigureContext, name: str, entry: str = CONFIG_BOTH) -> pd.DataFrame:
    df = ctx.tables.get(name)
    if df is None or len(df) == 0:
        raise NotConfigured(f"no K24 results ({name}) — configure at least one model and dataset for K24", entry)
    return df


def _ln_positions(ctx: FigureContext, df: pd.DataFrame | None = None) -> dict[str, str]:
    """model -> "post"/"pre", from the models table or (fallback) from the scopes in ``df``."""
    out: dict[str, str] = {}
    models = ctx.tables.get("models")
    if models is not None and len(models):
        out.update(dict(zip(models["model"], models["ln_position"])))
    if df is not None:
        scol = "scope" if "scope" in df.columns else ("to_scope" if "to_scope" in df.columns else None)
        for m in df["model"].unique():
            if m not in out:
                pre = scol is not None and df.loc[df["model"] == m, scol].astype(str).str.startswith("ATBLN").any()
                out[m] = "pre" if pre else "post"
    return out


def _model_order(ctx: FigureContext, present) -> list[str]:
    """Models present in the data, in configuration order (primary encoder, primary causal, others)."""
    present = list(dict.fromkeys(present))
    r = ctx.roles
    order = [m for m in (r.primary_encoder, r.primary_causal, *r.encoders, *r.variants, *r.seed_group) if m]
    return [m for m in dict.fromkeys(order) if m in present] + sorted(m for m in present if m not in order)


def _dataset_order(ctx: FigureContext, present) -> list[str]:
    present = list(dict.fromkeys(present))
    return [d for d in ctx.roles.datasets if d in present] + sorted(d for d in present if d not in ctx.roles.datasets)


def _primaries(ctx: FigureContext, present) -> list[str]:
    """The primary encoder and primary causal model where they have data; else every model present."""
    prim = [m for m in (ctx.roles.primary_encoder, ctx.roles.primary_causal) if m and m in set(present)]
    return prim or _model_order(ctx, present)


def _after_ff_scope(lnp: str) -> str:
    return ks.FF_SCOPES[lnp][1]


def _fmt(x: float, p: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{p}f}"


def _scope_sort(lnps) -> list[str]:
    out = []
    for p in ("post", "pre"):
        if p in set(lnps):
            out += [s for s in ks.SCOPES[p] if s not in out]
    return out


# ---------------------------------------------------------------------------------------------
# k24-fig1
# ---------------------------------------------------------------------------------------------


def build_fig1(ctx: FigureContext) -> FigureResult:
    maps = _table(ctx, "k24_maps")
    lnp = _ln_positions(ctx, maps)
    r = ctx.roles
    wanted = [(m, p) for m, p in ((r.primary_encoder, "post"), (r.primary_causal, "pre")) if m]
    have = [(m, lnp.get(m, p)) for m, p in wanted if m in set(maps["model"])]
    if not have:
        raise NotConfigured("k24-fig1 needs K24 maps of a primary encoder (post-LN) or a primary causal "
                            "(pre-LN) model; neither is configured", CONFIG_BOTH)
    panels, used, parts, data = [], [], [], []
    for m, p in have:
        mm = maps[maps["model"] == m]
        example = sorted(mm["example"].unique().tolist())[0]
        n_layers = int(mm["layer"].max()) + 1
        layer = n_layers // 2
        sel = mm[(mm["example"] == example) & (mm["layer"] == layer)]
        scopes = list(ks.SCOPES[p])
        kind = "post-LN" if p == "post" else "pre-LN"
        panels.append(ck.layer_diagram(p, f"{kind} layer ({m}): where each scope is read"))
        n_tok = int(sel["i"].max()) + 1
        panels.append(ck.scope_map_strip(sel, scopes, f"{m}, example {example}, layer {layer + 1} of {n_layers}",
                                         cell=max(6, min(14, 240 // max(n_tok, 1))), show_labels=n_tok <= 30))
        diag = sel[sel["i"] == sel["j"]].groupby("scope")["value"].mean()
        parts.append(f"{m} (layer {layer + 1}): self-attribution (mean diagonal of the row-normalised map) "
                     + ", ".join(f"{s} {diag.get(s, np.nan):.0%}" for s in scopes))
        used.append(m)
        data.append(sel)
    missing = [k for k, p in (("pre-LN", "pre"), ("post-LN", "post")) if p not in {q for _, q in have}]
    reading = "; ".join(parts) + "."
    params = {"layer": "middle layer (0-based n_layers // 2, shown 1-based)", "example": "first example",
              "diagram": "altair (rect/text/line marks)"}
    if missing:
        reading += (f" No {missing[0]} model is configured, so only the {have[0][1]}-LN diagram is shown "
                    f"(add a model with role {'primary_causal' if missing[0] == 'pre-LN' else 'primary_encoder'}).")
        params["missing_config"] = CONFIG_CAUSAL if missing[0] == "pre-LN" else CONFIG_ENCODER
    chart = alt.vconcat(*panels, spacing=12).resolve_scale(color="independent")
    return FigureResult(data=pd.concat(data, ignore_index=True), chart=chart, reading=reading, models=tuple(used),
                        params=params)


# ---------------------------------------------------------------------------------------------
# k24-maps
# ---------------------------------------------------------------------------------------------


MAX_EXPLORER_TOKENS = 64


def build_maps(ctx: FigureContext, max_tokens: int = MAX_EXPLORER_TOKENS) -> FigureResult:
    maps = _table(ctx, "k24_maps")
    n_long = int((maps.groupby(["model", "example"])["i"].max() >= max_tokens).sum())
    if n_long:  # keep the page light: long examples are cut to their first max_tokens positions
        maps = maps[(maps["i"] < max_tokens) & (maps["j"] < max_tokens)]
    lnp = _ln_positions(ctx, maps)
    models = _model_order(ctx, maps["model"].unique())
    panels, parts = [], []
    for k, m in enumerate(models):
        mm = maps[maps["model"] == m]
        scopes = [s for s in ks.SCOPES[lnp[m]] if s in set(mm["scope"])]
        panels.append(ck.map_explorer(mm, scopes, m, key=f"m{k}"))
        diag = mm[mm["i"] == mm["j"]].groupby("scope")["value"].mean()
        parts.append(f"{m}: " + " → ".join(f"{s} {diag.get(s, np.nan):.0%}" for s in scopes))
    chart = alt.vconcat(*panels, spacing=24).resolve_scale(color="independent") if len(panels) > 1 else panels[0]
    n_ex = maps.groupby("model")["example"].nunique().max()
    reading = ("Mean self-attribution (diagonal of the row-normalised map) over these examples and all layers: "
               + "; ".join(parts) + ".")
    if n_long:
        reading += f" {n_long} long example(s) are shown for their first {max_tokens} tokens only."
    return FigureResult(data=maps, chart=chart, reading=reading, models=tuple(models),
                        params={"examples_per_model": int(n_ex), "max_tokens": max_tokens})


# ---------------------------------------------------------------------------------------------
# ctx figures
# ---------------------------------------------------------------------------------------------


def _ctx(ctx: FigureContext) -> pd.DataFrame:
    return _table(ctx, "k24_ctx")


def _ctx_ff_chart(c: pd.DataFrame, models, datasets, title=""):
    d = c[(c["kind"] == "component") & (c["component"] == "FF")].copy()
    d["lo"] = (d["change"] - d["change_sd"].fillna(0)).clip(lower=0)
    d["hi"] = d["change"] + d["change_sd"].fillna(0)
    ch = ck.per_layer_lines(d, "change", "model", y_title="change through FF (1 − ρ)", color_sort=models,
                            column="dataset", column_sort=datasets, band=("lo", "hi"), title=title,
                            tooltip=["model:N", "dataset:N", "layer:Q", alt.Tooltip("change:Q", format=".3f"),
                                     alt.Tooltip("change_sd:Q", format=".3f"), "n_seqs:Q"])
    return d, ch


def build_ctx_ff(ctx: FigureContext) -> FigureResult:
    c = _ctx(ctx)
    models = _model_order(ctx, c["model"].unique())
    d, chart = _ctx_ff_chart(c, models, _dataset_order(ctx, c["dataset"].unique()))
    by = d.groupby("model")["change"].mean()
    top = d.loc[d["change"].idxmax()]
    reading = ("Mean change of the maps through FF alone (1 − ρ, mean over layers and datasets): "
               + ", ".join(f"{m} {by[m]:.3f}" for m in models if m in by.index)
               + f". Largest: {top['model']} layer {int(top['layer']) + 1} on {top['dataset']} ({top['change']:.3f}).")
    return FigureResult(data=d.drop(columns=["lo", "hi"]), chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(_dataset_order(ctx, d["dataset"].unique())),
                        params={"band": "± 1 SD over sequences"})


def _components_chart(c: pd.DataFrame, models, datasets, title=""):
    d = c[(c["kind"] == "component") & c["model"].isin(models)].copy()
    ch = ck.per_layer_lines(d, "change", "component", y_title="change (1 − ρ)", color_sort=["FF", "RES", "LN"],
                            color_range=[ck.COMPONENT_COLOURS[k] for k in ("FF", "RES", "LN")],
                            row="model", column="dataset", title=title, independent_x=True,
                            row_sort=models, column_sort=datasets,
                            tooltip=["model:N", "dataset:N", "layer:Q", "component:N", "from_scope:N",
                                     "to_scope:N", alt.Tooltip("change:Q", format=".3f"), "n_seqs:Q"])
    return d, ch


def build_ctx_components(ctx: FigureContext) -> FigureResult:
    c = _ctx(ctx)
    models = _primaries(ctx, c["model"].unique())
    d, chart = _components_chart(c, models, _dataset_order(ctx, c["dataset"].unique()))
    lnp = _ln_positions(ctx, c)
    parts = []
    for m in models:
        g = d[d["model"] == m].groupby("component")["change"].mean()
        order = ks.COMPONENTS[lnp.get(m, "post")]
        parts.append(f"{m}: " + ", ".join(f"{k} {g.get(k, np.nan):.3f}" for k in order))
    reading = "Mean change per component (1 − ρ, over layers and datasets) — " + "; ".join(parts) + "."
    return FigureResult(data=d, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(_dataset_order(ctx, d["dataset"].unique())))


def _cumulative_chart(c: pd.DataFrame, models, lnp, datasets, title=""):
    d = c[(c["kind"] == "cumulative") & c["model"].isin(models)].copy()
    sort = [s for s in _scope_sort([lnp.get(m, "post") for m in models]) if s != "ATB"]
    d = d.rename(columns={"to_scope": "scope"})
    ch = ck.per_layer_lines(d, "change", "scope", y_title="change from ATB (1 − ρ)", color_sort=sort,
                            row="model", column="dataset", title=title, independent_x=True,
                            row_sort=models, column_sort=datasets,
                            tooltip=["model:N", "dataset:N", "layer:Q", "component:N",
                                     alt.Tooltip("change:Q", format=".3f"), "n_seqs:Q"])
    return d.rename(columns={"scope": "to_scope"}), ch


def _cancellation(d: pd.DataFrame, m: str, lnp: str) -> tuple[float, float]:
    g = d[(d["model"] == m) & (d["kind"] == "cumulative")].groupby("to_scope")["change"].mean()
    return float(g.get(_after_ff_scope(lnp), np.nan)), float(g.get(ks.SCOPES[lnp][-1], np.nan))


def _cancellation_reading(d: pd.DataFrame, models, lnp) -> str:
    parts = []
    for m in models:
        p = lnp.get(m, "post")
        ff, whole = _cancellation(d, m, p)
        rest, v = ("RES and LN", "") if p == "post" else ("RES", "s")
        verdict = (f"{rest} largely cancel{v} FF's effect" if whole < 0.5 * ff else
                   (f"{rest} partly undo{'es' if v else ''} it" if whole < ff else
                    f"{rest} do{'es' if v else ''} not undo it"))
        parts.append(f"{m}: through FF the maps change by {_fmt(ff, 3)} (ATB→{_after_ff_scope(p)}, 1 − ρ, "
                     f"mean over layers and datasets), but by only {_fmt(whole, 3)} over the whole layer "
                     f"(ATB→{ks.SCOPES[p][-1]}): {verdict}")
    return "; ".join(parts) + "."


def build_ctx_cumulative(ctx: FigureContext) -> FigureResult:
    c = _ctx(ctx)
    models = _primaries(ctx, c["model"].unique())
    lnp = _ln_positions(ctx, c)
    d, chart = _cumulative_chart(c, models, lnp, _dataset_order(ctx, c["dataset"].unique()))
    return FigureResult(data=d, chart=chart, reading=_cancellation_reading(c, models, lnp), models=tuple(models),
                        datasets=tuple(_dataset_order(ctx, d["dataset"].unique())))


# ---------------------------------------------------------------------------------------------
# FF-amp
# ---------------------------------------------------------------------------------------------


def build_ffamp_top(ctx: FigureContext, per_layer: int = 5) -> FigureResult:
    p = _table(ctx, "k24_ffamp_pairs")
    models = _model_order(ctx, p["model"].unique())
    datasets = _dataset_order(ctx, p["dataset"].unique())
    p = p.assign(_m=p["model"].map(models.index), _d=p["dataset"].map(datasets.index))
    p = p.sort_values(["_m", "_d", "layer", "rank"]).drop(columns=["_m", "_d"]).reset_index(drop=True)
    table = p[p["rank"] <= per_layer].copy()
    table["pair"] = table["token_i"].astype(str) + " ← " + table["token_j"].astype(str)
    table = table[["model", "dataset", "layer", "rank", "pair", "category", "amp", "before", "after", "context"]]
    table[["amp", "before", "after"]] = table[["amp", "before", "after"]].round(3)
    chart = ck.top_pairs_strip(p, ks.CATEGORY_ORDER, models=models, datasets=datasets)
    shares = p["category"].value_counts(normalize=True)
    best = p.loc[p["amp"].idxmax()]
    reading = (f"Among all top pairs (every layer, model and dataset), the commonest categories are "
               + ", ".join(f"{c} {s:.0%}" for c, s in shares.head(3).items())
               + f". The most amplified pair is {best['token_i']} ← {best['token_j']} ({best['category']}, "
               f"{best['model']} layer {int(best['layer']) + 1}, amp {best['amp']:.3f}): “{best['context']}”.")
    return FigureResult(data=p, chart=chart, table=table, reading=reading, models=tuple(models),
                        datasets=tuple(datasets), params={"rows_per_layer_in_table": per_layer,
                                                         "k": int(p.groupby(["model", "dataset", "layer"]).size().max())})


def build_ffamp_categories(ctx: FigureContext) -> FigureResult:
    b = _table(ctx, "k24_ffamp_base")
    models = _model_order(ctx, b["model"].unique())
    cats = list(ks.CATEGORY_ORDER)
    chart = alt.vconcat(
        ck.pooled_share_bars(b, cats, title="Pooled over layers and datasets", models=models),
        ck.category_lift_heatmap(b, cats, title="Per layer: log2(share among top pairs / base rate); text = count",
                                 models=models, datasets=_dataset_order(ctx, b["dataset"].unique())),
        spacing=20,
    ).resolve_scale(color="independent")
    parts = []
    for m in models:
        g = b[b["model"] == m].groupby("category")[["top_count", "base_count"]].sum()
        ts, bs = g["top_count"] / max(g["top_count"].sum(), 1), g["base_count"] / max(g["base_count"].sum(), 1)
        lift = (ts / bs.replace(0, np.nan)).dropna()
        lift = lift[g.loc[lift.index, "top_count"] > 0]
        if len(lift):
            c = lift.idxmax()
            parts.append(f"{m}: {c} is {ts[c]:.0%} of top pairs vs {bs[c]:.1%} of all pairs (×{lift[c]:.1f})")
    reading = "Most over-represented category among FF-amplified pairs — " + "; ".join(parts) + "."
    return FigureResult(data=b, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(_dataset_order(ctx, b["dataset"].unique())),
                        params={"categories": cats, "lift_clip_log2": 3.0})


# ---------------------------------------------------------------------------------------------
# RES / LN
# ---------------------------------------------------------------------------------------------


def build_res_norms(ctx: FigureContext) -> FigureResult:
    r = _table(ctx, "k24_res_norms")
    models = _model_order(ctx, r["model"].unique())
    chart = ck.per_layer_lines(r, "ratio_q50", "model", y_title="‖FF output‖ / ‖residual‖ (median, 10–90 %)",
                               color_sort=models, column="dataset", band=("ratio_q10", "ratio_q90"),
                               column_sort=_dataset_order(ctx, r["dataset"].unique()),
                               tooltip=["model:N", "dataset:N", "layer:Q",
                                        alt.Tooltip("ratio_q10:Q", format=".3f"),
                                        alt.Tooltip("ratio_q50:Q", format=".3f"),
                                        alt.Tooltip("ratio_q90:Q", format=".3f"),
                                        alt.Tooltip("ratio_mean:Q", format=".3f"),
                                        alt.Tooltip("ff_norm_mean:Q", format=".2f"),
                                        alt.Tooltip("res_norm_mean:Q", format=".2f")])
    parts = []
    for m in models:
        g = r[r["model"] == m]
        below = int((g["ratio_q50"] < 1).sum())
        parts.append(f"{m}: median ratio below 1 in {below} of {len(g)} layer×dataset cells "
                     f"(range {g['ratio_q50'].min():.2f}–{g['ratio_q50'].max():.2f})")
    reading = ("FF output norm relative to the residual it is added to — " + "; ".join(parts)
               + ". A ratio below 1 means the residual dominates the sum, so RES dilutes FF's change.")
    return FigureResult(data=r, chart=chart, reading=reading, models=tuple(models),
                        datasets=tuple(_dataset_order(ctx, r["dataset"].unique())))


def build_ln_dims(ctx: FigureContext) -> FigureResult:
    t = _table(ctx, "k24_ln_dims")
    models = _model_order(ctx, t["model"].unique())
    dataset = _dataset_order(ctx, t["dataset"].unique())[0]
    d = t[t["dataset"] == dataset]
    summ = (d.groupby(["model", "layer"])
            .apply(lambda g: pd.Series({
                "kept_share": g["ln_out_change"].sum() / g["ff_change"].sum() if g["ff_change"].sum() > 0 else np.nan,
                # undefined (nan) when gamma is constant, e.g. a freshly initialised norm
                "rho_ff_gamma": (g["ff_change"].corr(g["ln_weight"].abs(), method="spearman")
                                 if g["ln_weight"].abs().nunique() > 1 else np.nan)}),
                   include_groups=False).reset_index())
    n_layers = int(d["layer"].max()) + 1
    scatter = ck.ln_dims_scatter(d, n_layers, title=f"Per dimension, one layer ({dataset})", models=models)
    long = summ.melt(id_vars=["model", "layer"], value_vars=["kept_share", "rho_ff_gamma"], var_name="statistic")
    long["statistic"] = long["statistic"].map({"kept_share": "Σ LN-output change / Σ FF change",
                                               "rho_ff_gamma": "Spearman ρ(FF change, |γ|)"})
    lines = ck.per_layer_lines(long, "value", "model", y_title="", color_sort=models, column="statistic",
                               y_zero=False, width=220, height=150, title="Per layer summary",
                               tooltip=["model:N", "layer:Q", "statistic:N", alt.Tooltip("value:Q", format=".3f")])
    chart = alt.vconcat(scatter, lines, spacing=20).resolve_scale(color="independent")
    parts = []
    for m in models:
        g = summ[summ["model"] == m]
        parts.append(f"{m}: LN passes on {g['kept_share'].mean():.0%} of FF's per-dimension change "
                     f"(mean over layers), ρ(FF change, |γ|) = {g['rho_ff_gamma'].mean():+.2f}")
    reading = f"On {dataset} — " + "; ".join(parts) + (
        ". A negative ρ means LN's weight is small exactly where FF's change concentrates.")
    return FigureResult(data=d, chart=chart, reading=reading, models=tuple(models), datasets=(dataset,),
                        params={"dataset": dataset, "kept_share": "Σ_dim ln_out_change / Σ_dim ff_change"})


# ---------------------------------------------------------------------------------------------
# k24-models
# ---------------------------------------------------------------------------------------------


def build_models(ctx: FigureContext) -> FigureResult:
    c = _ctx(ctx)
    models = _model_order(ctx, c["model"].unique())
    if len(models) < 1:
        raise NotConfigured("k24-models needs K24 results for at least one model", CONFIG_MANY)
    lnp = _ln_positions(ctx, c)
    ds = _dataset_order(ctx, c["dataset"].unique())
    _, ff = _ctx_ff_chart(c, models, ds, title="Change through FF")
    _, comp = _components_chart(c, models, ds, title="Change through each component")
    _, cum = _cumulative_chart(c, models, lnp, ds, title="Cumulative change from ATB")
    chart = alt.vconcat(ff, comp, cum, spacing=28).resolve_scale(color="independent")
    d = c[c["model"].isin(models)]
    return FigureResult(data=d, chart=chart, reading=_cancellation_reading(c, models, lnp), models=tuple(models),
                        datasets=tuple(_dataset_order(ctx, d["dataset"].unique())))


# ---------------------------------------------------------------------------------------------
# declarations
# ---------------------------------------------------------------------------------------------

SECTION = "K24: feed-forward blocks through attention maps"

FIGURES = [
    register(FigureSpec(
        id="k24-fig1", paper=PAPER, kind="diagram", section=SECTION,
        title="Where the scopes are read in a post-LN and a pre-LN layer",
        caption=("Layer diagrams of a post-LN layer (x' = LN₁(x + ATTN(x)), y = LN₂(x' + FF(x'))) and a pre-LN "
                 "layer (x' = x + ATTN(LN₁(x)), y = x' + FF(LN₂(x'))); dashed markers show where each scope's "
                 "decomposition z_i = Σ_j z_{i←j} + z_{i←bias} is read (post-LN: ATB, ATBFF, ATBFFRES, "
                 "ATBFFRESLN; pre-LN: ATB, ATBLN, ATBLNFF, ATBLNFFRES). Under each diagram, the real map "
                 "A[i, j] = ‖z_{i←j}‖ at every scope for the first example sequence at the middle layer "
                 "(⌊L/2⌋ + 1 of L, counting from 1) of the primary encoder and the primary causal model, each row normalised "
                 "to sum to 1 (bias excluded; causal models only j ≤ i). " + IG_NOTE),
        analysis=("k24_maps", "models"), build=build_fig1,
    )),
    register(FigureSpec(
        id="k24-maps", paper=PAPER, section=SECTION,
        title="Scope maps explorer",
        caption=("Contribution maps A[i, j] = ‖z_{i←j}‖ (row i = query/output token, column j = source token; "
                 "rows normalised to sum to 1, bias excluded) at each scope from ATB to the whole layer, for "
                 "a few example sequences, every layer, every configured model. Use the layer slider, the "
                 "scope selector and the example selector; axis labels are position:token. " + IG_NOTE),
        analysis=("k24_maps", "models"), build=build_maps,
    )),
    register(FigureSpec(
        id="k24-ctx-ff", paper=PAPER, section=SECTION,
        title="Contextualization change through FF",
        caption=("Per layer, how much the FF block changes the token-to-token map: ATB → ATBFF (post-LN) or "
                 "ATBLN → ATBLNFF (pre-LN). " + CTX_NOTE + " Band: ±1 SD over sequences. Colour = model; "
                 "one panel per dataset. " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=build_ctx_ff,
    )),
    register(FigureSpec(
        id="k24-ctx-components", paper=PAPER, section=SECTION,
        title="Contextualization change through each component",
        caption=("Per layer, the change between consecutive scopes, i.e. through each component after the "
                 "attention block: post-LN FF (ATB→ATBFF), RES (ATBFF→ATBFFRES), LN (ATBFFRES→ATBFFRESLN); "
                 "pre-LN LN (ATB→ATBLN), FF (ATBLN→ATBLNFF), RES (ATBLNFF→ATBLNFFRES). " + CTX_NOTE +
                 " Rows: the primary encoder and the primary causal model; columns: datasets. " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=build_ctx_components,
    )),
    register(FigureSpec(
        id="k24-ctx-cumulative", paper=PAPER, section=SECTION,
        title="Cumulative change from the attention block (cancellation)",
        caption=("Per layer, the change from the ATB map to each later scope (post-LN: ATBFF, ATBFFRES, "
                 "ATBFFRESLN; pre-LN: ATBLN, ATBLNFF, ATBLNFFRES). If the whole-layer curve lies below the "
                 "after-FF curve, RES (and LN) undo part of what FF changed. " + CTX_NOTE +
                 " Rows: primary models; columns: datasets. " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=build_ctx_cumulative,
    )),
    register(FigureSpec(
        id="k24-ffamp-top", paper=PAPER, kind="table", section=SECTION,
        title="Top FF-amplified token pairs",
        caption=("FF-amp[i, j] = Â_after[i, j] − Â_before[i, j], where Â is the map with rows normalised to sum "
                 "to 1, before = ATB (post-LN) or ATBLN (pre-LN) and after = the scope right after FF. Per "
                 "(model, dataset, layer) the k largest values over all sequences and pairs i ≠ j (j ≤ i for "
                 "causal models) are kept; the table lists the top 5 per layer with the query ← source tokens, "
                 "the text around them (⟦…⟧ marks both tokens) and the pair's linguistic category; the chart "
                 "shows every kept pair. " + IG_NOTE),
        analysis=("k24_ffamp_pairs", "models"), build=build_ffamp_top,
    )),
    register(FigureSpec(
        id="k24-ffamp-categories", paper=PAPER, section=SECTION,
        title="Linguistic categories of FF-amplified pairs vs base rates",
        caption=("Share of each pair category among the top-k FF-amplified pairs vs its base rate among all "
                 "valid pairs i ≠ j of the dataset (j ≤ i for causal models). Categories, first that applies: "
                 "special token (either token), same word (subword pieces of one word: WordPiece ##, BPE "
                 "pieces without a leading-space marker), multi-word name (both tokens in one span of ≥ 2 "
                 "capitalised words of the source text, found through the tokenizer's offsets; spaCy NER "
                 "when installed), adjacent (|i − j| = 1), identical token (same string, different words), "
                 "punctuation, other. Top: pooled over layers and datasets; bottom: log₂(top share / base "
                 "share) per layer, clipped to ±3, with the number of top pairs in each cell."),
        analysis=("k24_ffamp_base", "models"), build=build_ffamp_categories,
    )),
    register(FigureSpec(
        id="k24-res-norms", paper=PAPER, section=SECTION,
        title="FF output norm vs residual norm",
        caption=("Per layer, the ratio ‖FF output_i‖ / ‖residual input_i‖ over all non-pad tokens of the "
                 "dataset, where the residual is the vector FF's output is added to (post-LN: the LN₁ output; "
                 "pre-LN: the stream after attention). Line: median; band: 10th–90th percentile. Colour = "
                 "model; one panel per dataset."),
        analysis=("k24_res_norms", "models"), build=build_res_norms,
    )),
    register(FigureSpec(
        id="k24-ln-dims", paper=PAPER, section=SECTION,
        title="FF's change per dimension vs the LN weight",
        caption=("For the primary dataset, per hidden dimension: FF change = mean |FF output| in that "
                 "dimension over tokens, LN weight = γ of the norm that follows (post-LN LN₂; pre-LN the next "
                 "layer's LN₁), LN-output change = mean |change of the LN output that FF causes| in that "
                 "dimension; colour = kept ratio (LN-output change / FF change). The slider picks the layer. "
                 "Bottom: per layer, Σ LN-output change / Σ FF change over dimensions and the Spearman ρ "
                 "between FF change and |γ| across dimensions."),
        analysis=("k24_ln_dims", "models"), build=build_ln_dims,
    )),
    register(FigureSpec(
        id="k24-models", paper=PAPER, section=SECTION,
        title="Contextualization change for every configured model",
        caption=("k24-ctx-ff, k24-ctx-components and k24-ctx-cumulative for every configured model (rows) and "
                 "dataset (columns). " + CTX_NOTE + " " + IG_NOTE),
        analysis=("k24_ctx", "models"), build=build_models,
    )),
]
