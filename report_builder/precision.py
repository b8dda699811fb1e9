"""Published precision (SPEC §8): the one rounding rule every published number goes through, and the
tolerance within which two published numbers are "equal".

**The rule.** A published float is rounded to `SIGNIFICANT` (6) significant digits, never to a step
finer than `FLOOR` (1e-12: a magnitude below half of it publishes as 0); integers, and floats that hold
an integer of `SIGNIFICANT` or more digits (a count in a float column), are exact and kept as they are;
``-0.0`` publishes as ``0.0``; NaN and infinities are kept. Why six: float32 carries about 7.2 decimal
digits, and the decomposition is exact only to ~1e-6 relative in float32 (its terms sum to the model's
own tensor within that; the batched path, the chunk rule of another device class and another batch
composition move results at ~1e-7 to 1e-6 relative). Six digits keep a step of 1e-6 to 1e-5 of the
value: at or above the method's error, and still three or more digits beyond what either paper reports.
The floor removes float64 residue around exact zeros (``2e-16`` beside ``0``).

**The tolerance.** Rounding alone cannot make every number stable: a value that sits on a rounding
boundary flips to the next step for any noise at all. Two published values are *equal within the rule*
when they differ by at most `TOLERANCE_STEPS` steps of the rule at the larger magnitude (`steps`).
A rebuild whose figure data equal the current version's within it keeps that version
(`site.figure_files`); `reproduce` calls such a rebuild "equal within tolerance". A column that holds a
value computed by cancellation (`DIFFERENCES`: FF-amp, 1 − ρ and its standard deviation) is compared at its
column's largest magnitude instead: a value near 0 there carries the noise of its operands, not of its own
size. A chart's data rounded coarser than the rule (to keep a spec small) is compared within that many
units of its last published digit (`json_within`, `last_digit`).

Every writer of published numbers goes through `round_array` (``data.csv`` and ``paper_vs_ours.csv``:
`citations.version_files.csv_text`; the chart's spec, data and scales: `round_json` in
`site.spec_data.published_spec`; HTML tables: `site.htmltable`; the figures' readings and pre-formatted
cells: `published`), so a number reads the same in the CSV, the spec and the page. Pitfall: round in one place and with one
implementation: Python's ``round`` and this vectorised rule may differ on a float within a bit of a
tie, so everything (scalars too) goes through `round_array`.
"""
from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Iterator

import numpy as np

SIGNIFICANT = 6
"""Significant digits of a published float."""
FLOOR = 1e-12
"""The finest step of the rule (an absolute floor for values near 0)."""
TOLERANCE_STEPS = 2
"""Two published values within this many steps of the rule (at the larger magnitude) are equal within
tolerance: one step for a value that crossed a rounding boundary, one for a result whose own error
(a small term, a ratio of two noisy sums) reaches the step."""

DIFFERENCES = frozenset({"amp", "change", "change_sd"})
"""The columns (of ``data.csv``, with or without their unit tag, and fields of a spec's data) whose values
are computed by cancellation, as a difference of larger quantities: FF-amp, ``Â^{after FF} − Â^{before FF}``
of two row-normalised maps (k24-ffamp-top, k24-ffamp-example); the contextualization change ``1 − ρ`` and
``change_sd``, its standard deviation over sequences (k24-ctx-*, k24-models). Their float noise is that of
the operands (up to 1), not of the result: near 0 it is many steps of the value's own magnitude (the GPU
class's chunk rule moved an FF-amp of ``-7.33745e-07`` to ``-7.33629e-07``, 116 steps of its own and 0.01
of the column's largest value 3.57e-3; a ``change_sd`` of ``2.48318e-05`` to ``2.48489e-05``, 171 steps of
its own and 0.03 of the column's 0.204). Two such values are equal within the rule when they are within
`TOLERANCE_STEPS` steps at the largest magnitude of their column (`steps`' ``scale``)."""

_FLOOR_EXP = -12
assert 10.0 ** _FLOOR_EXP == FLOOR

RULE = (f"{SIGNIFICANT} significant digits, never finer than {FLOOR:g} (smaller magnitudes publish as 0); "
        f"integers exact")
"""The rule in one line (the Methods page and every recipe name it)."""


def recorded_tolerance(rec: Any) -> float:
    """The tolerance (in steps) a recipe records (``precision.tolerance_steps``) when it is a plain number
    from 0 to `TOLERANCE_STEPS`, else `TOLERANCE_STEPS` (a recipe written before the rule, or a value out of
    range). A recipe can only tighten it: a downloaded one is untrusted, and one recording 10 steps made
    `reproduce` call a folder whose numbers a forger moved by 10 steps "equal within tolerance" (exit 0)."""
    value = (rec.get("precision") or {}).get("tolerance_steps") if isinstance(rec, dict) and isinstance(
        rec.get("precision"), dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= TOLERANCE_STEPS:
        return float(value)
    return float(TOLERANCE_STEPS)


def describe() -> dict[str, Any]:
    """The rule as a recipe records it (``precision`` in ``provenance.json``)."""
    return {"rule": RULE, "significant_digits": SIGNIFICANT, "floor": FLOOR, "tolerance_steps": TOLERANCE_STEPS}


def _exponent(mag: np.ndarray) -> np.ndarray:
    """``floor(log10(mag))`` for positive finite ``mag`` (0 elsewhere), corrected where log10 rounds."""
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log10(np.where(mag > 0, mag, 1.0)))
    e = np.where(np.isfinite(e), e, 0.0)
    e = e - (10.0 ** e > mag) + (10.0 ** (e + 1) <= mag)  # log10(1000) may be 2.9999999999999996
    return e


def step_of(values: Any) -> np.ndarray:
    """The rule's step at each magnitude: ``10 ** max(exponent - (SIGNIFICANT - 1), log10 FLOOR)``."""
    mag = np.abs(np.asarray(values, dtype=float))
    exp = np.maximum(_exponent(mag) - (SIGNIFICANT - 1), _FLOOR_EXP)
    return 10.0 ** exp


def round_array(values: Any) -> np.ndarray:
    """``values`` (any float array-like) rounded by the rule, as a float64 array of the same shape.

    Each result is the double nearest to its decimal (``rint(x * 10**d) / 10**d``: an exact integer
    divided by an exact power of ten, correctly rounded), so it prints with at most `SIGNIFICANT` digits.
    """
    x = np.asarray(values, dtype=float)
    out = x.copy()
    mag = np.abs(x)
    finite = np.isfinite(x)
    exact = finite & (mag >= 10.0 ** SIGNIFICANT) & (x == np.rint(x))  # counts held in floats
    todo = finite & ~exact
    if todo.any():
        xs = x[todo]
        d = np.minimum((SIGNIFICANT - 1) - _exponent(np.abs(xs)), -_FLOOR_EXP).astype(int)
        r = np.empty_like(xs)
        pos = d >= 0
        scale = 10.0 ** np.abs(d)
        with np.errstate(over="ignore", invalid="ignore"):
            r[pos] = np.rint(xs[pos] * scale[pos]) / scale[pos]
            r[~pos] = np.rint(xs[~pos] / scale[~pos]) * scale[~pos]
        out[todo] = r
    return out + 0.0  # -0.0 -> 0.0


def round_value(value: float) -> float:
    """One float rounded by the rule (through `round_array`, the one implementation)."""
    return float(round_array(np.array([value], dtype=float))[0])


def published(value: Any, spec: str) -> str:
    """A number as prose and pre-formatted table cells print it, with ``spec`` ``.Nf``, ``+.Nf`` or ``.N%``:
    rounded by the rule first (`round_value`), then that decimal rounded half-up to N places, so the text
    follows from the number the CSV publishes and noise below the rule changes no printed digit (formatting
    the float itself prints a value within float noise of a ``.x5`` boundary either way). NaN and
    infinities print as ``n/a`` (a reader never sees ``nan``; a caller that knows why a number is
    undefined says so in words instead, as the readings do)."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        raise ValueError(f"published: spec {spec!r} is not .Nf, +.Nf or .N%")
    v = round_value(float(value))
    if not math.isfinite(v):
        return NOT_A_NUMBER
    d = Decimal(repr(v)) * (100 if m.group(3) == "%" else 1)
    text = str(d.quantize(Decimal(1).scaleb(-int(m.group(2))), rounding=ROUND_HALF_UP))
    if m.group(1) and not text.startswith("-"):
        text = "+" + text
    return text + ("%" if m.group(3) == "%" else "")


#: How `published` prints NaN and infinities.
NOT_A_NUMBER = "n/a"

_SPEC = re.compile(r"(\+?)\.(\d)([f%])")


def _floats(node: Any) -> Iterator[float]:
    if isinstance(node, dict):
        for v in node.values():
            yield from _floats(v)
    elif isinstance(node, list):
        for v in node:
            yield from _floats(v)
    elif isinstance(node, float):
        yield node


def _put(node: Any, it: Iterator[float]) -> Any:
    if isinstance(node, dict):
        return {k: _put(v, it) for k, v in node.items()}
    if isinstance(node, list):
        return [_put(v, it) for v in node]
    if isinstance(node, float):
        return next(it)
    return node


def round_json(obj: Any) -> Any:
    """A copy of a JSON-plain object (dicts, lists, numbers, text) with every float rounded by the rule
    (ints, bools and text untouched). A float that rounds to an integer stays a float (``2.0``)."""
    found = list(_floats(obj))
    if not found:
        return obj
    rounded = round_array(np.array(found, dtype=float))
    return _put(obj, iter(float(v) for v in rounded))


def is_difference(name: Any) -> bool:
    """Whether a column or field ``name`` (``amp`` or ``amp (row-normalised)``) is one of `DIFFERENCES`."""
    return isinstance(name, str) and name.split(" (", 1)[0] in DIFFERENCES


def scale_of(*columns: Any) -> float:
    """The largest finite magnitude in ``columns`` (0 when there is none): the magnitude a difference
    column's values are compared at (`DIFFERENCES`)."""
    mags = [np.abs(np.asarray(c, dtype=float)).ravel() for c in columns]
    mag = np.concatenate(mags) if mags else np.zeros(0)
    mag = mag[np.isfinite(mag)]
    return float(mag.max()) if mag.size else 0.0


def steps(a: Any, b: Any, scale: Any = 0.0, grid: Any = 0.0) -> np.ndarray:
    """How many steps of the rule (at the larger magnitude of each pair, or at ``scale`` where that is
    larger: a difference column's, `DIFFERENCES`) ``a`` and ``b`` are apart, element by element, a step
    being at least ``grid`` (the last digit of chart data published coarser than the rule, `json_within`):
    0 where both are equal (NaN beside NaN included), inf where only one is NaN or an infinity differs."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
        step = step_of(np.maximum(np.maximum(np.abs(a), np.abs(b)), np.asarray(scale, dtype=float)))
        out = diff / np.maximum(step, np.asarray(grid, dtype=float))
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    out = np.where(same, 0.0, out)
    return np.where(np.isnan(out), math.inf, out)


def within(a: Any, b: Any, tolerance: float = TOLERANCE_STEPS, scale: Any = 0.0, grid: Any = 0.0) -> bool:
    """Whether every pair of ``a`` and ``b`` (same shape) is equal within ``tolerance`` steps of the rule
    (default `TOLERANCE_STEPS`; `reproduce` passes the one its recipe recorded), at ``scale`` where that is
    larger than the pair, of at least ``grid`` (`steps`)."""
    s = steps(a, b, scale, grid)
    return bool(s.size == 0 or float(np.max(s)) <= tolerance * (1 + 1e-6))


# ---------------------------------------------------------------- equal within the rule


def _pairs(a: Any, b: Any, out: list[tuple[float, float, Any, bool]], key: Any = None, data: bool = False) -> bool:
    """Collect the number pairs of two JSON-plain objects into ``out``, each with the name of the field it
    sits under (``key``: the innermost dict key, through lists) and whether it is chart data (``data``: under
    a spec's ``datasets`` or inside inline data text); False as soon as anything but a number differs (keys,
    lengths, text, types). Text that differs but holds JSON on both sides (inline data,
    `figures.charts.data.inline_data`) is compared parsed."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        out.append((float(a), float(b), key, data))
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_pairs(a[k], b[k], out, k, data or k == "datasets") for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_pairs(x, y, out, key, data) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return True
        if a[:1] in "[{" and b[:1] in "[{":
            import json

            try:
                pa, pb = json.loads(a), json.loads(b)
            except ValueError:
                return False
            return _pairs(pa, pb, out, key, True)
        return False
    return a == b and type(a) is type(b)


def last_digit(values: Any) -> float:
    """The step of the finest last digit among ``values`` as they print (``0.1674`` -> 1e-4): the grid a
    chart's data field was rounded to, when a figure rounds it coarser than the rule (`json_within`); 0
    when every value is an integer (counts stay exact) or none is finite."""
    from decimal import Decimal

    v = np.unique(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    if not v.size or bool(np.all(v == np.rint(v))):
        return 0.0
    exp = min(Decimal(repr(float(x))).normalize().as_tuple().exponent for x in v)
    return 10.0 ** min(int(exp), 0)


def json_within(a: Any, b: Any, tolerance: float = TOLERANCE_STEPS) -> bool:
    """Whether two JSON-plain objects are the same but for numbers equal within the rule's tolerance; the
    values of a `DIFFERENCES` field at the largest magnitude of that field anywhere in either object, and
    chart data (a spec's datasets, inline data) within the tolerance of the last digit its field is
    published at (`last_digit`: a figure may round a chart's data coarser than the rule to keep its spec
    small, and one unit of a 4-decimal value is 100 steps of the rule; ``data.csv`` holds the same numbers
    at the rule and is compared at it)."""
    found: list[tuple[float, float, Any, bool]] = []
    if not _pairs(a, b, found):
        return False
    if not found:
        return True
    x = np.array([(p, q) for p, q, _, _ in found], dtype=float)
    names: dict[Any, int] = {}
    codes = np.array([names.setdefault(k, len(names)) for _, _, k, _ in found])
    data = np.array([d for _, _, _, d in found])
    scale, grid = np.zeros(len(found)), np.zeros(len(found))
    for name, code in names.items():
        rows = codes == code
        if is_difference(name):
            scale[rows] = scale_of(x[rows])
        if (rows & data).any():
            grid[rows & data] = last_digit(x[rows & data])
    return within(x[:, 0], x[:, 1], tolerance, scale, grid)


def frames_within(a: Any, b: Any, tolerance: float = TOLERANCE_STEPS) -> bool:
    """Whether two tables (pandas frames read from published CSVs) have the same columns, rows and
    non-numeric cells, and numeric cells equal within the rule's tolerance, element by element (a
    `DIFFERENCES` column's at its largest magnitude in either table)."""
    import pandas as pd

    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    for k in range(a.shape[1]):
        x, y = a.iloc[:, k], b.iloc[:, k]
        num = [pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) for s in (x, y)]
        if all(num):
            xs, ys = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
            scale = scale_of(xs, ys) if is_difference(a.columns[k]) else 0.0
            if not within(xs, ys, tolerance, scale):
                return False
        elif any(num) or [None if pd.isna(v) else v for v in x.tolist()] != [None if pd.isna(v) else v
                                                                             for v in y.tolist()]:
            return False
    return True
