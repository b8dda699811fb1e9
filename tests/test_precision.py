"""Published precision (SPEC §8, issue #31): one rounding rule for every published number, and a figure
whose numbers moved less than the rule's tolerance keeps its version.

Unit tests of the rule and of the writers (CSV, spec data, HTML tables), of the "keep the version"
comparison, and one build through the API followed by a rebuild on the batched path with another
batch size (and the other device class's chunk rule, where the configuration has one): the same
figure hashes and the same bytes.
"""
from __future__ import annotations

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
from report_builder.site.figure_files import export_spec, write_figure_files


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


def _publish(ff, root: Path, dest: Path) -> Path:
    folder = dest / ff.content_hash
    shutil.copytree(root / "fig", folder)
    return folder


def test_a_rebuild_within_the_tolerance_keeps_the_version_and_one_beyond_it_does_not(tmp_path):
    base = _frame()
    base.loc[0, "value (%)"] = 12.3456500001  # on a rounding boundary: any noise moves its published digit
    first = _write(tmp_path / "a", base)
    old = _publish(first, tmp_path / "a", tmp_path / "published")
    noisy = base.copy()
    noisy.loc[0, "value (%)"] = 12.3456499999
    assert csv_text(noisy) != csv_text(base)  # rounding alone does not make it stable ...
    again = _write(tmp_path / "b", noisy, previous=old)
    assert again.kept and again.content_hash == first.content_hash  # ... the version is kept
    for name in ("data.csv", "spec.json", "chart.svg", "chart.png"):
        assert (tmp_path / "b" / "fig" / name).read_bytes() == (old / name).read_bytes()
    moved = base.copy()
    moved.loc[0, "value (%)"] = 12.3460  # 35 steps: a real change
    assert not _write(tmp_path / "c", moved, previous=old).kept
    relabelled = noisy.copy()
    relabelled.loc[0, "token"] = "other"  # the same numbers, another label: a new version
    assert not _write(tmp_path / "d", relabelled, previous=old).kept


# ---------------------------------------------------------------- through a build

FIGS = ["k21-fig3", "k21-tab2", "k24-ctx-ff"]


def _versions(site: Path) -> dict:
    return json.loads((site / "figures" / "versions.json").read_text())


def _version_bytes(site: Path) -> dict[str, bytes]:
    idx = _versions(site)
    return {f"{fid}/{h}/{p.name}": p.read_bytes() for fid, h in idx["current"].items()
            for p in sorted((site / "figures" / fid / h).iterdir()) if p.name != "index.html"}


def test_a_rebuild_in_other_batches_and_chunks_publishes_the_same_bytes(tmp_path, monkeypatch):
    """The batched (padded) path with another batch size — and the GPU class's chunk rule where the
    configuration offers one — moves the results by ~1e-7: the published figures are byte for byte
    the first build's."""
    from report_builder import api, engine
    from report_builder.config import Config
    from tests.test_pipeline import tiny_bert_dir

    model = tiny_bert_dir(tmp_path / "tiny", 0)
    cfg = {"models": [{"name": "tiny", "source": str(model), "role": "primary_encoder"}],
           "datasets": [{"id": "wiki", "n": 6, "k24_n": 3, "max_length": 128}],  # lengths differ: padding
           "k24": {"top_k": 5, "examples": 1}, "figures": FIGS, "out_dir": str(tmp_path / "site"),
           "cache_dir": str(tmp_path / "c1"), "threads": 1}
    rep1, _ = api.build(dict(cfg), log=None, progress=False)
    first = _version_bytes(tmp_path / "site")

    calls = []
    plain = engine.decompose_sequences

    def batched(*a, **k):
        calls.append(k.get("batch_size"))
        return plain(*a, **{**k, "batched": True})

    monkeypatch.setattr(engine, "decompose_sequences", batched)
    again = {**cfg, "cache_dir": str(tmp_path / "c2"), "batch_size": 3}
    if "chunk_rule" in getattr(Config, "__dataclass_fields__", {}):
        again["chunk_rule"] = "gpu"
    rep2, _ = api.build(again, log=None, progress=False)
    assert calls, "the batched path did not run"
    moved = [n for n in rep1.tables if isinstance(rep1.tables[n], pd.DataFrame) and n in rep2.tables
             and not rep1.tables[n].equals(rep2.tables[n])]
    assert moved, "the batched path changed no result: nothing was tested"
    assert _version_bytes(tmp_path / "site") == first
    assert all(len(vs) == 1 for vs in _versions(tmp_path / "site")["figures"].values())
