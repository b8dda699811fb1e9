"""Two versions of a figure equal within the published precision (SPEC §8): the test a rebuild must pass
to keep its figure's current version (`site.figure_files.write_figure_files`) and that `reproduce` calls
"equal within tolerance" (`citations.verify`).

Two versions are the same within the precision when their ``spec.json`` are the same but for numbers
within `precision.TOLERANCE_STEPS` steps of the rule (`precision.json_within`; the names Altair gives
datasets, a hash of their values, are replaced by their order of reference: `comparable_spec`), their
``data.csv`` have the same columns, rows and text, and numbers within the same tolerance, element by
element (`precision.frames_within`), and, for a drawn diagram, the same ``chart.svg``.

Pitfall: the texts compared may come from anywhere (a downloaded folder): callers read them bounded
(`readback`); anything that does not parse counts as different, never as an error.
"""
from __future__ import annotations

import io
import json
from typing import Any

from report_builder import precision


def same_part(name: str, old: dict[str, str], new: dict[str, str],
              tolerance: float = precision.TOLERANCE_STEPS) -> bool:
    """Whether one file (``spec.json``, ``data.csv`` or ``chart.svg``) of two versions is the same within
    the precision (`same_content` of that file alone; a file on one side only differs)."""
    import pandas as pd

    from report_builder.citations.version_files import read_csv

    if name not in old or name not in new:
        return False
    try:
        if name == "spec.json":
            return precision.json_within(comparable_spec(json.loads(old[name])), comparable_spec(json.loads(new[name])),
                                         tolerance)
        if name == "data.csv":
            return precision.frames_within(read_csv(io.StringIO(old[name])), read_csv(io.StringIO(new[name])),
                                           tolerance)
    except (ValueError, TypeError, pd.errors.ParserError):
        return False
    return old[name] == new[name]


def same_content(old: dict[str, str], new: dict[str, str], tolerance: float = precision.TOLERANCE_STEPS) -> bool:
    """Whether two versions' texts (``{"spec.json": ..., "data.csv": ..., "chart.svg": ...}``; chart.svg
    only for a diagram, whose hash covers it) are the same within the published precision."""
    names = ("spec.json", "data.csv") + (("chart.svg",) if "chart.svg" in old or "chart.svg" in new else ())
    return all(same_part(name, old, new, tolerance) for name in names)


def comparable_spec(spec: Any) -> Any:
    """A Vega-Lite spec with its named datasets renamed by order of first reference (``dataset-0``, ...)
    and listed in that order, so two specs whose data differ only within the precision compare equal
    whatever names their data hashed to (`published_spec`)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("datasets"), dict):
        return spec
    rest = {k: v for k, v in spec.items() if k != "datasets"}
    datasets = spec["datasets"]
    order: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in sorted(node):
                v = node[k]
                if k == "name" and isinstance(v, str) and v in datasets and v not in order:
                    order.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(rest)
    order += sorted(n for n in datasets if n not in order)
    text = json.dumps(rest, sort_keys=True)
    for k, name in enumerate(order):
        text = text.replace(json.dumps(name), json.dumps(f"dataset-{k}"))
    out = json.loads(text)
    out["datasets"] = [datasets[n] for n in order]
    return out
