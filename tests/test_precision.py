"""Published precision (SPEC §8, issue #31): one rounding rule for every published number, and a figure
whose numbers moved less than the rule's tolerance keeps its version.

Unit tests of the rule and of the writers (CSV, spec data, HTML tables) and of the "keep the version"
comparison; the builds (a rebuild on the batched path and the other chunk rule publishes the same
bytes) are in tests/test_citations_verify.py.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from report_builder import precision
from report_builder.citations.version_files import csv_text
from report_builder.site import htmltable
from report_builder.site.figure_files import Previous, export_spec, write_figure_files


def test_the_rule_rounds_to_six_significant_digits_with_a_floor_and_keeps_integers():
    cases = {0.6731359976: 0.673136, 0.6731359977: 0.673136, 12.3456749: 12.3457, 1234567.3: 1234570.0,
             1234567.0: 1234567.0, 4e-13: 0.0, 6e-13: 1e-12, 1.5e-10: 1.5e-10, -1e-17: 0.0, 0.1 + 0.2: 0.3,
             -0.5: -0.5, 7.0: 7.0}
    got = precision.round_array(list(cases))
    assert [float(v) for v in got] == list(cases.values())
    assert math.copysign(1, precision.round_value(-1e-20)) == 1  # no -0.0
    assert math.isnan(precision.round_value(float("nan"))) and precision.round_value(math.inf) == math.inf
    assert repr(precision.round_value(0.30000000000000004)) == "0.3"  # prints with its digits only
    # the tolerance: steps of the rule at the larger magnitude
    assert precision.within([1.0, 0.673136, 5.0], [1.00001, 0.673138, 5.0])
    assert not precision.within([0.673136], [0.673139])
    assert not precision.within([1.0], [float("nan")]) and precision.within([float("nan")], [float("nan")])
    assert precision.describe()["significant_digits"] == precision.SIGNIFICANT == 6


def _frame(noise: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    v = rng.random(40) * 100
    return pd.DataFrame({"layer": np.repeat([1, 2], 20), "token": [f"t{i}" for i in range(40)],
                         "value (%)": v * (1 + noise), "n": np.arange(40)})


def _chart(df: pd.DataFrame) -> alt.Chart:
    return alt.Chart(df).mark_line().encode(x="token:N", y=alt.Y("value (%):Q", scale=alt.Scale(
        domain=[0, float(df["value (%)"].max())])), color="layer:N")


def test_noise_below_the_rule_changes_no_byte_of_the_csv_the_spec_or_the_table():
    a, b = _frame(), _frame(1e-9)
    assert not a.equals(b)
    assert csv_text(a) == csv_text(b)
    assert ",63.6962," in csv_text(a)  # six significant digits (63.696169... %)
    sa, sb = export_spec(_chart(a), None), export_spec(_chart(b), None)
    assert json.dumps(sa, sort_keys=True) == json.dumps(sb, sort_keys=True)  # dataset names included
    values = next(iter(sa["datasets"].values()))
    assert all(len(repr(r["value (%)"]).replace(".", "").lstrip("0")) <= 6 for r in values)
    assert htmltable.to_html(a) == htmltable.to_html(b)


def _write(root: Path, df: pd.DataFrame, previous: Path | None = None):
    return write_figure_files("fig", df, _chart(df), None, root, previous=previous)


def _publish(ff, root: Path, site: Path) -> Previous:
    """The figure written under ``root`` as a published version of ``site`` (files and their SHA-256)."""
    rel = f"figures/fig/{ff.content_hash}/"
    shutil.copytree(root / "fig", site / rel)
    return Previous(site, rel, {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (site / rel).iterdir()})


def test_a_rebuild_within_the_tolerance_keeps_the_version_and_one_beyond_it_does_not(tmp_path):
    base = _frame()
    base.loc[0, "value (%)"] = 12.3456500001  # on a rounding boundary: any noise moves its published digit
    first = _write(tmp_path / "a", base)
    old = _publish(first, tmp_path / "a", tmp_path / "site")
    noisy = base.copy()
    noisy.loc[0, "value (%)"] = 12.3456499999
    assert csv_text(noisy) != csv_text(base)  # rounding alone does not make it stable ...
    names = ("data.csv", "spec.json", "chart.svg", "chart.png")
    stamps = {n: (old.site / old.permalink / n).stat().st_mtime_ns for n in names}
    again = _write(tmp_path / "b", noisy, previous=old)
    assert again.kept and again.content_hash == first.content_hash  # ... the version is kept
    for name in names:
        assert (tmp_path / "b" / "fig" / name).read_bytes() == (old.site / old.permalink / name).read_bytes()
        assert (old.site / old.permalink / name).stat().st_mtime_ns == stamps[name], name  # carried, never rewritten
    broken = Previous(old.site, old.permalink, {**old.files, "chart.png": "0" * 64})  # the last file fails to carry
    part = _write(tmp_path / "p", noisy, previous=broken)
    assert not part.kept and part.content_hash != first.content_hash
    fresh = _write(tmp_path / "q", noisy)  # the same build with no earlier version
    assert part.content_hash == fresh.content_hash
    for name in ("data.csv", "spec.json"):  # its own texts again
        assert (tmp_path / "p" / "fig" / name).read_bytes() == (tmp_path / "q" / "fig" / name).read_bytes(), name
    for name in names:
        assert (old.site / old.permalink / name).stat().st_mtime_ns == stamps[name], name
        assert (tmp_path / "p" / "fig" / name).stat().st_nlink == 1, name  # no link to a published file left
    moved = base.copy()
    moved.loc[0, "value (%)"] = 12.3460  # 35 steps: a real change
    assert not _write(tmp_path / "c", moved, previous=old).kept
    relabelled = noisy.copy()
    relabelled.loc[0, "token"] = "other"  # the same numbers, another label: a new version
    assert not _write(tmp_path / "d", relabelled, previous=old).kept
    (old.site / old.permalink / "data.csv").write_text("planted", encoding="utf-8")  # not the recorded bytes
    assert not _write(tmp_path / "e", noisy, previous=old).kept


def test_verdicts_name_the_part_that_differs(tmp_path):
    """`verify.compare`: within the precision -> within; numbers beyond it -> differs naming data.csv; the
    same numbers in another chart (its text) -> differs naming spec.json only."""
    from report_builder.citations.verify import FolderCheck, compare

    def texts(df: pd.DataFrame, root: Path, title: str = "t") -> tuple[str, dict[str, str]]:
        ff = write_figure_files("fig", df, _chart(df).properties(title=title), None, root)
        return ff.content_hash, {n: (root / "fig" / n).read_text() for n in ("spec.json", "data.csv")}

    base = _frame()
    h, old = texts(base, tmp_path / "a")
    check = FolderCheck(given=["data.csv", "spec.json"], texts=old)
    assert compare(h, h, check, old).verdict == "identical"
    noisy = base.assign(**{"value (%)": base["value (%)"] * (1 + 4e-6)})  # a few steps of some values
    h2, new = texts(noisy, tmp_path / "b")
    c = compare(h, h2, check, new)
    assert h2 != h and c.verdict in ("within", "differs")
    tiny = base.copy()
    tiny.loc[0, "value (%)"] = 63.6961  # one step from 63.6962
    h3, new = texts(tiny, tmp_path / "c")
    c = compare(h, h3, check, new)
    assert (c.verdict, c.data["values_changed"]) == ("within", 1)
    moved = base.assign(**{"value (%)": base["value (%)"] + 1})
    h4, new = texts(moved, tmp_path / "d")
    c = compare(h, h4, check, new)
    assert c.verdict == "differs" and "data.csv" in c.parts and c.data["values_changed"] == 40
    h5, new = texts(base, tmp_path / "e", title="another title")
    c = compare(h, h5, check, new)
    assert (c.verdict, c.parts) == ("differs", ["spec.json"]) and c.data["values_changed"] == 0


def test_a_recipe_can_tighten_the_tolerance_reproduce_uses_but_never_widen_it():
    """`reproduce` took a recipe's ``precision.tolerance_steps`` up to 10: a forged recipe recording 10 had a
    folder whose numbers were moved by up to 10 steps of the rule called "equal within tolerance" (exit 0)."""
    from report_builder import precision

    def rec(steps):
        return {"precision": {**precision.describe(), "tolerance_steps": steps}}

    assert precision.recorded_tolerance(rec(10)) == precision.TOLERANCE_STEPS
    assert precision.recorded_tolerance(rec(precision.TOLERANCE_STEPS + 0.5)) == precision.TOLERANCE_STEPS
    assert precision.recorded_tolerance(rec(1)) == 1.0 and precision.recorded_tolerance(rec(0)) == 0.0
    assert precision.recorded_tolerance({}) == precision.TOLERANCE_STEPS


def test_a_difference_near_zero_is_compared_at_its_columns_scale(tmp_path):
    """FF-amp (``Â_after − Â_before``, k24-ffamp-example) holds values near 0 whose noise is that of their
    operands: a rebuild with the GPU class's chunk rule moved ``-7.33745e-07`` to ``-7.33629e-07`` (116 steps
    of its own magnitude, 0.01 step of the column's largest value 3.57e-3) and published a new version of a
    figure whose numbers had not changed. Compared at the column's scale, it keeps its version; the same
    numbers in a column that is not a difference are still beyond the tolerance, and a real change of the
    difference is still one."""
    amp = "amp (row-normalised)"
    base = pd.DataFrame({"i": [0, 1, 2], "j": [1, 2, 0], amp: [3.56642e-3, -7.33745e-07, 4.55278e-05]})
    noisy = base.assign(**{amp: [3.56642e-3, -7.33629e-07, 4.55279e-05]})

    def chart(df: pd.DataFrame) -> alt.Chart:  # the figure's own field name in the spec: ``amp``
        return alt.Chart(df.rename(columns={amp: "amp"})).mark_rect().encode(x="j:O", y="i:O", color="amp:Q")

    first = write_figure_files("fig", base, chart(base), None, tmp_path / "a")
    old = _publish(first, tmp_path / "a", tmp_path / "site")
    again = write_figure_files("fig", noisy, chart(noisy), None, tmp_path / "b", previous=old)
    assert again.kept and again.content_hash == first.content_hash
    moved = base.assign(**{amp: [3.56642e-3, -7.4e-07, 4.55278e-05]})  # 0.6 step of the column's scale
    assert write_figure_files("fig", moved, chart(moved), None, tmp_path / "c", previous=old).kept
    real = base.assign(**{amp: [3.56642e-3, -1.2e-07, 4.55278e-05]})  # 61 steps of the column's scale
    assert not write_figure_files("fig", real, chart(real), None, tmp_path / "d", previous=old).kept
    assert precision.frames_within(base, noisy)
    plain = [pd.DataFrame({"value (%)": f[amp]}) for f in (base, noisy)]  # not a difference: its own magnitude
    assert not precision.frames_within(*plain)


def test_the_contextualization_change_and_its_spread_are_compared_at_their_columns_scale():
    """k24-ctx-*: ``change`` is 1 − ρ and ``change_sd`` its standard deviation over sequences, both computed
    by cancellation. The smoke build rebuilt with the GPU class's chunk rule moved a ``change_sd`` of
    ``2.48318e-05`` to ``2.48489e-05`` (171 steps of its own magnitude, 0.03 of the column's largest value
    0.204) and published new versions of k24-ctx-ff, -components, -cumulative and k24-models."""
    old = pd.DataFrame({"layer": [1, 5, 5], "component": ["FF", "RES", "ATB→ATBFFRES"],
                        "change": [0.0633409, 0.203999, 1.2e-06], "change_sd": [0.203999, 0.000304949, 2.48318e-05]})
    new = old.assign(change=[0.0633408, 0.203999, 1.3e-06], change_sd=[0.203999, 0.000304918, 2.48489e-05])
    assert precision.frames_within(old, new)
    assert not precision.frames_within(old, new.assign(change_sd=[0.203999, 0.000304949, 0.0012]))
    spec = {"datasets": {"d": [{"change": c, "change_sd": s} for c, s in zip(old["change"], old["change_sd"])]}}
    spec_new = {"datasets": {"d": [{"change": c, "change_sd": s} for c, s in zip(new["change"], new["change_sd"])]}}
    assert precision.json_within(spec, spec_new)


def test_chart_data_a_figure_rounds_to_fewer_digits_is_compared_at_its_last_digit():
    """A chart's inline data rounded coarser than the rule to keep the spec small (k24-ln-dims: 4 decimals;
    token maps: 3 or 4; K21 category heatmaps: 2): the smoke build rebuilt with the GPU class's chunk rule
    moved an ``ln_out_change`` of ``0.1674`` to ``0.1673`` (one unit of its last digit, 100 steps of the
    rule) while ``data.csv`` moved within the tolerance, and k24-ln-dims got a new version. Chart data is now
    compared within 2 units of the last digit its field is published at; a number outside the chart data
    (a scale's domain) and a field published at the rule are compared as before."""
    def spec(rows: list[dict], domain: float) -> dict:
        return {"layer": [{"data": {"values": json.dumps(rows), "format": {"type": "json"}},
                           "encoding": {"y": {"scale": {"domain": [0, domain]}}}}]}

    old_rows = [{"dim": 0, "ln_out_change": 0.1674, "kept_ratio": 0.623, "rho": 0.512345},
                {"dim": 1, "ln_out_change": 1.4946, "kept_ratio": 1.1023, "rho": 0.5}]
    new_rows = [{"dim": 0, "ln_out_change": 0.1673, "kept_ratio": 0.6229, "rho": 0.512345},
                {"dim": 1, "ln_out_change": 1.4946, "kept_ratio": 1.1023, "rho": 0.5}]
    assert precision.json_within(spec(old_rows, 1.5), spec(new_rows, 1.5))
    assert not precision.json_within(spec(old_rows, 1.5), spec(new_rows, 1.4999))  # not chart data: the rule
    moved = [dict(new_rows[0], ln_out_change=0.1671), new_rows[1]]  # 3 units of its last digit
    assert not precision.json_within(spec(old_rows, 1.5), spec(moved, 1.5))
    fine = [dict(new_rows[0], ln_out_change=0.1674, rho=0.512348), new_rows[1]]  # 3 steps of the rule
    assert not precision.json_within(spec(old_rows, 1.5), spec(fine, 1.5))
    count = [dict(new_rows[0], ln_out_change=0.1674, dim=1), dict(new_rows[1], dim=2)]  # integers stay exact
    assert not precision.json_within(spec(old_rows, 1.5), spec(count, 1.5))
