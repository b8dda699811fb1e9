"""What changed between two versions of a figure: the inputs that differ and by how much the data moved.

Two versions are compared through what they publish (`citations.permalinks`): their ``provenance.json``
recipes (`citations.recipe`) and their ``data.csv``.

- `inputs_diff`: every recorded input that differs, each with its kind — ``weights`` (a model's
  fingerprint, hub snapshot, revision or source; a model added or removed), ``data`` (a dataset's
  hash, its file; a dataset added or removed), ``parameter`` (the declared parameters of the analyses
  whose tables the figure reads, its own parameters, the sequences it used, roles; the configuration
  only between records older than those), ``code`` (report_builder version and commit, the figure's
  and the analyses' versions), ``library`` (library and Python versions), ``device`` (device, dtype,
  TF32, device map).
- `data_summary`: the numeric change of ``data.csv``: rows added and removed, values changed, and the
  largest absolute and relative difference with where it is (model, dataset, layer, category,
  scope, ... : the row's key columns) and which column.
- `difference_spec`: for a line or heatmap figure with a ``layer`` column, a Vega-Lite chart of
  new − old (`citations.history` draws it for the Changes page).

Rows are matched on their key columns (`KEY_COLUMNS` present in both files, then the other text
columns if those do not identify a row); when no key identifies the rows, equal-length files are
compared row by row and others are reported as not comparable. Pitfall: layers in ``data.csv`` are
already 1-based (as everywhere a user reads them), and measured columns carry their unit in their name
(``value (%)``); a version written before names carried units is matched to them (`_unit_names`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from report_builder import schema
from report_builder.errors import for_terminal

KINDS = ("weights", "data", "parameter", "code", "library", "device")
"""Kinds of input, in the order a difference is reported."""

KEY_COLUMNS = ("model", "dataset", "example", "layer", "method", "scope", "kind", "component", "from_scope",
               "to_scope", "category", "group", "stat", "statistic", "stage", "operation", "rank", "seq", "pos",
               "i", "j", "dim")
"""Columns that identify a row of a figure's data, in the order they are tried: rows are matched on the
shortest leading run of those present in both versions that identifies every row (top pairs by
``rank``, not by which pair holds it)."""

WHERE = ("model", "dataset", "example", "layer", "category", "scope", "method", "component", "kind", "to_scope")
"""Key columns named in a summary's "where" (the others are kept too, after these)."""

MAX_CHART_ROWS = 5000
"""A difference chart is drawn for at most this many matched rows."""

_IGNORED = {"date", "content_hash", "recipe_sha256", "max_reconstruction_error", "examples", "recipe", "preset",
            "permalink", "files", "reproduces"}
"""Record fields that are no input: the version's own identity and outputs (``files``: its published
files' sha256, which change with every changed figure; ``reproduces``: the version a figure drawn by
`reproduce` was rebuilt from)."""
_DEVICE = {"device", "dtype", "tf32", "device_map", "chunk_rule"}
_CODE = {"report_builder_version", "git_commit"}
_LIBRARY = {"torch_version", "transformers_version", "python_version", "libraries", "analysis_libraries"}


# ---------------------------------------------------------------- inputs


def _keyed(value: Any) -> Any:
    """Lists of records named by ``name`` or ``id`` (models, datasets) as dicts keyed by that name."""
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for key in ("id", "name"):
            if all(x.get(key) is not None for x in value) and len({str(x[key]) for x in value}) == len(value):
                return {str(x[key]): {k: v for k, v in x.items() if k != key} for x in value}
    return value


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    value = _keyed(value)
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    else:
        out[prefix] = value


def _kind(path: str) -> str | None:
    parts = path.split(".")
    top = parts[0]
    if top in _IGNORED:
        return None
    if top in _DEVICE or (top == "config" and len(parts) > 1 and parts[1] in _DEVICE):
        return "device"
    if top == "figure" and parts[1:2] in (["inputs"], ["params"]):
        return "parameter"
    if top in _CODE or top == "figure":
        return "code"
    if top in _LIBRARY:
        return "library"
    if top == "models" or (top == "config" and parts[1:2] == ["models"] and parts[-1] in ("source", "revision")):
        return "parameter" if parts[-1] == "role" else "weights"
    if top == "datasets" and parts[-1] in ("hash",) or (top == "config" and parts[1:2] == ["datasets"]
                                                        and parts[-1] in ("path", "hub", "subset", "split")):
        return "data"
    return "parameter"


def _presence(old: dict[str, Any], new: dict[str, Any], what: str, kind: str) -> list[dict[str, Any]]:
    out = []
    for name in sorted(set(old) | set(new), key=str):
        if name not in old:
            out.append({"kind": kind, "what": f"{what}.{name}", "old": None, "new": "added"})
        elif name not in new:
            out.append({"kind": kind, "what": f"{what}.{name}", "old": "present", "new": "removed"})
    return out


def inputs_diff(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Every input that differs between two provenance records: ``{kind, what, old, new}`` in `KINDS`
    order (``what`` is the record's path, e.g. ``models.tiny.fingerprint``, ``config.k24.top_k``).

    Only what the figure's numbers depend on is named: its models and datasets (the record keeps those it
    used), the device, code and libraries, and as parameters the recipe's ``figure.inputs`` (the declared
    cache-key parameters of the analyses whose tables it reads, `citations.recipe.figure_inputs`) and
    ``figure.params`` (its own) — never the build's whole ``config`` (a K21 figure does not list
    ``k24.top_k``), which stays in the recipe for `reproduce`. Between records without ``figure.inputs``
    (older ones) the ``config`` is compared instead, and the merged ``params`` only when a record has no
    ``config`` either. A model or dataset present on one side only is one row (``added``/``removed``)."""
    rows = _presence(old.get("models") or {}, new.get("models") or {}, "models", "weights")
    rows += _presence(old.get("datasets") or {}, new.get("datasets") or {}, "datasets", "data")
    gone = {r["what"] for r in rows}
    fa, fb = {}, {}
    if all("inputs" in (r.get("figure") or {}) for r in (old, new)):
        skip = {"params", "config"}
    else:
        skip = {"params"} if old.get("config") and new.get("config") else set()
    _flatten({k: v for k, v in old.items() if k not in skip}, "", fa)
    _flatten({k: v for k, v in new.items() if k not in skip}, "", fb)
    for path in sorted(set(fa) | set(fb)):
        if any(path == g or path.startswith(g + ".") for g in gone):
            continue
        kind = _kind(path)
        a, b = fa.get(path), fb.get(path)
        if kind is None or a == b or (path in fa) != (path in fb) and (a in (None, {}, []) or b in (None, {}, [])):
            continue
        if _is_config_copy(path, fa, fb):
            continue
        row = {"kind": kind, "what": path, "old": a, "new": b}
        if not _same_change(row, rows):
            rows.append(row)
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(rows, key=lambda r: (order[r["kind"]], r["what"]))


def _is_config_copy(path: str, fa: dict, fb: dict) -> bool:
    """``config.models.<m>.source`` repeats ``models.<m>.source`` (and the dataset hash is not in the
    config): report the record's own field once."""
    parts = path.split(".")
    if parts[:2] == ["config", "models"] and len(parts) == 4:
        twin = f"models.{parts[2]}.{parts[3]}"
        return twin in fa or twin in fb
    return False


def _analysis_parameter(what: str) -> tuple[str, str] | None:
    """(parameter, ``model`` or ``model · dataset``) of a recipe path ``figure.inputs.<analysis>.<subject>.<parameter>``
    (a subject's name may hold dots; an analysis id and a parameter hold none), else None."""
    if not what.startswith("figure.inputs.") or what.count(".") < 4:
        return None
    subject, param = what.split(".", 3)[3].rsplit(".", 1)
    return param, subject


def _same_change(row: dict[str, Any], rows: list[dict[str, Any]]) -> bool:
    """Whether ``row`` is an analysis parameter that an earlier row of ``rows`` already reports: the same
    parameter of the same model and dataset, with the same values, read by another analysis of the figure."""
    mine = _analysis_parameter(row["what"])
    return mine is not None and any(_analysis_parameter(r["what"]) == mine and (r["old"], r["new"]) == (row["old"], row["new"])
                                    for r in rows)


def input_name(row: dict[str, Any]) -> str:
    """What an input difference names, in the configuration's words (plain text: escape it where shown): an
    analysis parameter by the key a user sets, ``k24.top_k (enc · wiki)``, ``max_length of dataset wiki
    (enc · wiki)``; a figure's own parameter as such; anything else by its recipe path."""
    found = _analysis_parameter(row["what"])
    if found is not None:
        param, subject = found
        key = schema.CONFIG_KEYS.get(param, param)
        if key.startswith("datasets[]."):
            key = f"{key[len('datasets[].'):]} of dataset {subject.rsplit(' · ', 1)[-1]}"
        return f"{key} ({subject})"
    if row["what"].startswith("figure.params."):
        return f"the figure's own {row['what'][len('figure.params.'):]}"
    return str(row["what"])


def describe_input(row: dict[str, Any]) -> str:
    """One input difference as text: ``parameter: k24.top_k (enc · wiki) 5 -> 3``,
    ``weights: models.tiny.fingerprint 2406c4… -> 9b1e0d…`` (`input_name`)."""
    return f"{row['kind']}: {for_terminal(input_name(row))} {_short(row['old'])} -> {_short(row['new'])}"


def _short(value: Any, n: int = 60) -> str:
    text = "–" if value is None else json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) \
        else str(value)
    text = for_terminal(text)
    return text if len(text) <= n else text[: n - 1] + "…"


# ---------------------------------------------------------------- data


def read_data(path: Path) -> pd.DataFrame | None:
    """A version's ``data.csv`` as the table had it (`version_files.read_csv`: text kept as text, the
    spreadsheet guard undone), read bounded (`readback.read_data`), or None when unreadable."""
    from report_builder.citations.readback import read_data

    return read_data(Path(path).parent, Path(path).name)


def _numeric(df: pd.DataFrame, col: str) -> bool:
    return pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col])


def _keys(old: pd.DataFrame, new: pd.DataFrame) -> list[str] | None:
    common = [c for c in new.columns if c in old.columns]
    keys = [c for c in KEY_COLUMNS if c in common]
    cands = [keys[:k] for k in range(1, len(keys) + 1)]
    cands.append(keys + [c for c in common if c not in keys and not (_numeric(old, c) and _numeric(new, c))])
    for cand in cands:
        if cand and not old.duplicated(cand).any() and not new.duplicated(cand).any():
            return cand
    return None


def _unit_names(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``old`` with a bare column renamed as ``new`` names it with its unit (``value`` -> ``value (%)``)
    when ``old`` lacks that name: a version published before ``data.csv`` named units held the same
    numbers under the bare name (the units themselves did not change)."""
    tags = {f" ({t})" for t in schema.UNIT_TAGS.values()}
    names = {}
    for col in new.columns:
        bare = next((str(col)[: -len(t)] for t in tags if str(col).endswith(t)), None)
        if bare is not None and bare in old.columns and col not in old.columns and bare not in new.columns:
            names[bare] = col
    return old.rename(columns=names) if names else old


def matched(old: pd.DataFrame, new: pd.DataFrame) -> tuple[pd.DataFrame, list[str], list[str], int, int] | None:
    """Rows of both versions side by side: (frame with ``<col>`` keys and ``<col>__old``/``<col>__new``
    values, key columns, value columns, rows only in old, rows only in new); None if not comparable."""
    old = _unit_names(old, new)
    keys = _keys(old, new)
    if keys is None:
        if len(old) != len(new):
            return None
        keys = []
        old, new = old.assign(row=range(1, len(old) + 1)), new.assign(row=range(1, len(new) + 1))
        keys = ["row"]
    values = [c for c in new.columns if c in old.columns and c not in keys and _numeric(old, c) and _numeric(new, c)]
    a = old[keys + values].astype({k: str for k in keys if not _numeric(old, k) or not _numeric(new, k)})
    b = new[keys + values].astype({k: str for k in keys if not _numeric(old, k) or not _numeric(new, k)})
    m = a.merge(b, on=keys, how="outer", suffixes=("__old", "__new"), indicator=True, sort=False)
    only_old = int((m["_merge"] == "left_only").sum())
    only_new = int((m["_merge"] == "right_only").sum())
    return m[m["_merge"] == "both"].drop(columns="_merge"), keys, values, only_old, only_new


def _where(row: pd.Series, keys: list[str]) -> dict[str, Any]:
    ordered = [k for k in WHERE if k in keys] + [k for k in keys if k not in WHERE]
    return {k: _plain(row[k]) for k in ordered}


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def data_summary(old: pd.DataFrame | None, new: pd.DataFrame | None) -> dict[str, Any]:
    """The numeric change from ``old`` to ``new`` (two ``data.csv`` frames).

    Returns ``comparable`` (rows could be matched), ``rows_old``/``rows_new``, ``rows_added``/``rows_removed``,
    ``values_compared``/``values_changed``, ``largest_abs`` and ``largest_rel`` (each ``{column, old, new,
    difference, where}``; the relative one over values whose old value is not zero), ``keys``.
    """
    if old is None or new is None:
        return {"comparable": False, "reason": "a data.csv is missing or unreadable"}
    out: dict[str, Any] = {"rows_old": len(old), "rows_new": len(new)}
    old = _unit_names(old, new)
    m = matched(old, new)
    if m is None:
        return {**out, "comparable": False, "reason": "no key columns identify the rows and the row counts differ"}
    frame, keys, values, only_old, only_new = m
    out.update(comparable=True, keys=keys, rows_added=only_new, rows_removed=only_old, values_compared=0,
               values_changed=0, largest_abs=None, largest_rel=None)
    # the largest change is sought among the measures (float columns) first; counts only when no measure moved
    measures = [c for c in values if pd.api.types.is_float_dtype(old[c]) or pd.api.types.is_float_dtype(new[c])]
    out["columns"] = {}
    cands: dict[bool, list[tuple[str, float, Any, str]]] = {True: [], False: []}
    for col in values:
        a = pd.to_numeric(frame[f"{col}__old"], errors="coerce").astype(float)
        b = pd.to_numeric(frame[f"{col}__new"], errors="coerce").astype(float)
        both_nan = a.isna() & b.isna()
        diff = (b - a).abs()
        changed = ~both_nan & ((a != b) | (a.isna() != b.isna()))
        out["values_compared"] += int((~both_nan).sum())
        out["values_changed"] += int(changed.sum())
        finite = diff[diff.notna() & (diff > 0)]
        out["columns"][col] = {"changed": int(changed.sum()), "max_abs": float(finite.max()) if not finite.empty else 0.0}
        if finite.empty:
            continue
        k = finite.idxmax()
        cands[col in measures].append(("abs", float(finite[k]), k, col))
        rel = (finite / a.loc[finite.index].abs()).replace(float("inf"), float("nan")).dropna()
        if not rel.empty:
            k2 = rel.idxmax()
            cands[col in measures].append(("rel", float(rel[k2]), k2, col))
    pool = cands[True] or cands[False]
    best_abs = max(((v, c, k) for t, v, k, c in pool if t == "abs"), default=None, key=lambda x: x[0])
    best_rel = max(((v, c, k) for t, v, k, c in pool if t == "rel"), default=None, key=lambda x: x[0])
    for name, best in (("largest_abs", best_abs), ("largest_rel", best_rel)):
        if best is not None:
            value, col, k = best
            # each cell with its own column's type: `frame.loc[k]` of an all-number frame made layer 1 "layer 1.0"
            row = pd.Series({c: frame.at[k, c] for c in frame.columns}, dtype=object)
            out[name] = {"column": col, "old": _plain(row[f"{col}__old"]), "new": _plain(row[f"{col}__new"]),
                         "difference": float(row[f"{col}__new"]) - float(row[f"{col}__old"]),
                         **({"relative": value} if name == "largest_rel" else {}), "where": _where(row, keys)}
    return out


def describe_data(s: dict[str, Any]) -> str:
    """A data summary as one line: ``largest change 0.0123 in value at model tiny, layer 2 (relative 4.1%
    at ...); 12 of 50 values changed``."""
    if not s.get("comparable"):
        return f"data not comparable ({s.get('reason', 'unknown')}; rows {s.get('rows_old')} -> {s.get('rows_new')})"
    parts = []
    if s.get("largest_abs"):
        a = s["largest_abs"]
        parts.append(f"largest change {a['difference']:.4g} in {for_terminal(a['column'])} "
                     f"({_num(a['old'])} -> {_num(a['new'])}) at {where_text(a['where'])}")
    if s.get("largest_rel"):
        r = s["largest_rel"]
        parts.append(f"largest relative change {100 * r['relative']:.3g}% in {for_terminal(r['column'])} at "
                     f"{where_text(r['where'])}")
    parts.append(f"{s['values_changed']} of {s['values_compared']} values changed")
    if s.get("rows_added") or s.get("rows_removed"):
        parts.append(f"{s['rows_added']} rows added, {s['rows_removed']} removed")
    return "; ".join(parts)


def where_text(where: dict[str, Any]) -> str:
    return for_terminal(", ".join(f"{k} {v}" for k, v in where.items()) or "–")


def _num(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else for_terminal(v)


# ---------------------------------------------------------------- difference chart


def marks(spec: Any) -> set[str]:
    """The mark types a Vega-Lite spec uses."""
    found: set[str] = set()
    if isinstance(spec, dict):
        m = spec.get("mark")
        if isinstance(m, str):
            found.add(m)
        elif isinstance(m, dict) and isinstance(m.get("type"), str):
            found.add(m["type"])
        for v in spec.values():
            found |= marks(v)
    elif isinstance(spec, list):
        for v in spec:
            found |= marks(v)
    return found


def difference_spec(old: pd.DataFrame | None, new: pd.DataFrame | None, spec: dict[str, Any] | None,
                    title: str) -> dict[str, Any] | None:
    """A Vega-Lite chart of new − old for a line (``line`` mark) or heatmap (``rect`` mark) figure whose
    data has a ``layer`` column; None for other figures or when the rows cannot be matched."""
    kinds = marks(spec or {})
    if old is None or new is None or not ({"line", "rect"} & kinds):
        return None
    old = _unit_names(old, new)
    m = matched(old, new)
    if m is None:
        return None
    frame, keys, values, _, _ = m
    if "layer" not in keys or not values or frame.empty or len(frame) > MAX_CHART_ROWS:
        return None
    measures = [c for c in values if pd.api.types.is_float_dtype(old[c]) or pd.api.types.is_float_dtype(new[c])]
    named = [c for c in values if c == "value" or str(c).startswith("value (")]
    col = named[0] if named else max(measures or values, key=lambda c: float(
        (pd.to_numeric(frame[f"{c}__new"], errors="coerce") - pd.to_numeric(frame[f"{c}__old"], errors="coerce"))
        .abs().max() or 0.0))
    grid = {"i", "j"} <= set(keys)  # a token map: one i x j panel per layer (and method or scope)
    others = [k for k in keys if k not in ("layer", "i", "j") and frame[k].nunique() > 1]
    diff = (pd.to_numeric(frame[f"{col}__new"], errors="coerce") - pd.to_numeric(frame[f"{col}__old"], errors="coerce"))
    rows = []
    for (_, r), d in zip(frame.iterrows(), diff):
        if pd.isna(d):
            continue
        row = {"layer": int(r["layer"]), "series": " · ".join(str(r[k]) for k in others) or col, "difference": float(d)}
        if grid:
            row.update(i=int(r["i"]), j=int(r["j"]))
        rows.append(row)
    if not rows:
        return None
    base = {"$schema": "https://vega.github.io/schema/vega-lite/v6.json", "data": {"values": rows},
            "title": {"text": f"{title}: new − old", "subtitle": f"{col}, per layer (1 = first)"},
            "config": {"background": "white", "font": "sans-serif"}}
    if "line" in kinds:
        return {**base, "width": 360, "height": 220, "mark": {"type": "line", "point": True},
                "encoding": {"x": {"field": "layer", "type": "ordinal", "title": "layer"},
                             "y": {"field": "difference", "type": "quantitative", "title": f"Δ {col}"},
                             "color": {"field": "series", "type": "nominal", "title": None}}}
    colour = {"field": "difference", "type": "quantitative", "title": f"Δ {col}",
              "scale": {"scheme": "redblue", "domainMid": 0, "reverse": True}}
    if grid:
        return {**base, "mark": "rect", "width": 160, "height": 160,
                "encoding": {"x": {"field": "j", "type": "ordinal", "title": "j (input token)"},
                             "y": {"field": "i", "type": "ordinal", "title": "i (output token)"},
                             "column": {"field": "layer", "type": "ordinal", "title": "layer"},
                             **({"row": {"field": "series", "type": "nominal", "title": None}} if others else {}),
                             "color": colour}}
    return {**base, "mark": "rect",
            "encoding": {"x": {"field": "series", "type": "nominal", "title": None, "sort": None},
                         "y": {"field": "layer", "type": "ordinal", "title": "layer"},
                         "color": colour,
                         "tooltip": [{"field": "series", "type": "nominal"}, {"field": "layer", "type": "ordinal"},
                                     {"field": "difference", "type": "quantitative", "format": ".4g"}]}}
