"""The build log's headline lines (`site.summary.summary_lines`, also `api.summary_lines`) are reused
from the results cache while the tables they read are unchanged, and computed again when one of them
changes (`summary_memo`)."""
from __future__ import annotations

import pytest

from report_builder import api
from report_builder.cache import frame_hash
from report_builder.site import summary
from tests import site_helpers as h


def test_summary_lines_are_memoised_on_the_tables_they_read(tmp_path, monkeypatch):
    tables, _roles, _figs = h.fixture_site_inputs()
    cfg = api.configure(preset="smoke", cache_dir=str(tmp_path / "cache"), out_dir=str(tmp_path / "site"))
    names = dict(zip(("tiny-bert", "tiny-llama"), (m.name for m in cfg.models)))  # the fixtures' models
    tables = {k: v.assign(model=v["model"].replace(names)) if "model" in v else v for k, v in tables.items()}
    (tmp_path / "cache").mkdir()
    hashes = {k: frame_hash(v) for k, v in tables.items()}
    first = summary.summary_memo(cfg, tables, hashes)
    assert first == summary.summary_lines(tables, cfg) and api.summary_lines is summary.summary_lines
    calls = []
    real = summary.summary_lines
    monkeypatch.setattr(summary, "summary_lines", lambda t, c: calls.append(1) or real(t, c))
    assert summary.summary_memo(cfg, tables, hashes) == first and calls == []
    # a table the lines do not read: still reused
    unread = next(n for n in tables if n not in ("k21_tokens", "k21_freq", "k21_expansion", "k24_ctx", "models"))
    changed = {**tables, unread: tables[unread].iloc[:1]}
    assert summary.summary_memo(cfg, changed, {**hashes, unread: frame_hash(changed[unread])}) == first and calls == []
    # a table they read: computed again, from the new table
    if "k21_expansion" not in tables:
        pytest.skip("no k21_expansion in the fixtures")
    exp = tables["k21_expansion"].assign(expansion_rate=tables["k21_expansion"]["expansion_rate"] * 2)
    changed = {**tables, "k21_expansion": exp}
    again = summary.summary_memo(cfg, changed, {**hashes, "k21_expansion": frame_hash(exp)})
    assert calls == [1] and again == real(changed, cfg) and again != first
    assert "nan" not in " ".join(first[:4])


def test_the_k24_line_names_each_models_own_blocks(tmp_path):
    """Every model's K24 line said "through FF+RES+LN": a pre-LN model's whole layer is LN+FF+RES, and a parallel
    (GPT-NeoX) model's is its FF branch alone (there is no LN after it)."""
    tables, _roles, _figs = h.fixture_site_inputs()
    cfg = api.configure(preset="smoke", cache_dir=str(tmp_path / "cache"), out_dir=str(tmp_path / "site"))
    names = dict(zip(("tiny-bert", "tiny-llama"), (m.name for m in cfg.models)))
    tables = {k: v.assign(model=v["model"].replace(names)) if "model" in v else v for k, v in tables.items()}
    lines = {ln.split()[0]: ln for ln in summary.summary_lines(tables, cfg) if "through FF" in ln}
    enc, causal = (m.name for m in cfg.models)
    assert "through FF+RES+LN (whole layer" in lines[enc]
    assert "through LN+FF+RES (whole layer" in lines[causal], lines[causal]
