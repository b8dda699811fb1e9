"""K21 experimental-setup tables: Table 1 (datasets) and Table 4 (analysed models).

Rows follow the configuration order (``roles.datasets``, ``roles.encoders``), unknown ones after,
by name. Pitfall: seed-group members share one tokenizer, so Table 1 shows one length column for
the whole group (its first member), not one per seed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from report_builder.figures import reported, snippets
from report_builder.figures.k21 import selection as sel
from report_builder.figures.spec import FigureContext, FigureResult


def build_tab1(ctx: FigureContext) -> FigureResult:
    """K21 Table 1: the evaluation sets, with mean length under each model's tokenizer."""
    d = sel.result_table(ctx, "datasets", snippets.primary_dataset_yaml())
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


def build_tab4(ctx: FigureContext) -> FigureResult:
    """K21 Table 4: the architecture of every analysed model."""
    m = sel.result_table(ctx, "models", snippets.primary_yaml())
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
