"""The figure cache (`site.figure_cache`): a figure whose inputs are unchanged is neither built nor
drawn; a change to one input rebuilds exactly the figures that read it; an entry that does not verify
(edited, planted, signed with another key) is built again and never published; each output keeps its
own entries; `clean` removes the render state, never a foreign file."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from report_builder.cache import Cache
from report_builder.figures.spec import FigureResult, FigureSpec
from report_builder.site import build as build_mod
from report_builder.site import figure_cache, site_state
from tests import site_helpers as h

pytestmark = pytest.mark.slow

IDS = [f.id for f in h.DUMMY_FIGURES]


def _render(root: Path, tables=None, figures=None, roles=None, date="2025-01-02T03:04:05+00:00", out="site", **kw):
    logs: list[str] = []
    Cache(root / "cache")  # a results cache (marked): the output's state lives in it
    report = build_mod.render_site(h._dummy_tables() if tables is None else tables, roles or h.DUMMY_ROLES,
                                   {**h.provenance(), "date": date}, out_dir=root / out, log=logs.append,
                                   figures=h.DUMMY_FIGURES if figures is None else figures,
                                   cache_dir=root / "cache", **kw)
    return report, logs


def _renders(root: Path, out="site") -> Path:
    return site_state.site_state(root / out, root / "cache").root / "figure-renders"


def _site(root: Path) -> dict[str, bytes]:
    site = root / "site"
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def test_unchanged_inputs_rebuild_nothing_and_each_input_rebuilds_its_readers(tmp_path):
    r1, _ = _render(tmp_path)
    assert r1.rebuilt == IDS and not r1.kept
    before = _site(tmp_path)

    # nothing changed but the date: no builder runs, nothing is drawn, mkdocs is skipped, same bytes
    r2, logs = _render(tmp_path, date="2025-06-01T00:00:00+00:00")
    assert r2.rebuilt == [] and r2.drawn == [] and r2.kept and r2.hashes == r1.hashes
    assert any(re.match(r"site: 0 figures rebuilt \(0 drawn, 0 drawings reused\), 3 unchanged", x) for x in logs), logs
    assert _site(tmp_path) == before

    # one table changed: only the figure that reads it is built again
    tables = h._dummy_tables()
    tables["k24_maps"] = tables["k24_maps"].assign(value=tables["k24_maps"]["value"] / 2)
    r3, _ = _render(tmp_path, tables)
    assert r3.rebuilt == ["k24-dummy-maps"] and r3.drawn == ["k24-dummy-maps"] and not r3.kept
    assert {k: v for k, v in r3.hashes.items() if k != "k24-dummy-maps"} == {
        k: v for k, v in r1.hashes.items() if k != "k24-dummy-maps"}
    assert r3.hashes["k24-dummy-maps"] != r1.hashes["k24-dummy-maps"]

    # a table's dtype alone (same values) is an input too
    tables["k21_tokens"] = tables["k21_tokens"].assign(layer=tables["k21_tokens"]["layer"].astype("int32"))
    r4, _ = _render(tmp_path, tables)
    assert r4.rebuilt == ["k21-dummy-fig", "k21-dummy-tab"]

    # a figure's declared version: that figure only is built (its drawing, the same bytes, is reused by
    # its content hash)
    figs = [dataclasses.replace(f, version=2) if f.id == "k21-dummy-tab" else f for f in h.DUMMY_FIGURES]
    r5, _ = _render(tmp_path, tables, figures=figs)
    assert r5.rebuilt == ["k21-dummy-tab"] and r5.drawn == [] and r5.hashes == r4.hashes

    # a table no figure reads (the Home page does): no figure built, the pages and site are
    tables["k24_ctx"] = tables["k24_ctx"].assign(change=tables["k24_ctx"]["change"] * 0.9)
    r6, _ = _render(tmp_path, tables, figures=figs)
    assert r6.rebuilt == [] and not r6.kept

    # what only the pages use (the site URL): mkdocs runs, no figure is built
    r7, _ = _render(tmp_path, tables, figures=figs, site_url="https://example.org/report/")
    assert r7.rebuilt == [] and not r7.kept

    # the roles every figure is built for: all of them
    r8, _ = _render(tmp_path, tables, figures=figs, roles=dataclasses.replace(h.DUMMY_ROLES, variants=("tiny-bert", "tiny-llama")))
    assert r8.rebuilt == IDS


def test_damaged_entry_is_built_again(tmp_path):
    _render(tmp_path)
    renders = _renders(tmp_path)
    (entry,) = renders.glob("fig-k21-dummy-fig-*")
    (entry / "files" / "data.csv").write_text("edited\n")
    r, _ = _render(tmp_path)
    assert r.rebuilt == ["k21-dummy-fig"]
    # drawn again? no: the drawing is reused by its content hash; the files are whole again
    assert "edited" not in (tmp_path / "site" / "figures" / "k21-dummy-fig" / "data.csv").read_text()
    r, _ = _render(tmp_path)
    assert r.rebuilt == []


def test_reads_are_recorded_missing_tables_and_walks_included(tmp_path):
    def looks(ctx):
        extra = ctx.tables.get("k21_freq")  # missing in the first build
        df = pd.DataFrame({"n": [len(ctx.tables["recon_errors"]) + (0 if extra is None else len(extra))]})
        return FigureResult(data=df, table=df)

    def walks(ctx):
        df = pd.DataFrame({"tables": sorted(ctx.tables)})
        return FigureResult(data=df, table=df)

    figs = [FigureSpec("k21-looks", "K21", "Looks", "Looks up a table.", ("recon_errors",), looks, kind="table"),
            FigureSpec("k21-walks", "K21", "Walks", "Walks over the tables.", (), walks, kind="table")]
    r, _ = _render(tmp_path, figures=figs)
    assert r.rebuilt == ["k21-looks", "k21-walks"]
    tables = h._dummy_tables()
    tables["k24_ctx"] = tables["k24_ctx"].assign(n_seqs=5)  # read by neither, walked over by one
    r, _ = _render(tmp_path, tables, figures=figs)
    assert r.rebuilt == ["k21-walks"]
    tables["k21_freq"] = pd.DataFrame({"model": ["tiny-bert"], "freq_rank": [1]})  # the missing one appears
    r, _ = _render(tmp_path, tables, figures=figs)
    assert r.rebuilt == ["k21-looks", "k21-walks"]
    meta = [json.loads((d / "meta.json").read_text()) for d in _renders(tmp_path).glob("fig-*")]
    reads = {m["id"]: m["reads"] for m in meta}
    assert {"k21_freq", "recon_errors"} <= set(reads["k21-looks"]) and "k24_ctx" not in reads["k21-looks"]
    assert reads["k21-walks"] == figure_cache.ALL


def test_clean_removes_the_render_state_and_build_record_only(tmp_path):
    from report_builder import api

    _render(tmp_path)
    state = site_state.site_state(tmp_path / "site", tmp_path / "cache")
    assert list(_renders(tmp_path).glob("fig-*")) and state.record.is_file() and state.manifest.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name not in ("site", "cache")]  # nothing beside the output
    (state.root.parent / "notes.txt").write_text("mine")  # a foreign file in the state folder stays
    cfg = api.configure(preset="smoke", cache_dir=str(tmp_path / "cache"), out_dir=str(tmp_path / "site"))
    msg = api.clean(cfg)
    assert "figure renders and build records of 1 output" in msg and "notes.txt" in msg, msg
    assert not state.root.exists() and (state.root.parent / "notes.txt").is_file()
    # the published figure versions and the history stay (`clean` removes them only when asked)
    site = tmp_path / "site"
    assert site.is_dir() and list(site.glob("figures/*/*/provenance.json"))
    assert not (site / "index.html").exists()
    api.clean(cfg, versions_older_than="all")
    assert not site.exists()


def test_entries_store_data_not_html_and_prove_their_origin(tmp_path, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CONFIG", str(tmp_path / "config"))  # a key of its own: it is replaced below
    r1, _ = _render(tmp_path)
    renders = _renders(tmp_path)
    (tab,) = renders.glob("fig-k21-dummy-tab-*")
    meta = json.loads((tab / "meta.json").read_text())
    assert "mac" in meta and not [k for k in meta["section"] if k.endswith("_html") or k == "spec_attr"]
    # what is shown again is formatted and escaped again: a hostile cell stays text
    rec = meta["section"]
    rec["tables"]["table"]["rows"][0][0] = "<img src=x onerror=alert(1)>"
    html = figure_cache.section_fields(rec, tmp_path / "site" / "figures" / "k21-dummy-tab")["table_html"]
    assert "<img" not in html and "&lt;img src=x onerror=alert" in html
    # an entry edited in place, or one signed with another cache's key, is built again
    (tab / "meta.json").write_text(json.dumps({**meta, "section": rec}))
    r2, _ = _render(tmp_path, site_url="https://example.org/")
    assert r2.rebuilt == ["k21-dummy-tab"] and "onerror" not in (tmp_path / "site" / "k21.html").read_text()
    state = site_state.site_state(tmp_path / "site", tmp_path / "cache")
    state.key_file.write_bytes(bytes(32))
    r3, _ = _render(tmp_path, site_url="https://example.org/x/")
    assert r3.rebuilt == IDS and r3.drawn == [i for i in IDS if i != "k21-dummy-missing"]


def test_a_shown_table_mixing_counts_and_floats_is_stored_so_a_no_op_rebuild_reuses_it():
    """k21-tab1's paper comparison keeps a count's int beside other rows' floats (an object column, "992"
    not "992.0"): the entry's stored rows must make the same HTML again, or the figure is never stored and
    every no-op rebuild builds it anew (the smoke build's rebuild did, once the column became object)."""
    from report_builder.site import htmltable

    df = pd.DataFrame({"Statistic": ["samples", "mean length"], "Paper": pd.Series([992, 22.5], dtype=object),
                       "Ours": [1.0, 2.25]})
    data = figure_cache._frame_data(df)
    assert htmltable.to_html(figure_cache._frame(data)) == htmltable.to_html(df)
