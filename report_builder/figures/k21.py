"""K21 (Kobayashi et al., EMNLP 2021) figures and tables, declared as `FigureSpec`s in paper order.

Every id of SPEC §3 is registered at import. Each builder reads the result tables named in
``analysis`` from `FigureContext.tables`, derives numbers with `report_builder.analyses.k21_stats`,
and draws with the pure builders of `report_builder.figures.charts`.

Role mapping (which configured model/dataset each figure uses):

* fig1 — ``roles.primary_encoder``, first example of ``k21_maps`` (the K21 sentence pair).
* tab2 — every model of ``roles.encoders`` on ``roles.datasets[0]``.
* fig3, tab3, fig4 — ``roles.primary_encoder`` on ``roles.datasets[0]``.
* tab5 — every model of ``roles.variants``; fig5+k — ``roles.variants[k]`` (k = 0…6), on ``datasets[0]``.
* tab6, tab10 — ``roles.primary_encoder`` on every dataset; fig12+k — ``roles.datasets[1 + k]``.
* tab7, tab11 — the models of ``roles.seed_group`` (at least two); fig15+k — ``roles.seed_group[k]``.
* tab8 — every model with ``k21_expansion`` rows (seed-group members summarised as one group row).
* tab9 — tab3 for every model of ``roles.encoders``.

When a role is not configured the builder raises `NotConfigured` with the YAML entries that would
produce the figure. Paper numbers are attached (``FigureResult.paper``) only under the ``paper`` preset
and only for matching model sources / datasets (see `report_builder.figures.reported`).

Fig. 2 is a diagram: ``FigureResult.params["svg"]`` holds a standalone SVG string (embed it inline);
``chart`` is ``None``. Layers are 0-based in the data and shown 1-based in charts, as in the paper.

Pitfall: never draw a figure from rows of another model or dataset than the caption says — every
builder filters by (model, dataset) and raises `NotConfigured` when that leaves nothing.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from report_builder.analyses import k21_stats as st
from report_builder.figures import charts, reported
from report_builder.figures.spec import FigureContext, FigureResult, FigureSpec, NotConfigured, register

METHODS = st.METHODS
PAPER = "K21"

#: Paper model variants in the order of the paper's appendix figures (fig5 … fig11).
PAPER_VARIANTS: tuple[tuple[str, str], ...] = (
    ("bert-large", "bert-large-uncased"),
    ("bert-medium", "prajjwal1/bert-medium"),
    ("bert-small", "prajjwal1/bert-small"),
    ("bert-mini", "prajjwal1/bert-mini"),
    ("bert-tiny", "prajjwal1/bert-tiny"),
    ("roberta-base", "roberta-base"),
    ("roberta-large", "roberta-large"),
)
#: The paper's non-Wikipedia datasets (fig12 … fig14) with their sizes.
PAPER_EXTRA_DATASETS: tuple[tuple[str, int], ...] = (("sst2", 872), ("mnli", 1000), ("conll2003", 1000))
N_SEEDS_PAPER = 25
PRIMARY_DATASET_ENTRY = "  - {id: wiki, n: 992}"

# ---------------------------------------------------------------------------------------------- helpers


def _models_yaml(entries: Sequence[tuple[str, str, str]]) -> str:
    return "models:\n" + "\n".join(f"  - {{name: {n}, source: {s}, role: {r}}}" for n, s, r in entries) + "\n"


def _datasets_yaml(entries: Sequence[tuple[str, int]]) -> str:
    return "datasets:\n" + "\n".join(f"  - {{id: {i}, n: {n}}}" for i, n in entries) + "\n"


def _primary_entry() -> str:
    return _models_yaml([("bert-base-uncased", "bert-base-uncased", "primary_encoder")]) + \
        "datasets:\n" + PRIMARY_DATASET_ENTRY + "\n"


def _table(ctx: FigureContext, name: str, entry: str) -> pd.DataFrame:
    df = ctx.tables.get(name)
    if df is None or len(df) == 0:
        raise NotConfigured(f"result table {name!r} is missing from this build (its analysis did not run)", entry)
    return df


def _source(ctx: FigureContext, model: str) -> str | None:
    m = ctx.tables.get("models")
    if m is None or "source" not in m.columns:
        return None
    hit = m.loc[m["model"] == model, "source"]
    return str(hit.iloc[0]) if len(hit) else None


def _primary(ctx: FigureContext) -> tuple[str, str]:
    r = ctx.roles
    if not r.primary_encoder or not r.datasets:
        raise NotConfigured("no primary encoder and primary dataset configured", _primary_entry())
    return r.primary_encoder, r.datasets[0]


def _rows(ctx: FigureContext, table: str, model: str, dataset: str | None, role: str = "primary_encoder") -> pd.DataFrame:
    src = _source(ctx, model) or model
    entry = _models_yaml([(model, src, role)])
    if dataset is not None:
        entry += "datasets:\n" + f"  - {{id: {dataset}, n: {_n_samples(ctx, dataset)}}}\n"
    df = _table(ctx, table, entry)
    sel = df["model"] == model
    if dataset is not None and "dataset" in df.columns:
        sel &= df["dataset"] == dataset
    out = df[sel]
    if len(out) == 0:
        where = f" on dataset {dataset!r}" if dataset is not None else ""
        raise NotConfigured(f"no {table} rows for model {model!r}{where}; configure it to produce them", entry)
    return out


def _n_samples(ctx: FigureContext, dataset: str) -> int:
    d = ctx.tables.get("datasets")
    if d is not None and len(d) and "n_samples" in d.columns:
        hit = d.loc[d["dataset"] == dataset, "n_samples"]
        if len(hit):
            return int(hit.iloc[0])
    return dict(PAPER_EXTRA_DATASETS).get(dataset, 992 if dataset in ("wiki", "wikipedia") else 1000)


def _paper(ctx: FigureContext, fid: str, pairs: Sequence[tuple[str, str | None]]) -> pd.DataFrame | None:
    """The paper's numbers for (model, dataset) pairs whose source matches — only under the paper preset."""
    if ctx.roles.preset != "paper":
        return None
    frames = []
    for model, dataset in pairs:
        df = reported.paper_numbers(fid, _source(ctx, model), dataset, ctx.reported or None)
        if df is not None and len(df):
            frames.append(df.assign(model=model, dataset=dataset))
    return pd.concat(frames, ignore_index=True) if frames else None


def _fmt_pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{x:.1f}%"


def _stats_table(df: pd.DataFrame, key: str, key_title: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            key_title: df[key],
            "Method": df["method"],
            "Mean (%)": df["mean"].round(2),
            "Max (%)": df["max"].round(2),
            "Min (%)": df["min"].round(2),
            "Tokens pooled": df["n"],
        }
    )


def _mixing_reading(stats: pd.DataFrame, who: str) -> str:
    s = stats.set_index("method")["mean"]
    if "ATTNRESLN-N" not in s or "ATTN-N" not in s:
        return ""
    a, b = s["ATTN-N"], s["ATTNRESLN-N"]
    factor = f" (~{a / b:.1f}× less)" if b > 0 else ""
    return (f"For {who}, the ATTNRESLN-N mean mixing ratio is {b:.1f}% against ATTN-N {a:.1f}%: "
            f"counting the residual connection and layer normalisation cuts the measured context mixing{factor}.")


# ---------------------------------------------------------------------------------------------- fig1

FIG1_METHODS = ("ATTN-N", "ATTNRESLN-N")


def build_fig1(ctx: FigureContext) -> FigureResult:
    model = ctx.roles.primary_encoder
    if not model:
        raise NotConfigured("no primary encoder configured", _primary_entry())
    maps = _rows(ctx, "k21_maps", model, None)
    example = maps["example"].iloc[0]
    data = maps[(maps["example"] == example) & (maps["method"].isin(FIG1_METHODS))]
    if set(FIG1_METHODS) - set(data["method"]):
        raise NotConfigured(f"k21_maps for {model!r} lacks {FIG1_METHODS}", _primary_entry())
    data = data.reset_index(drop=True)
    chart = charts.token_map_heatmap(data, panel="method", panel_order=FIG1_METHODS, size=300)
    # share of each row's total that stays on the diagonal (the token itself), mean over rows and layers
    diag = data.assign(d=data["i"] == data["j"])
    tot = diag.groupby(["method", "layer", "i"])["value"].sum()
    own = diag[diag["d"]].groupby(["method", "layer", "i"])["value"].sum()
    share = (own / tot).groupby("method").mean() * 100
    reading = (f"On this sentence pair, a token's own term carries on average {share['ATTN-N']:.0f}% of its row in "
               f"ATTN-N but {share['ATTNRESLN-N']:.0f}% in ATTNRESLN-N: once the residual and LayerNorm are "
               f"included, each token mostly keeps its own information.")
    n_tok = int(data["i"].max()) + 1
    return FigureResult(
        data=data, chart=chart, reading=reading, models=(model,), datasets=(),
        params={"example": str(example), "methods": list(FIG1_METHODS), "tokens": n_tok,
                "layers": int(data["layer"].nunique())},
    )


# ---------------------------------------------------------------------------------------------- fig2

def attention_block_svg() -> str:
    """The K21 Fig. 2 diagram (ATTN → RES → LN) with the decomposed term at each point."""
    stages = [
        charts.Stage("ATTN", "box", ("Σ_h α^h_ij f^h(x_j)", "ATTN-W: ᾱ_ij   ATTN-N: ‖·‖")),
        charts.Stage("RES", "add", ("+ δ_ij x_i", "ATTNRES-N: ‖·‖")),
        charts.Stage("LN", "box", ("γ⊙(t − mean t)/s_i", "ATTNRESLN-N: ‖·‖")),
    ]
    return charts.chain_diagram_svg(
        stages,
        skips=[(0, 1)],
        spans=[("ATTN-W, ATTN-N", 0, 0), ("ATTNRES-W, ATTNRES-N", 0, 1), ("ATTNRESLN-N (= ATB)", 0, 2)],
        input_label="x_j",
        output_label="x̃_i",
        title="K21 Fig. 2: the attention block decomposed",
        description=("Input vectors pass through multi-head attention (ATTN), the residual connection adds "
                     "each token's own input (RES), and layer normalisation (LN) rescales the sum. Each "
                     "output vector is written exactly as a sum of per-input-token terms plus a bias term; "
                     "the five methods measure those terms after ATTN, after RES and after LN."),
    )


def build_fig2(ctx: FigureContext) -> FigureResult:
    data = pd.DataFrame(
        {
            "stage": ["ATTN", "RES", "LN"],
            "operation": ["multi-head attention", "residual connection", "layer normalisation"],
            "term_i_from_j": [
                "Σ_h α^h_ij (x_j W_V^h + b_V^h) W_O^h",
                "ATTN_{i←j} + δ_ij x_i",
                "γ ⊙ (t_{i←j} − mean(t_{i←j})) / s_i",
            ],
            "bias_term": ["b_O", "b_O", "γ ⊙ (b_O − mean b_O) / s_i + β"],
            "methods": ["ATTN-W (ᾱ_ij), ATTN-N", "ATTNRES-W (½ᾱ + ½I), ATTNRES-N", "ATTNRESLN-N"],
        }
    )
    return FigureResult(
        data=data, chart=None, table=None,
        reading="The three methods differ only in where the decomposed vector is measured: after ATTN, after RES, or after LN.",
        params={"svg": attention_block_svg(), "format": "svg"},
    )


# ---------------------------------------------------------------------------------------------- tab1

def build_tab1(ctx: FigureContext) -> FigureResult:
    d = _table(ctx, "datasets", "datasets:\n" + PRIMARY_DATASET_ENTRY + "\n")
    order = {k: n for n, k in enumerate(ctx.roles.datasets)}
    d = d.assign(_o=d["dataset"].map(lambda x: order.get(x, len(order)))).sort_values(["_o", "dataset"])
    models = [m for m in ctx.roles.encoders if m in set(d["model"])] + sorted(set(d["model"]) - set(ctx.roles.encoders))
    # seed-group members share one tokenizer: one column for the group, not one per seed
    seeds = [m for m in models if m in set(ctx.roles.seed_group)]
    models = [m for m in models if m not in seeds[1:]]
    base = d.drop_duplicates("dataset")[["dataset", "name", "domain", "n_samples", "source", "licence"]]
    table = base.rename(columns={"dataset": "Dataset", "name": "Name", "domain": "Domain", "n_samples": "Samples",
                                 "source": "Source", "licence": "Licence"}).reset_index(drop=True)
    for m in models:
        col = d[d["model"] == m].set_index("dataset")["mean_tokens"]
        table.insert(4 + models.index(m), f"Mean tokens ({m})", table["Dataset"].map(col).round(1).to_numpy())
    first = table.iloc[0]
    reading = f"{len(table)} dataset(s); the primary set {first['Dataset']!r} has {int(first['Samples'])} samples."
    paper = None
    if ctx.roles.preset == "paper":
        frames = [p.assign(dataset=ds) for ds in table["Dataset"]
                  if (p := reported.paper_numbers("k21-tab1", None, ds, ctx.reported or None)) is not None]
        paper = pd.concat(frames, ignore_index=True) if frames else None
    return FigureResult(data=d.drop(columns="_o").reset_index(drop=True), table=table, reading=reading,
                        paper=paper, models=tuple(models), datasets=tuple(table["Dataset"]))


# ---------------------------------------------------------------------------------------------- tab2

def build_tab2(ctx: FigureContext) -> FigureResult:
    primary, ds = _primary(ctx)
    _rows(ctx, "k21_tokens", primary, ds)  # raises NotConfigured if the primary encoder has no rows
    all_tok = ctx.tables["k21_tokens"]
    all_tok = all_tok[all_tok["dataset"] == ds]
    models = [m for m in (ctx.roles.encoders or (primary,)) if (all_tok["model"] == m).any()]
    if primary not in models:
        models.insert(0, primary)
    stats = st.per_model_stats(all_tok, models).assign(dataset=ds)
    reading = _mixing_reading(stats[stats["model"] == primary], primary)
    return FigureResult(
        data=stats, table=_stats_table(stats, "model", "Model"), reading=reading,
        paper=_paper(ctx, "k21-tab2", [(m, ds) for m in models]), models=tuple(models), datasets=(ds,),
        params={"missing": [m for m in ctx.roles.encoders if m not in models]},
    )


# ---------------------------------------------------------------------------------------------- fig3 family

def category_heatmap_result(ctx: FigureContext, model: str, dataset: str, role: str) -> FigureResult:
    """Fig. 3-style result for one model and dataset (used by fig3, fig5–17)."""
    tokens = _rows(ctx, "k21_tokens", model, dataset, role)
    means = st.layer_category_means(tokens)
    means.insert(0, "dataset", dataset)
    means.insert(0, "model", model)
    plot = means.assign(Layer=means["layer"] + 1, value=means["value"].round(2))
    cats = [c for c in st.CATEGORIES if c in set(plot["category"])]
    cats += sorted(set(plot["category"]) - set(cats))
    chart = charts.annotated_heatmap(
        plot, x="category", y="Layer", value="value", facet="method", facet_order=METHODS,
        x_order=cats, y_order=sorted(plot["Layer"].unique()), domain=(0, 100), fmt=".1f",
        cell_width=26, cell_height=18 if plot["Layer"].max() <= 16 else 13, columns=5,
        x_title="token category", y_title="layer", value_title="mixing ratio (%)", tooltip_extra=("n_seqs",),
        legend_orient="bottom",
    )
    ov = means[(means["category"] == "Overall") & (means["method"] == "ATTNRESLN-N")].sort_values("layer")
    reading = ""
    if len(ov):
        first, last = ov["value"].iloc[0], ov["value"].iloc[-1]
        reading = (f"ATTNRESLN-N overall mixing goes from {first:.1f}% in layer 1 to {last:.1f}% in layer "
                   f"{int(ov['layer'].iloc[-1]) + 1}")
        rn = means[(means["method"] == "ATTNRESLN-N")].groupby("category")["value"].mean()
        sp = [c for c in ("[CLS]", "[SEP]") if c in rn]
        if "Normal" in rn and sp:
            reading += (f"; averaged over layers, " + ", ".join(f"{c} {rn[c]:.1f}%" for c in sp)
                        + f" vs Normal tokens {rn['Normal']:.1f}%")
        reading += "."
    return FigureResult(data=means, chart=chart, reading=reading, models=(model,), datasets=(dataset,),
                        params={"layers": int(means["layer"].nunique()), "categories": cats})


def build_fig3(ctx: FigureContext) -> FigureResult:
    model, ds = _primary(ctx)
    return category_heatmap_result(ctx, model, ds, "primary_encoder")


def _variant_builder(k: int) -> Callable[[FigureContext], FigureResult]:
    def build(ctx: FigureContext) -> FigureResult:
        v = ctx.roles.variants
        if len(v) <= k or not ctx.roles.datasets:
            need = PAPER_VARIANTS[len(v): k + 1] if len(v) <= k else ()
            entry = _models_yaml([(n, s, "variant") for n, s in need]) if need else _primary_entry()
            raise NotConfigured(
                f"k21-fig{5 + k} shows model variant #{k + 1} (roles.variants[{k}]); {len(v)} variant(s) configured. "
                "Variants are taken in configuration order; add these entries to the models list.", entry)
        return category_heatmap_result(ctx, v[k], ctx.roles.datasets[0], "variant")
    return build


def _dataset_builder(k: int) -> Callable[[FigureContext], FigureResult]:
    def build(ctx: FigureContext) -> FigureResult:
        model, _ = _primary(ctx)
        d = ctx.roles.datasets
        if len(d) <= k + 1:
            need = [e for e in PAPER_EXTRA_DATASETS if e[0] not in d][: k + 2 - len(d)]
            raise NotConfigured(
                f"k21-fig{12 + k} shows non-primary dataset #{k + 1} (roles.datasets[{k + 1}]); "
                f"{max(len(d) - 1, 0)} configured. Add these entries to the datasets list.", _datasets_yaml(need))
        return category_heatmap_result(ctx, model, d[k + 1], "primary_encoder")
    return build


def _seed_entry() -> str:
    return _models_yaml([(f"multiberts-seed_{s}", f"google/multiberts-seed_{s}", "seed_group")
                         for s in range(N_SEEDS_PAPER)])


def _seed_builder(k: int) -> Callable[[FigureContext], FigureResult]:
    def build(ctx: FigureContext) -> FigureResult:
        g = ctx.roles.seed_group
        if len(g) <= k or not ctx.roles.datasets:
            raise NotConfigured(
                f"k21-fig{15 + k} shows seed #{k + 1} of the seed group (roles.seed_group[{k}]); "
                f"{len(g)} seed model(s) configured. The paper used {N_SEEDS_PAPER} MultiBERTs seeds.", _seed_entry())
        return category_heatmap_result(ctx, g[k], ctx.roles.datasets[0], "seed_group")
    return build


# ---------------------------------------------------------------------------------------------- tab3 / fig4

def _spearman_table(df: pd.DataFrame, key: str | None, key_title: str | None) -> pd.DataFrame:
    out = pd.DataFrame({
        "Method": df["method"],
        "ρ (all tokens)": df["rho_all"].round(3),
        "ρ (without [CLS], [SEP])": df["rho_no_special"].round(3),
        "Occurrences": df["n_all"],
    })
    if key is not None:
        out.insert(0, key_title, df[key].to_numpy())
    return out


def _rho_reading(fs: pd.DataFrame, who: str) -> str:
    r = fs.set_index("method")
    if "ATTNRESLN-N" not in r.index:
        return ""
    a, b = r.loc["ATTNRESLN-N", "rho_all"], r.loc["ATTNRESLN-N", "rho_no_special"]
    if pd.isna(a):
        return f"For {who} the ATTNRESLN-N correlation is undefined (constant ratios or ranks)."
    trend = "frequent tokens mix more with their context" if a < 0 else "rare tokens mix more with their context"
    return f"For {who}, ATTNRESLN-N: ρ = {a:.2f} ({b:.2f} without [CLS]/[SEP]) — {trend}."


def build_tab3(ctx: FigureContext) -> FigureResult:
    model, ds = _primary(ctx)
    fs = st.frequency_spearman(_rows(ctx, "k21_freq", model, ds))
    fs.insert(0, "dataset", ds)
    fs.insert(0, "model", model)
    return FigureResult(data=fs, table=_spearman_table(fs, None, None), reading=_rho_reading(fs, model),
                        paper=_paper(ctx, "k21-tab3", [(model, ds)]), models=(model,), datasets=(ds,))


FIG4_GROUPS = ("[CLS]", "[SEP]", ".", ",", "other")
FIG4_COLOURS = ("#D55E00", "#CC79A7", "#009E73", "#E69F00", "#0072B2")
FIG4_MAX_OTHER = 5000


def build_fig4(ctx: FigureContext) -> FigureResult:
    model, ds = _primary(ctx)
    freq = _rows(ctx, "k21_freq", model, ds)
    stripped = freq["token"].astype(str).str.lstrip("Ġ▁ ")
    group = np.select(
        [freq["category"] == "[CLS]", freq["category"] == "[SEP]", stripped == ".", stripped == ","],
        ["[CLS]", "[SEP]", ".", ","], default="other",
    )
    pts = pd.DataFrame({"token": freq["token"].astype(str).to_numpy(), "group": group,
                        "freq_rank": freq["freq_rank"].astype(int).to_numpy(),
                        "ATTNRESLN-N": freq["ATTNRESLN-N"].round(2).to_numpy()})
    other = np.flatnonzero(pts["group"].to_numpy() == "other")
    n_other = len(other)
    if n_other > FIG4_MAX_OTHER:
        keep_other = np.sort(np.random.default_rng(0).choice(other, FIG4_MAX_OTHER, replace=False))
        keep = np.sort(np.concatenate([np.flatnonzero(pts["group"].to_numpy() != "other"), keep_other]))
        pts = pts.iloc[keep].reset_index(drop=True)
    chart = charts.scatter(
        pts, x="freq_rank", y="ATTNRESLN-N", color="group", color_order=FIG4_GROUPS, color_range=FIG4_COLOURS,
        log_x=True, x_title="frequency rank (log; 1 = most frequent)",
        y_title="ATTNRESLN-N mixing ratio, mean over layers (%)", y_domain=(0, 100), tooltip=("token",),
    )
    fs = st.frequency_spearman(freq)
    return FigureResult(
        data=pts, chart=chart, reading=_rho_reading(fs, model), paper=_paper(ctx, "k21-fig4", [(model, ds)]),
        models=(model,), datasets=(ds,),
        params={"other_points_shown": int(min(n_other, FIG4_MAX_OTHER)), "other_points_total": int(n_other),
                "subsample_seed": 0},
    )


# ---------------------------------------------------------------------------------------------- tab4

def build_tab4(ctx: FigureContext) -> FigureResult:
    m = _table(ctx, "models", _primary_entry())
    order = {k: n for n, k in enumerate(ctx.roles.encoders)}
    m = m.assign(_o=m["model"].map(lambda x: order.get(x, len(order)))).sort_values(["_o", "model"]).drop(columns="_o")
    heads = m["heads"].astype(str) + np.where(m["kv_heads"] != m["heads"], " (" + m["kv_heads"].astype(str) + " KV)", "")
    act = m["activation"].astype(str) + np.where(m["gated"].astype(bool), " (gated)", "")
    table = pd.DataFrame({
        "Model": m["model"], "Source": m["source"], "Class": m["class_name"], "Layers": m["layers"],
        "d": m["d_model"], "Heads": heads, "FF size": m["ff_size"],
        "Norm": m["ln_position"].astype(str) + "-" + m["norm"].astype(str), "Activation": act,
        "Parameters (M)": (m["params"] / 1e6).round(1),
    }).reset_index(drop=True)
    return FigureResult(data=m.reset_index(drop=True), table=table,
                        reading=f"{len(table)} model(s) analysed; layer counts range {m['layers'].min()}–{m['layers'].max()}.",
                        models=tuple(m["model"]))


# ---------------------------------------------------------------------------------------------- tab5 / tab6

def build_tab5(ctx: FigureContext) -> FigureResult:
    v = ctx.roles.variants
    if not v:
        raise NotConfigured("no model variants configured (role: variant)",
                            _models_yaml([(n, s, "variant") for n, s in PAPER_VARIANTS]))
    if not ctx.roles.datasets:
        raise NotConfigured("no dataset configured", "datasets:\n" + PRIMARY_DATASET_ENTRY + "\n")
    ds = ctx.roles.datasets[0]
    tok = _table(ctx, "k21_tokens", _models_yaml([(n, s, "variant") for n, s in PAPER_VARIANTS]))
    tok = tok[tok["dataset"] == ds]
    models = [x for x in v if (tok["model"] == x).any()]
    if not models:
        raise NotConfigured(f"no k21_tokens rows for the variants {list(v)} on {ds!r}",
                            _models_yaml([(x, _source(ctx, x) or x, "variant") for x in v]))
    stats = st.per_model_stats(tok, models).assign(dataset=ds)
    r = stats[stats["method"] == "ATTNRESLN-N"].set_index("model")["mean"]
    reading = (f"ATTNRESLN-N mean mixing ratio ranges from {r.min():.1f}% ({r.idxmin()}) to {r.max():.1f}% "
               f"({r.idxmax()}) across the {len(r)} variant(s).")
    return FigureResult(data=stats, table=_stats_table(stats, "model", "Model"), reading=reading,
                        paper=_paper(ctx, "k21-tab5", [(x, ds) for x in models]), models=tuple(models), datasets=(ds,),
                        params={"missing": [x for x in v if x not in models]})


def _need_datasets(ctx: FigureContext, fid: str) -> None:
    d = ctx.roles.datasets
    if len(d) < 2:
        need = [e for e in PAPER_EXTRA_DATASETS if e[0] not in d]
        raise NotConfigured(f"{fid} compares datasets; only {len(d)} configured. Add these entries to the datasets list.",
                            _datasets_yaml(need))


def build_tab6(ctx: FigureContext) -> FigureResult:
    model, _ = _primary(ctx)
    _need_datasets(ctx, "k21-tab6")
    frames = []
    for ds in ctx.roles.datasets:
        frames.append(st.pooled_stats(_rows(ctx, "k21_tokens", model, ds)).assign(model=model, dataset=ds))
    stats = pd.concat(frames, ignore_index=True)
    r = stats[stats["method"] == "ATTNRESLN-N"].set_index("dataset")["mean"]
    reading = (f"For {model}, the ATTNRESLN-N mean mixing ratio is "
               + ", ".join(f"{v:.1f}% on {k}" for k, v in r.items()) + ".")
    return FigureResult(data=stats, table=_stats_table(stats, "dataset", "Dataset"), reading=reading,
                        paper=_paper(ctx, "k21-tab6", [(model, ds) for ds in ctx.roles.datasets]),
                        models=(model,), datasets=tuple(ctx.roles.datasets))


# ---------------------------------------------------------------------------------------------- tab7

def _need_seeds(ctx: FigureContext, fid: str) -> tuple[tuple[str, ...], str]:
    g = ctx.roles.seed_group
    if len(g) < 2 or not ctx.roles.datasets:
        raise NotConfigured(f"{fid} needs a seed group of at least two models (roles.seed_group); {len(g)} configured",
                            _seed_entry())
    return g, ctx.roles.datasets[0]


def build_tab7(ctx: FigureContext) -> FigureResult:
    g, ds = _need_seeds(ctx, "k21-tab7")
    tok = _table(ctx, "k21_tokens", _seed_entry())
    tok = tok[(tok["dataset"] == ds) & tok["model"].isin(g)]
    if len(tok) == 0:
        raise NotConfigured(f"no k21_tokens rows for the seed group on {ds!r}", _seed_entry())
    stats = st.seed_group_stats(tok, g).assign(dataset=ds)
    table = pd.DataFrame({
        "Method": stats["method"],
        "Mean (SD) (%)": [f"{a:.2f} ({b:.2f})" for a, b in zip(stats["mean"], stats["sd"])],
        "Max (%)": stats["max"].round(2), "Min (%)": stats["min"].round(2), "Models": stats["n_models"],
    })
    r = stats.set_index("method")
    reading = ""
    if "ATTNRESLN-N" in r.index:
        m_ln, sd_ln, m_a = r.loc["ATTNRESLN-N", "mean"], r.loc["ATTNRESLN-N", "sd"], r.loc["ATTN-N", "mean"]
        reading = (f"Over {int(r.loc['ATTNRESLN-N', 'n_models'])} seeds, the ATTNRESLN-N mean mixing ratio is "
                   f"{m_ln:.1f}% (SD {sd_ln:.2f}) against ATTN-N {m_a:.1f}%")
        reading += (": the gap is far larger than the seed-to-seed spread." if sd_ln * 10 < abs(m_a - m_ln)
                    else ".")
    paper = None
    if ctx.roles.preset == "paper":
        srcs = [_source(ctx, m) or "" for m in g]
        if all(s.startswith(reported.SEED_GROUP_PREFIX) for s in srcs):
            paper = reported.paper_numbers("k21-tab7", srcs[0], ds, ctx.reported or None)
    return FigureResult(data=stats, table=table, reading=reading, paper=paper, models=tuple(g), datasets=(ds,))


# ---------------------------------------------------------------------------------------------- tab8

def build_tab8(ctx: FigureContext) -> FigureResult:
    exp = _table(ctx, "k21_expansion", _primary_entry())
    g = set(ctx.roles.seed_group) if len(ctx.roles.seed_group) >= 2 else set()
    order = {k: n for n, k in enumerate(ctx.roles.encoders)}
    singles = exp[~exp["model"].isin(g)]
    singles = singles.assign(_o=singles["model"].map(lambda x: order.get(x, len(order)))).sort_values(
        ["_o", "model", "layer"]).drop(columns="_o")
    summ = st.expansion_summary(singles)
    summ["group"] = False
    lines = singles[["model", "layer", "expansion_rate"]].assign(report="this build")
    if g and exp["model"].isin(g).any():
        gs = st.expansion_group_summary(exp, sorted(g))
        name = f"seed group ({gs['n_models']} models)"
        summ = pd.concat([summ, pd.DataFrame([{"model": name, "mean": gs["mean"], "sd": gs["sd"], "min": gs["min"],
                                               "max": gs["max"], "n_layers": int(exp[exp["model"].isin(g)]["layer"].nunique()),
                                               "group": True}])], ignore_index=True)
        gl = exp[exp["model"].isin(g)].groupby("layer", as_index=False)["expansion_rate"].mean()
        lines = pd.concat([lines, gl.assign(model=name, report="this build")], ignore_index=True)
    paper = None
    if ctx.roles.preset == "paper":
        frames = []
        for mname in summ.loc[~summ["group"], "model"]:
            src = _source(ctx, mname)
            p = reported.paper_numbers("k21-tab8", src, None, ctx.reported or None)
            if p is not None:
                frames.append(p.assign(model=mname))
            pl = reported.expansion_per_layer(src or "", ctx.reported or None)
            if pl is not None:
                lines = pd.concat([lines, pl.assign(model=mname, report="paper (authors' run)")], ignore_index=True)
        if g:
            srcs = [_source(ctx, m) or "" for m in g]
            if all(s.startswith(reported.SEED_GROUP_PREFIX) for s in srcs):
                p = reported.paper_numbers("k21-tab8", srcs[0], None, ctx.reported or None)
                frames.append(p.assign(model=summ.loc[summ["group"], "model"].iloc[0]))
        paper = pd.concat(frames, ignore_index=True) if frames else None
    table = pd.DataFrame({
        "Model": summ["model"],
        "Mean (SD)": [f"{a:.3f} ({b:.3f})" if not pd.isna(b) else f"{a:.3f}" for a, b in zip(summ["mean"], summ["sd"])],
        "Min": summ["min"].round(3), "Max": summ["max"].round(3), "Layers": summ["n_layers"],
    })
    chart = charts.per_layer_chart(
        lines, y="expansion_rate", color="model", color_order=list(dict.fromkeys(lines["model"])),
        strokedash="report" if lines["report"].nunique() > 1 else None,
        y_title="expansion rate ‖T‖_F / √(d+1)", tooltip=("report",),
    )
    top = summ.iloc[0]
    reading = (f"{top['model']}: mean expansion rate {top['mean']:.2f} over its layers (min {top['min']:.2f}, "
               f"max {top['max']:.2f}); values near 1 mean the value→output map neither shrinks nor grows vectors.")
    data = summ.drop(columns="group")
    return FigureResult(data=data, chart=chart, table=table, reading=reading, paper=paper,
                        models=tuple(exp["model"].unique()), params={"seed_group_summarised": sorted(g)})


# ---------------------------------------------------------------------------------------------- tab9–11

def build_tab9(ctx: FigureContext) -> FigureResult:
    primary, ds = _primary(ctx)
    _rows(ctx, "k21_freq", primary, ds)
    freq = ctx.tables["k21_freq"]
    freq = freq[freq["dataset"] == ds]
    models = [m for m in (ctx.roles.encoders or (primary,)) if (freq["model"] == m).any()]
    frames = [st.frequency_spearman(freq[freq["model"] == m]).assign(model=m, dataset=ds) for m in models]
    fs = pd.concat(frames, ignore_index=True)
    r = fs[fs["method"] == "ATTNRESLN-N"].set_index("model")["rho_all"]
    reading = ("ATTNRESLN-N ρ(frequency rank, mixing ratio): " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()) + ".")
    return FigureResult(data=fs, table=_spearman_table(fs, "model", "Model"), reading=reading,
                        paper=_paper(ctx, "k21-tab9", [(m, ds) for m in models]), models=tuple(models), datasets=(ds,))


def build_tab10(ctx: FigureContext) -> FigureResult:
    model, _ = _primary(ctx)
    _need_datasets(ctx, "k21-tab10")
    frames = [st.frequency_spearman(_rows(ctx, "k21_freq", model, ds)).assign(model=model, dataset=ds)
              for ds in ctx.roles.datasets]
    fs = pd.concat(frames, ignore_index=True)
    r = fs[fs["method"] == "ATTNRESLN-N"].set_index("dataset")["rho_all"]
    reading = (f"For {model}, ATTNRESLN-N ρ: " + ", ".join(f"{v:.2f} on {k}" for k, v in r.items()) + ".")
    return FigureResult(data=fs, table=_spearman_table(fs, "dataset", "Dataset"), reading=reading,
                        paper=_paper(ctx, "k21-tab10", [(model, ds) for ds in ctx.roles.datasets]),
                        models=(model,), datasets=tuple(ctx.roles.datasets))


def build_tab11(ctx: FigureContext) -> FigureResult:
    g, ds = _need_seeds(ctx, "k21-tab11")
    freq = _table(ctx, "k21_freq", _seed_entry())
    freq = freq[(freq["dataset"] == ds) & freq["model"].isin(g)]
    if len(freq) == 0:
        raise NotConfigured(f"no k21_freq rows for the seed group on {ds!r}", _seed_entry())
    fs = st.seed_group_spearman(freq, g).assign(dataset=ds)
    table = pd.DataFrame({
        "Method": fs["method"],
        "ρ all: mean (SD)": [f"{a:.3f} ({b:.3f})" for a, b in zip(fs["rho_all_mean"], fs["rho_all_sd"])],
        "ρ without [CLS], [SEP]: mean (SD)": [f"{a:.3f} ({b:.3f})" for a, b in
                                              zip(fs["rho_no_special_mean"], fs["rho_no_special_sd"])],
        "Models": fs["n_models"],
    })
    r = fs.set_index("method")
    reading = ""
    if "ATTNRESLN-N" in r.index:
        reading = (f"Over {int(r.loc['ATTNRESLN-N', 'n_models'])} seeds, ATTNRESLN-N ρ = "
                   f"{r.loc['ATTNRESLN-N', 'rho_all_mean']:.2f} (SD {r.loc['ATTNRESLN-N', 'rho_all_sd']:.2f}).")
    paper = None
    if ctx.roles.preset == "paper":
        srcs = [_source(ctx, m) or "" for m in g]
        if all(s.startswith(reported.SEED_GROUP_PREFIX) for s in srcs):
            paper = reported.paper_numbers("k21-tab11", srcs[0], ds, ctx.reported or None)
    return FigureResult(data=fs, table=table, reading=reading, paper=paper, models=tuple(g), datasets=(ds,))


# ---------------------------------------------------------------------------------------------- declarations

_POOLED = ("pooled over every (sequence, layer, non-pad token) on masked inputs (12% of non-special tokens "
           "masked), special and mask tokens included; ratios ×100.")
_FIG3_CAPTION = (
    "Context-mixing ratio (%) per layer (rows, 1 = first) and token category (columns: Normal, [MASK], [CLS], "
    "[SEP], Overall), one panel per method (ATTN-W, ATTN-N, ATTNRES-W, ATTNRES-N, ATTNRESLN-N). Each cell is the "
    "mean over the tokens of that category within a sequence, then the mean over the sequences containing "
    "the category (Overall: all tokens). Fixed colour scale 0–100. {who}"
)
_SPEARMAN = ("Spearman ρ between each token occurrence's corpus-frequency rank (1 = most frequent) and its "
             "mixing ratio averaged over layers, over all non-pad occurrences on unmasked inputs, and again "
             "without [CLS] and [SEP].")


def _spec(fid: str, title: str, caption: str, analysis: tuple[str, ...], build, kind: str = "chart",
          section: str = "", **params) -> FigureSpec:
    return register(FigureSpec(id=fid, paper=PAPER, title=title, caption=caption, analysis=analysis, build=build,
                               kind=kind, section=section, params=params))


SPECS: list[FigureSpec] = []
SPECS.append(_spec(
    "k21-fig1", "Token maps of the example sentence pair, ATTN-N vs ATTNRESLN-N",
    "Token-to-token contribution maps of one layer at a time (slider) for the K21 example pair \"The man went to "
    "the store.\" / \"He bought a gallon of milk.\" (first example of k21_maps), primary encoder. Rows are "
    "output tokens i, columns input tokens j (labels pos:token); cell = ‖z_{i←j}‖₂: (a) ATTN-N, the "
    "attention output term; (b) ATTNRESLN-N, after residual and LayerNorm. Bias terms excluded; each panel "
    "has its own colour scale.", ("k21_maps",), build_fig1, section="Introduction"))
SPECS.append(_spec(
    "k21-fig2", "The attention block: ATTN → RES → LN",
    "Diagram of the attention block of a post-LN layer: multi-head attention (ATTN), residual connection (RES), "
    "layer normalisation (LN). Each output is decomposed exactly into per-input-token terms z_{i←j} plus a bias "
    "term; brackets show which part of the block each method measures. Returned as an inline SVG "
    "(FigureResult.params['svg']).", (), build_fig2, kind="diagram", section="Method"))
SPECS.append(_spec(
    "k21-tab1", "Datasets",
    "Evaluation sets of this build: number of samples, mean length in tokens under each model's tokenizer "
    "(non-pad tokens, special tokens included; a seed group shows its first member only), domain, source and "
    "licence.", ("datasets",), build_tab1,
    kind="table", section="Experimental setup"))
SPECS.append(_spec(
    "k21-tab2", "Context-mixing ratio: mean, max, min per method",
    "Mixing ratio r_i = ‖Σ_{j≠i} t_{i←j}‖ / (‖Σ_{j≠i} t_{i←j}‖ + ‖t_{i←i}‖) (%) for the five methods, for every "
    "analysed model (roles.encoders) on the primary dataset, " + _POOLED, ("k21_tokens",), build_tab2,
    kind="table", section="Mixing ratio"))
SPECS.append(_spec(
    "k21-fig3", "Mixing ratio per layer and token category",
    _FIG3_CAPTION.format(who="Primary encoder on the primary (Wikipedia) dataset."), ("k21_tokens",), build_fig3,
    section="Mixing ratio"))
SPECS.append(_spec(
    "k21-tab3", "Frequency rank vs mixing ratio (Spearman ρ)",
    _SPEARMAN + " Primary encoder on the primary dataset.", ("k21_freq",), build_tab3, kind="table",
    section="Word frequency"))
SPECS.append(_spec(
    "k21-fig4", "Frequency rank vs ATTNRESLN-N mixing ratio",
    "One point per token occurrence (unmasked inputs, primary encoder, primary dataset): frequency rank on a log "
    "axis (1 = most frequent) vs ATTNRESLN-N mixing ratio averaged over layers (%). [CLS], [SEP], '.' and ',' "
    f"are coloured; 'other' occurrences are subsampled uniformly (seed 0) to at most {FIG4_MAX_OTHER} points, "
    "ρ in the reading uses all occurrences.", ("k21_freq",), build_fig4, section="Word frequency"))
SPECS.append(_spec(
    "k21-tab4", "Analysed models",
    "Architecture of every analysed model: class, layers, hidden size d, attention heads (key/value heads where "
    "grouped), FF inner size, LayerNorm position and kind, FF activation, parameter count.", ("models",),
    build_tab4, kind="table", section="Models"))
SPECS.append(_spec(
    "k21-tab5", "Mixing ratio for every model variant",
    "Table 2 statistics (mean, max, min of the mixing ratio, %) for every model variant (roles.variants) on the "
    "primary dataset, " + _POOLED, ("k21_tokens",), build_tab5, kind="table", section="Appendix: model variants"))
for _k in range(7):
    SPECS.append(_spec(
        f"k21-fig{5 + _k}", f"Mixing ratio per layer and category: model variant {_k + 1}",
        _FIG3_CAPTION.format(who=f"Model variant #{_k + 1} (roles.variants[{_k}]; the paper's "
                             f"{PAPER_VARIANTS[_k][1]}) on the primary dataset."),
        ("k21_tokens",), _variant_builder(_k), section="Appendix: model variants"))
SPECS.append(_spec(
    "k21-tab6", "Mixing ratio on every dataset",
    "Table 2 statistics (mean, max, min of the mixing ratio, %) for the primary encoder on each configured "
    "dataset, " + _POOLED, ("k21_tokens",), build_tab6, kind="table", section="Appendix: datasets"))
for _k in range(3):
    SPECS.append(_spec(
        f"k21-fig{12 + _k}", f"Mixing ratio per layer and category: dataset {_k + 2}",
        _FIG3_CAPTION.format(who=f"Primary encoder on non-primary dataset #{_k + 1} (roles.datasets[{_k + 1}]; "
                             f"the paper's {PAPER_EXTRA_DATASETS[_k][0]})."),
        ("k21_tokens",), _dataset_builder(_k), section="Appendix: datasets"))
SPECS.append(_spec(
    "k21-tab7", "Mixing ratio over a seed group",
    "Table 2 statistics over the seed group (roles.seed_group; 25 MultiBERTs in the paper) on the primary "
    "dataset: per model, mean/max/min " + _POOLED + " Then mean (sample SD) over models of the per-model means, "
    "max of the maxes, min of the mins.", ("k21_tokens",), build_tab7, kind="table", section="Appendix: seed group"))
for _k in range(3):
    SPECS.append(_spec(
        f"k21-fig{15 + _k}", f"Mixing ratio per layer and category: seed {_k + 1} of the seed group",
        _FIG3_CAPTION.format(who=f"Seed-group model #{_k + 1} (roles.seed_group[{_k}]) on the primary dataset."),
        ("k21_tokens",), _seed_builder(_k), section="Appendix: seed group"))
SPECS.append(_spec(
    "k21-tab8", "Expansion rate of the value→output map",
    "Expansion rate ‖T‖_F / √(d+1) of the augmented (d+1)×(d+1) matrix of each layer's affine map "
    "f(x) = x W_V W_O + b_V W_O (≈ RMS singular value): per model mean (sample SD over layers), min and max over "
    "layers; a seed group (≥ 2 models) is summarised as one row: mean (SD over models) of the per-model means, "
    "min of mins, max of maxes. Chart: the value per layer (1 = first); the seed group as its per-layer mean.",
    ("k21_expansion",), build_tab8, kind="table", section="Appendix: expansion rate"))
SPECS.append(_spec(
    "k21-tab9", "Frequency correlation for every model",
    _SPEARMAN + " Every analysed model (roles.encoders) on the primary dataset.", ("k21_freq",), build_tab9,
    kind="table", section="Appendix: frequency correlation"))
SPECS.append(_spec(
    "k21-tab10", "Frequency correlation on every dataset",
    _SPEARMAN + " Primary encoder on each configured dataset.", ("k21_freq",), build_tab10, kind="table",
    section="Appendix: frequency correlation"))
SPECS.append(_spec(
    "k21-tab11", "Frequency correlation over a seed group",
    _SPEARMAN + " Computed per seed-group model on the primary dataset, then mean (sample SD) over models.",
    ("k21_freq",), build_tab11, kind="table", section="Appendix: frequency correlation"))

#: All K21 ids in paper order.
K21_IDS: tuple[str, ...] = tuple(s.id for s in SPECS)
