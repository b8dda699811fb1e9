"""A figure version's provenance as a recipe: everything its numbers depend on, written explicitly.

``provenance.json`` of a version (`citations.permalinks`) is the record `citations.cite.figure_provenance`
makes (models, datasets, parameters, versions, error bound) plus what `recipe_fields` adds, so that
`report_builder.citations.reproduce` can rebuild exactly that figure and compare content hashes:

- ``figure``: id, title, paper, declaration version, the tables it reads and the analyses (with their
  versions) that make them; ``inputs``: for each of those analyses and each of its tasks on the
  figure's models and datasets (``<model> · <dataset>``), the cache-key parameters it declares but the
  ones naming the subject (`analyses.base.input_params`); ``params``: the figure's own parameters.
  These, with the models, datasets and device, are what the figure's numbers depend on: a figure diff
  (`citations.figure_diff.inputs_diff`) names a parameter from them, never from ``config``; ``roles`` (which
  model and dataset plays which part); ``inline_limit`` (it shapes ``spec.json``, so the hash);
  ``display``: the tokenizer style and causality judged for each model (`figures.display`), which
  shape the token labels;
- ``config``: the resolved configuration with every value written out (defaults included, so a later
  release's defaults cannot change the recipe; `report_builder.citations.reproduce` rebuilds from it): models
  (name, source, role, revision), every field of every dataset entry, ``k21``, ``k24``, ``ig``,
  ``device``, ``dtype``, ``batch_size``, ``max_memory``, ``device_map``, ``data_dir``; local paths in
  their public form (`guard.public_path`);
- ``precision``: the published-precision rule its numbers were rounded by (`report_builder.precision`)
  and the tolerance a rebuild is "equal within";
- ``libraries`` (the rendering process) and ``analysis_libraries`` (the process that computed the
  tables): the versions of every library the numbers and the drawing go through, and ``python``;
- ``recipe_sha256``: SHA-256 of the canonical JSON of everything else (`seal`): a recipe edited after
  publication no longer matches it (`reproduce` names that as the reason of a difference).

Pitfall: the record is written once, when its version is created, and never rewritten: nothing here
may depend on a later build (the date is the creating build's).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import platform
from typing import Any

from report_builder import precision

FORMAT = "report_builder figure recipe 1"
"""The ``recipe`` field of a version's provenance.json: which reader understands it."""

SEAL = "recipe_sha256"

RENDER_LIBRARIES = ("pandas", "numpy", "pyarrow", "altair", "vl-convert-python", "jinja2")  # no scipy: stats.ranks
"""Distributions the rendering process runs a figure's numbers and drawing through."""

NOT_RESULTS = ("cache_dir", "out_dir", "site_url", "threads", "shard_size")
"""Configuration keys that change no figure (results are identical for any thread count or shard size)."""

DATASET_TABLE_FROM = "dataset_stats"
"""The ``datasets`` table is assembled from the analysis that returns this table (`analyses.assemble`)."""


@functools.lru_cache(maxsize=1)
def render_libraries() -> dict[str, str | None]:
    """The installed versions of `RENDER_LIBRARIES` and Python (read from metadata: no import)."""
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in RENDER_LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def analyses_of(tables: tuple[str, ...] | list[str], analyses: dict[str, Any]) -> dict[str, int]:
    """The analyses (id -> version) whose tables a figure reads, from the build provenance's
    ``analyses`` record (id -> {version, tables}); the ``datasets`` table counts as the analysis that
    returns `DATASET_TABLE_FROM`. ``architecture`` (the ``models`` table) is always among them: token
    display and layouts are judged from it."""
    wanted = set(tables) | {"models"}
    out = {}
    for aid, rec in (analyses or {}).items():
        made = set(rec.get("tables", ()))
        if DATASET_TABLE_FROM in made:
            made.add("datasets")
        if made & wanted:
            out[aid] = int(rec.get("version", 0))
    return out


def figure_inputs(analyses: dict[str, int], prov_analyses: dict[str, Any], models: list[str],
                  datasets: list[str]) -> dict[str, dict[str, Any]]:
    """The parameters a figure's numbers depend on: for each analysis in ``analyses`` (those making its
    tables), the recorded ``inputs`` (`provenance.build_provenance`) of its tasks on ``models`` and, for
    a per-dataset task, on ``datasets`` — or on any dataset when none of its tasks ran on those (the
    examples of the first dataset) — keyed by ``<model>`` or ``<model> · <dataset>``. A build record
    older than the recorded inputs (a render of an older cache) gives none: `recipe_fields` then leaves
    ``inputs`` out and a diff compares the configuration."""
    out: dict[str, dict[str, Any]] = {}
    for aid in sorted(analyses):
        rows = [r for r in (prov_analyses.get(aid) or {}).get("inputs") or [] if r.get("model") in models]
        on = [r for r in rows if r.get("dataset") is None or r.get("dataset") in datasets]
        picked = on if any(r.get("dataset") is not None for r in on) or not rows else rows
        if picked:
            out[aid] = {(str(r["model"]) if r.get("dataset") is None else f"{r['model']} · {r['dataset']}"):
                        r.get("params") or {} for r in picked}
    return out


def result_config(config: dict[str, Any] | None, fig_id: str) -> dict[str, Any]:
    """The build's (public) configuration as a figure's recipe records it: every key that can change a
    result, ``figures`` set to this figure alone."""
    if not config:
        return {}
    out = {k: v for k, v in config.items() if k not in NOT_RESULTS}
    out["figures"] = [fig_id]
    return out


def recipe_fields(spec: Any, roles: Any, prov: dict[str, Any], judged: tuple[dict, dict] | None,
                  models: list[str], inline_limit: int, datasets: list[str] | None = None,
                  params: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a version's provenance adds to `citations.cite.figure_provenance` to be a recipe.

    Args:
        spec: the figure's `FigureSpec`; roles: its `Roles`; prov: the build provenance.
        judged: (tokenizer style per model, causal per model) of the build (`DisplayTables.judged`).
        models, datasets: the models and datasets the record names (the display judgement is kept for
            these models; the analyses' parameters for these models and datasets: `figure_inputs`).
        inline_limit: the build's inline limit (shapes ``spec.json``).
        params: the figure's own parameters.
    """
    styles, causal = judged if judged is not None else ({}, {})
    display = {m: {"style": styles.get(m), "causal": causal.get(m)} for m in models
               if m in styles or m in causal}
    made_by = analyses_of(spec.analysis, prov.get("analyses") or {})
    recorded = any("inputs" in (a or {}) for a in (prov.get("analyses") or {}).values())
    figure = {"id": spec.id, "title": spec.title, "paper": spec.paper, "version": spec.version, "kind": spec.kind,
              "tables": list(spec.analysis), "analyses": made_by}
    if recorded:  # a build whose record predates them (render of an older cache) has none
        figure["inputs"] = figure_inputs(made_by, prov.get("analyses") or {}, models, list(datasets or []))
        figure["params"] = dict(params or {})
    return {
        "recipe": FORMAT,
        "figure": figure,
        "config": result_config(prov.get("config"), spec.id),
        "roles": dataclasses.asdict(roles) if dataclasses.is_dataclass(roles) else dict(roles or {}),
        "display": display,
        "inline_limit": inline_limit,
        "tf32": prov.get("tf32"),
        "device_map": prov.get("device_map") or {},
        "python_version": prov.get("python_version"),
        "precision": precision.describe(),
        "libraries": render_libraries(),
        "analysis_libraries": prov.get("libraries") or {},
    }


def canonical(obj: Any) -> str:
    """The canonical JSON text of ``obj`` (sorted keys, no spaces): what `seal` hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def seal(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` (made JSON-plain) with its `SEAL`: SHA-256 of the canonical JSON of the rest."""
    plain = json.loads(json.dumps({k: v for k, v in rec.items() if k != SEAL}, ensure_ascii=False, default=str))
    plain[SEAL] = hashlib.sha256(canonical(plain).encode("utf-8")).hexdigest()
    return plain


def sealed(rec: dict[str, Any]) -> bool | None:
    """Whether ``rec`` still matches its seal; None when it carries none (an older record)."""
    if SEAL not in rec:
        return None
    body = {k: v for k, v in rec.items() if k != SEAL}
    return hashlib.sha256(canonical(body).encode("utf-8")).hexdigest() == rec[SEAL]


def dumps(rec: dict[str, Any]) -> str:
    """A provenance record as written to ``provenance.json`` (indented, keys in record order)."""
    return json.dumps(rec, indent=1, ensure_ascii=False, default=str) + "\n"
