"""The paper's numbers beside ours: one long table per K21 figure (paper value, ours, difference).

For every (model, dataset) slice a figure drew, the paper's numbers for the same model *source* and
dataset are looked up (`reported.paper_numbers`); where the paper has none for that model — e.g. the
embedded MiniLM of the default build — the figure's first slice is set beside the paper's own model
for that figure (bert-base-uncased on Wikipedia, or the 25 MultiBERTs), labelled as such, so a reader
of any build can compare. The primary dataset stands for the paper's Wikipedia setting whatever its name;
any other dataset is set only beside the paper's numbers for the same dataset (SST-2, MNLI, CoNLL-2003),
never beside Wikipedia's. Statistics are matched by column name: the figure data and the reported
frames share ``mean``, ``max``, ``min``, ``sd``, ``rho_all``, ``rho_no_special``, … .

Pitfall: a difference between two different models is context, not a check; `Comparison.same_model`
says which it is and the site says so in words. Never tune anything to these numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from report_builder import schema
from report_builder.figures import reported

#: Statistic columns compared, in display order, with their labels.
STATS: dict[str, str] = {
    "mean": "mean", "sd": "SD", "max": "max", "min": "min",
    "rho_all": "ρ (all)", "rho_no_special": "ρ (without [CLS], [SEP])",
    "rho_all_mean": "ρ (all): mean", "rho_all_sd": "ρ (all): SD",
    "rho_no_special_mean": "ρ (without [CLS], [SEP]): mean", "rho_no_special_sd": "ρ (without [CLS], [SEP]): SD",
    "n_samples": "samples", "mean_tokens": "mean length (tokens)",
}
SEED_GROUP_FIGURES = ("k21-tab7", "k21-tab11")
#: Statistics that are counts: kept as integers (a table prints "992", not "992.0").
COUNTS = frozenset({"n_samples"})


@dataclass(frozen=True)
class Comparison:
    """The paper's numbers beside this build's for one figure.

    Attributes:
        table: columns ``Ours``, ``Paper's model``, ``Dataset``, ``Method`` (where it applies),
            ``Statistic``, ``Paper``, ``Ours (value)`` and ``Ours − paper``.
        same_model: every compared row uses the paper's own model (a check); otherwise context.
        note: one sentence for the page naming both models.
    """

    table: pd.DataFrame
    same_model: bool
    note: str


def _sources(tables: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    m = tables.get("models")
    if m is None or m.empty or "source" not in m.columns:
        return {}
    return dict(zip(m["model"].astype(str), m["source"].astype(str)))


def _pick_report(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's printed numbers where both the paper and the authors' run are given."""
    if "report" in df.columns and (df["report"] == "paper").any():
        return df[df["report"] == "paper"]
    return df


def _stat_label(col: str, units: Mapping[str, str]) -> str:
    """A statistic's label in the table, with its unit where the figure declares one: ``mean (%)``."""
    return schema.unit_column(STATS[col], units[col]) if col in units else STATS[col]


def _rows(fid: str, ours: pd.DataFrame, paper: pd.DataFrame, our_label: str, paper_label: str,
          dataset: str | None, units: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    paper = _pick_report(paper)
    out = []
    key = "method" if "method" in ours.columns and "method" in paper.columns else None
    stats = [c for c in STATS if c in ours.columns and c in paper.columns]
    for _, p in paper.iterrows():
        o = ours[ours["method"] == p["method"]] if key else ours
        if o.empty:
            continue
        o = o.iloc[0]
        for c in stats:
            pv, ov = p[c], o[c]
            if pv is None or ov is None or (isinstance(pv, float) and math.isnan(pv)):
                continue
            pv, ov = float(pv), float(ov)
            if c in COUNTS and pv.is_integer() and ov.is_integer():
                pv, ov = int(pv), int(ov)
            row = {"Ours": our_label, "Paper's model": paper_label, "Dataset": dataset or "",
                   "Statistic": _stat_label(c, units or {}), "Paper": pv, "Ours (value)": ov,
                   "Ours − paper": ov - pv if not math.isnan(ov) else float("nan")}
            if key:
                row["Method"] = p["method"]
            out.append(row)
    return out


def _slices(fid: str, data: pd.DataFrame) -> list[tuple[str | None, str | None, pd.DataFrame]]:
    """(model, dataset, rows) slices of a figure's data, in data order."""
    has_m, has_d = "model" in data.columns, "dataset" in data.columns
    if fid in SEED_GROUP_FIGURES or not has_m:
        if has_d:
            return [(None, d, g) for d, g in data.groupby("dataset", sort=False)]
        return [(None, None, data)]
    keys = ["model"] + (["dataset"] if has_d else [])
    out = []
    for k, g in data.groupby(keys, sort=False):
        k = k if isinstance(k, tuple) else (k,)
        out.append((str(k[0]), str(k[1]) if has_d else None, g))
    return out


def comparison(fid: str, data: pd.DataFrame, tables: Mapping[str, pd.DataFrame], roles: Any,
               reported_numbers: Mapping | None = None, units: Mapping[str, str] | None = None
               ) -> Comparison | None:
    """The paper's numbers beside ours for figure ``fid``, or ``None`` where the paper reports none.

    Args:
        fid: figure id (K21 tables with reported numbers: tab1, tab2, tab3, tab5–tab11).
        data: the figure's tidy data (`FigureResult.data`).
        tables: the build's result tables (for each model's source).
        roles: the build's `Roles` (seed group).
        units: the figure's declared units (`FigureSpec.units`): a statistic of a unit-bearing column is
            labelled with it (``mean (%)``), as ``data.csv`` names the column.
    """
    if fid not in reported._KIND or fid == "k21-fig4" or data is None or data.empty:
        return None
    rep = reported.load_reported(reported_numbers)
    src = _sources(tables)
    rows: list[dict[str, Any]] = []
    same = True
    if fid == "k21-tab1":
        return _datasets(data, src, roles, rep)
    slices = _slices(fid, data)
    for model, dataset, g in slices:
        if fid in SEED_GROUP_FIGURES:
            seeds = [src.get(m, "") for m in getattr(roles, "seed_group", ())]
            s = seeds[0] if seeds and all(x.startswith(reported.SEED_GROUP_PREFIX) for x in seeds) else ""
            label = f"seed group ({len(seeds)} models)"
        else:
            s, label = src.get(model or "", model or ""), model or ""
        paper = reported.paper_numbers(fid, s, dataset, rep) if s else None
        if paper is not None and len(paper):
            p_label = "the 25 MultiBERTs" if fid in SEED_GROUP_FIGURES else s
            rows += _rows(fid, g, paper, label, p_label, dataset, units)
    if not rows:  # nothing of the paper's own: the first model beside the paper's model for this figure
        same = False
        first = slices[0][0]
        primary = next(iter(getattr(roles, "datasets", ())), None)
        for model, dataset, g in (x for x in slices if x[0] == first):
            if dataset is not None and dataset != primary and reported.paper_dataset(dataset) is None:
                continue  # a second set the paper lacks: nothing of the paper's is about it (not Wikipedia's)
            label = (f"seed group ({len(getattr(roles, 'seed_group', ()))} models)" if fid in SEED_GROUP_FIGURES
                     else model or "")
            ref = reported.reference_for(fid, src.get(model or "", ""), dataset, rep)
            if ref is None or ref.frame is None or ref.frame.empty:
                continue
            p_label = ("the 25 MultiBERTs" if ref.paper_model.startswith(reported.SEED_GROUP_PREFIX)
                       else ref.paper_model)
            if dataset is not None:
                p_label += f" on {reported.paper_dataset(dataset) or 'wikipedia'}"
            rows += _rows(fid, g, ref.frame, label, p_label, dataset, units)
        if not rows:
            return None
    table = _frame(rows)
    cols = ["Ours", "Paper's model", "Dataset"] + (["Method"] if "Method" in table.columns else []) + \
        ["Statistic", "Paper", "Ours (value)", "Ours − paper"]
    table = table[cols]
    if not table["Dataset"].astype(bool).any():
        table = table.drop(columns="Dataset")
    return Comparison(table, same, _note(table, same))


def _datasets(data: pd.DataFrame, src: dict[str, str], roles: Any, rep: Mapping) -> Comparison | None:
    primary = getattr(roles, "primary_encoder", None)
    d = data[data["model"] == primary] if primary and "model" in data.columns else data
    rows = []
    for _, r in d.drop_duplicates("dataset").iterrows():
        paper = reported.paper_numbers("k21-tab1", None, r["dataset"], rep)
        if paper is None or paper.empty:
            continue
        ours = pd.DataFrame([{"n_samples": r["n_samples"], "mean_tokens": r["mean_tokens"]}])
        rows += _rows("k21-tab1", ours, paper, str(primary or r["model"]), reported.PAPER_DEFAULT_MODEL,
                      str(r["dataset"]))
    if not rows:
        return None
    table = _frame(rows)[["Ours", "Paper's model", "Dataset", "Statistic", "Paper", "Ours (value)",
                                "Ours − paper"]]
    same = src.get(str(primary), "") == reported.PAPER_DEFAULT_MODEL
    return Comparison(table, same, _note(table, same))


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a table; the value columns keep a count's int beside other rows' floats (pandas would
    make every cell a float: "992.0 samples")."""
    table = pd.DataFrame(rows)
    for col in ("Paper", "Ours (value)", "Ours − paper"):
        if any(isinstance(r.get(col), int) for r in rows):
            table[col] = pd.Series([r.get(col) for r in rows], index=table.index, dtype=object)
    return table


def _note(table: pd.DataFrame, same: bool) -> str:
    ours = ", ".join(dict.fromkeys(table["Ours"].astype(str)))
    theirs = ", ".join(dict.fromkeys(table["Paper's model"].astype(str)))
    if same:
        return (f"The paper's numbers for its own model ({theirs}) beside this build's run of the same model "
                f"({ours}); the difference is a check of the reproduction.")
    return (f"The paper's model is {theirs}; this build's is {ours}. The numbers are set side by side for "
            f"context; a difference between two models is not a check. Run the paper preset for that.")
