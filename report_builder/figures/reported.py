"""The numbers K21 reports, as DataFrames keyed by figure id (for "paper vs this build" on the site).

Source: ``report_builder/resources/k21_reported.yaml`` (a packaged copy of
``shared/reference/k21_reported.yaml``), loaded through `importlib.resources`. Figures attach these
numbers as ``FigureResult.paper`` only under the ``paper`` preset and only for rows whose model
*source* (hub id, e.g. ``bert-base-uncased``) and dataset match the paper's setting; `reference_for`
gives the site the paper's numbers for a figure even when this build used another model, with a
``matches`` flag and a note ("paper reports … for bert-base-uncased; this build used …").

Pitfall: match on the model's ``source`` (from the ``models`` table), never on its configured
``name``; and only Wikipedia-like dataset ids (``wiki``/``wikipedia``) match the paper's main setting.
Never tune anything to these numbers — they are shown, not used.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Mapping

import pandas as pd
import yaml

from report_builder import papers, schema

METHODS = schema.K21_METHODS

#: Our dataset ids -> the paper's dataset keys.
DATASET_ALIASES = {
    "wiki": "wikipedia", "wikipedia": "wikipedia", "sst2": "sst2", "sst-2": "sst2", "mnli": "mnli",
    "conll2003": "conll2003", "conll": "conll2003", "conll-2003": "conll2003",
}
PAPER_DEFAULT_MODEL = papers.PRIMARY_ENCODER.source
SEED_GROUP_PREFIX = papers.SEED_GROUP_PREFIX


@dataclass(frozen=True)
class PaperReference:
    """The paper's numbers for one figure.

    Attributes:
        figure_id: the figure id.
        paper_model: the hub id the numbers are for (``"google/multiberts-*"`` for the seed group).
        matches: whether they are for the model source that was asked about.
        frame: the numbers (columns depend on the figure; see `paper_numbers`).
        note: one sentence for the site, e.g. "The paper reports these numbers for bert-base-uncased on
            Wikipedia; this build used all-MiniLM-L6-v2."
    """

    figure_id: str
    paper_model: str
    matches: bool
    frame: pd.DataFrame
    note: str


@functools.lru_cache(maxsize=1)
def _load_packaged() -> dict[str, Any]:
    text = resources.files("report_builder").joinpath("resources/k21_reported.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def load_reported(reported: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The parsed yaml: ``reported`` if given and non-empty (e.g. ``FigureContext.reported``), else the packaged copy."""
    return dict(reported) if reported else _load_packaged()


def paper_dataset(dataset_id: str | None) -> str | None:
    """The paper's dataset key for one of our dataset ids (``None`` if the paper has no such dataset)."""
    if dataset_id is None:
        return None
    return DATASET_ALIASES.get(str(dataset_id).lower())


def _stats_frame(entry: Mapping[str, list], cols: list[str], report: str | None = None) -> pd.DataFrame:
    rows = [{"method": m, **dict(zip(cols, entry[m]))} for m in METHODS if m in entry]
    df = pd.DataFrame(rows)
    if report is not None:
        df["report"] = report
    return df


def _mixing(rep: Mapping, source: str, dataset: str | None) -> pd.DataFrame | None:
    """Table 2/5/6 statistics (method, mean, max, min, report) for a model source on a dataset."""
    ds = paper_dataset(dataset) if dataset is not None else "wikipedia"
    if ds == "wikipedia":
        t2 = rep.get("table2_mixing_ratio", {})
        if source in t2:
            return pd.concat(
                [_stats_frame(v, ["mean", "max", "min"], k) for k, v in t2[source].items()], ignore_index=True
            )
        t5 = rep.get("table5_model_variants", {})
        if source in t5:
            return _stats_frame(t5[source], ["mean", "max", "min"], "paper")
        return None
    if source == PAPER_DEFAULT_MODEL and ds in rep.get("table6_datasets_bert_base", {}):
        return _stats_frame(rep["table6_datasets_bert_base"][ds], ["mean", "max", "min"], "paper")
    return None


def _spearman(rep: Mapping, source: str, dataset: str | None) -> pd.DataFrame | None:
    fs = rep.get("frequency_spearman", {})
    ds = paper_dataset(dataset) if dataset is not None else "wikipedia"
    if ds == "wikipedia" and source in fs:
        return _stats_frame(fs[source], ["rho_all", "rho_no_special"], "paper")
    if source == PAPER_DEFAULT_MODEL and ds in fs.get("datasets_bert_base", {}):
        return _stats_frame(fs["datasets_bert_base"][ds], ["rho_all", "rho_no_special"], "paper")
    return None


def _expansion(rep: Mapping, source: str) -> pd.DataFrame | None:
    t8 = rep.get("table8_expansion_rate", {})
    if source.startswith(SEED_GROUP_PREFIX) and "multiberts" in t8:
        mean, sd, lo, hi = t8["multiberts"]
        return pd.DataFrame([{"mean": mean, "sd": sd, "min": lo, "max": hi, "report": "paper"}])
    if source in t8:
        mean, lo, hi = t8[source]
        return pd.DataFrame([{"mean": mean, "sd": float("nan"), "min": lo, "max": hi, "report": "paper"}])
    return None


def expansion_per_layer(source: str, reported: Mapping | None = None) -> pd.DataFrame | None:
    """Per-layer expansion rates of the authors' run (``layer`` 0-based, ``expansion_rate``), if any."""
    rep = load_reported(reported)
    per = rep.get("table8_expansion_rate", {}).get("per_layer_authors_run", {})
    if source not in per:
        return None
    return pd.DataFrame({"layer": range(len(per[source])), "expansion_rate": per[source], "report": "authors_run"})


def _datasets(rep: Mapping, dataset: str | None) -> pd.DataFrame | None:
    t1 = rep.get("table1_datasets", {})
    ds = paper_dataset(dataset)
    if dataset is not None and ds is None:  # a set the paper does not have: nothing to set beside it
        return None
    keys = [ds] if ds is not None else list(t1)
    rows = [{"paper_dataset": k, "n_samples": t1[k][0], "mean_tokens": t1[k][1]} for k in keys if k in t1]
    return pd.DataFrame(rows) if rows else None


# figure id -> kind of numbers
_KIND = {
    "k21-tab1": "datasets",
    "k21-tab2": "mixing", "k21-tab5": "mixing", "k21-tab6": "mixing",
    "k21-tab3": "spearman", "k21-fig4": "spearman", "k21-tab9": "spearman", "k21-tab10": "spearman",
    "k21-tab7": "seed_mixing", "k21-tab11": "seed_spearman",
    "k21-tab8": "expansion",
}


def paper_numbers(
    figure_id: str, model_source: str | None, dataset: str | None = None, reported: Mapping | None = None
) -> pd.DataFrame | None:
    """The paper's numbers for one figure, model source and dataset id, or ``None`` when it reports none.

    Columns by figure: tab1 ``paper_dataset, n_samples, mean_tokens`` (mean BERT tokens); tab2/5/6
    ``method, mean, max, min, report``; tab3/fig4/tab9/tab10 ``method, rho_all, rho_no_special, report``;
    tab7 ``method, mean, sd, max, min`` (25 MultiBERTs); tab11 ``method, rho_all_mean, rho_all_sd,
    rho_no_special_mean, rho_no_special_sd``; tab8 ``mean, sd, min, max, report``.
    ``dataset`` ``None`` means the paper's main (Wikipedia) setting.
    """
    rep = load_reported(reported)
    kind = _KIND.get(figure_id)
    src = model_source or ""
    if kind == "datasets":
        return _datasets(rep, dataset)
    if kind == "mixing":
        return _mixing(rep, src, dataset)
    if kind == "spearman":
        df = _spearman(rep, src, dataset)
        if df is not None and figure_id == "k21-fig4":
            df = df[df["method"] == "ATTNRESLN-N"].reset_index(drop=True)
        return df
    if kind == "seed_mixing" and src.startswith(SEED_GROUP_PREFIX) and paper_dataset(dataset) in (None, "wikipedia"):
        return _stats_frame(rep["table7_multiberts_25_seeds"], ["mean", "sd", "max", "min"], "paper")
    if kind == "seed_spearman" and src.startswith(SEED_GROUP_PREFIX) and paper_dataset(dataset) in (None, "wikipedia"):
        return _stats_frame(
            rep["frequency_spearman"]["multiberts_mean_sd"],
            ["rho_all_mean", "rho_all_sd", "rho_no_special_mean", "rho_no_special_sd"],
            "paper",
        )
    if kind == "expansion":
        return _expansion(rep, src)
    return None


def _default_model(figure_id: str) -> str:
    return f"{SEED_GROUP_PREFIX}-seed_0" if figure_id in ("k21-tab7", "k21-tab11") else PAPER_DEFAULT_MODEL


def reference_for(
    figure_id: str, model_source: str | None, dataset: str | None = None, reported: Mapping | None = None
) -> PaperReference | None:
    """What the paper reports for a figure, for context beside this build's result.

    If the paper reports numbers for ``model_source`` (and ``dataset``), they are returned with
    ``matches=True``; otherwise the paper's own model for that figure (``bert-base-uncased``, or the
    MultiBERTs group for tab7/tab11) with ``matches=False``. ``None`` when the paper gives no numbers for
    the figure at all (e.g. the heatmaps).
    """
    if figure_id not in _KIND:
        return None
    df = paper_numbers(figure_id, model_source, dataset, reported)
    if df is not None and len(df) and figure_id != "k21-tab1":
        return PaperReference(
            figure_id, model_source or "", True, df,
            f"The paper reports these numbers for {model_source}; this build used the same model.",
        )
    paper_model = _default_model(figure_id)
    if figure_id == "k21-tab1":
        df = paper_numbers(figure_id, paper_model, dataset, reported)
        if df is None:
            df = paper_numbers(figure_id, paper_model, None, reported)
        return PaperReference(figure_id, paper_model, model_source == PAPER_DEFAULT_MODEL, df,
                              "The paper's datasets; mean lengths are in bert-base-uncased tokens.")
    df = paper_numbers(figure_id, paper_model, dataset, reported)
    where = dataset
    if df is None:
        df = paper_numbers(figure_id, paper_model, None, reported)
        where = "wikipedia"
    if df is None:
        return None
    label = "the 25 MultiBERTs seeds" if paper_model.startswith(SEED_GROUP_PREFIX) else paper_model
    used = model_source or "another model"
    on = "" if _KIND[figure_id] == "expansion" else f" on {paper_dataset(where) or where}"
    return PaperReference(
        figure_id, paper_model, False, df,
        f"The paper reports these numbers for {label}{on}; "
        f"this build used {used}, so they are context, not a check.",
    )
