"""`report-builder build --preset smoke` end to end, offline, through the CLI: the real models,
the real site; a rerun computes nothing; every figure id has its anchor and files. (That the site renders from
this build's cache without torch, to the same figure hashes, is tests/test_wheel.py's render-only install.)"""
from __future__ import annotations

import json
import os
import re

import pytest

from tests import site_helpers as h
from report_builder.figures.registry import all_figures

pytestmark = pytest.mark.slow


# the `smoke` fixture (tests/conftest.py): the build from an empty cache, then the same command again


def _analysis_seconds(log: str) -> float:
    return float(re.search(r"analyses: \d+ computed, \d+ reused \(([\d.]+)s\)", log).group(1))


def test_smoke_build_then_rerun_computes_nothing(smoke):
    tmp, first, second, t1, t2 = smoke
    assert re.search(r"analyses: [1-9]\d* computed, 0 reused", first)
    assert re.search(r"analyses: 0 computed, [1-9]\d* reused", second)
    assert "computed " not in second.replace("0 computed", "")
    # side by side in this run: the cached analyses take a small fraction of the computed ones
    print(f"first build {t1:.0f}s, second {t2:.0f}s; analyses {_analysis_seconds(first):.1f}s -> "
          f"{_analysis_seconds(second):.1f}s")
    assert _analysis_seconds(second) < 0.5 * _analysis_seconds(first)
    # the build log states the K21 and K24 headline numbers per model
    for needle in ("K21 summary on wiki", "MiniLM-L6", "SmolLM2-135M", "through FF", "FF+RES+LN"):
        assert needle in first
    # the rerun states the same numbers (reused from the cache with the key of the tables they read)
    rows = lambda log: [ln for ln in log.splitlines() if "summary" in ln or "through FF" in ln  # noqa: E731
                        or re.match(r"^  \S+\s+-?\d+\.\d+\s+-?\d+\.\d+", ln)]
    assert rows(first) and rows(second) == rows(first)
    assert (tmp / "site" / "config.resolved.yaml").is_file()


def test_noop_rebuild_reuses_figures_and_skips_mkdocs(smoke):
    tmp, first, second, t1, t2 = smoke
    # measured side by side in this run (a ratio, printed; issue #16 asks for <= 5 s on 2 CPU cores)
    load = os.getloadavg()[0]
    print(f"no-op rebuild: first build {t1:.1f}s, rebuild {t2:.1f}s ({t2 / t1:.3f} x; load average {load:.2f})")
    n = len(re.findall(r"^site: \S+ (?:built|reused) \(", first, re.M))
    assert re.search(rf"^site: {n} figures rebuilt \({n} drawn, 0 drawings reused\), 0 unchanged", first, re.M), first[-3000:]
    # nothing changed: no figure built or drawn (files reused by their inputs), mkdocs not run
    assert re.search(rf"^site: 0 figures rebuilt \(0 drawn, 0 drawings reused\), {n} unchanged \(inputs unchanged",
                     second, re.M), second[-3000:]
    assert "mkdocs skipped" in second and "site: mkdocs build" not in second
    # measured 0.040 x on the 2-core machine (135.9 s -> 5.4 s, load average 3.75); 0.33 x before the
    # figure, eval-set and headline caches, 0.44 x before issue #16 point 5
    assert t2 < 0.15 * t1


def test_smoke_site_has_every_figure_with_files(smoke):
    tmp = smoke[0]
    site = tmp / "site"
    manifest = json.loads((site / "figures" / "manifest.json").read_text())
    figures = all_figures()
    assert {f.id for f in figures} == set(manifest["figures"])
    nc = {f.id for f in figures if not (site / "figures" / f.id / "spec.json").exists()}
    # everything the default models can produce is produced: only seed-group, extra-variant and
    # extra-dataset figures may be missing
    allowed = {f"k21-fig{k}" for k in range(6, 18)} | {"k21-tab7", "k21-tab11"}
    assert nc <= allowed, nc - allowed
    h.check_figure_sections(site, figures, nc, {k: v["hash"] for k, v in manifest["figures"].items()})
    # the Methods page carries this build's reconstruction errors, all within the bound
    methods = (site / "methods.html").read_text()
    errs = [float(x) for x in re.findall(r"(\d\.\d+e-\d+)", methods)]
    assert errs and max(errs) <= 1e-4


def test_noop_rebuild_imports_no_torch(smoke):
    """The no-op rebuild (the fixture's second build, `RECORD_IMPORTS`) imports none of torch, transformers
    and scipy, so it runs where they are not installed: everything is reused (the embedded models'
    fingerprints and causality come from memos, not from loading them). (Before, a third build ran with
    them unimportable; what it could import, this one would have recorded.)"""
    log = smoke[2]
    assert re.findall(r"^imported:.*$", log, re.M) == ["imported:"], log[-3000:]
    assert re.search(r"^analyses: 0 computed, [1-9]\d* reused", log, re.M), log[-3000:]
    assert "mkdocs skipped" in log, "\n".join(ln for ln in log.splitlines() if ln.startswith(("site:", "warning:")))


def test_provenance_counts_the_sequences_each_analysis_used(smoke):
    """K21 figures were computed from `n` sequences per dataset, K24 figures from `k24_n` (smoke preset)."""
    from report_builder.config import PRESETS

    conf = {d["id"]: d for d in PRESETS["smoke"]["datasets"]}
    site = smoke[0] / "site"
    for fig in all_figures():
        p = site / "figures" / fig.id / "provenance.json"
        if not p.is_file() or not any(a.startswith(("k21_tokens", "k21_freq", "k24_")) for a in fig.analysis):
            continue
        rec = json.loads(p.read_text())
        key = "k24_n" if fig.paper == "K24" else "n"
        for d, entry in rec["datasets"].items():
            assert entry["n"] == conf[d][key], (fig.id, d, entry["n"], conf[d][key])


def test_exported_svgs_stand_alone(smoke):
    """Every exported chart.svg: text >= 9 pt, no colliding text, distinct and visible legend colours,
    no raw byte-level BPE markers (tests/svg_check.py)."""
    from tests.svg_check import check_site

    report = check_site(smoke[0] / "site")
    assert report, "no chart.svg found"
    bad = {k: [str(d) for d in v] for k, v in report.items() if v}
    assert not bad, bad


def test_home_headline_equals_the_figure_reading(smoke):
    """The K24 cancellation numbers on the Home page are the ones the k24-ctx-cumulative reading states."""
    import html as html_mod

    site = smoke[0] / "site"
    home = re.sub(r"<[^>]+>", " ", (site / "index.html").read_text())
    k24 = html_mod.unescape(re.sub(r"<[^>]+>", " ", (site / "k24.html").read_text()))
    pairs = re.findall(r"(\d\.\d{3}) → (\d\.\d{3})\s+change through FF vs ATB → \w+, (\S+) on (\S+)", home)
    assert len(pairs) == 2, pairs
    for ff, whole, model, dataset in pairs:
        assert (f"{model} on {dataset}: FF alone changes the maps by {ff}" in k24
                and f"and the whole layer by {whole}" in k24), (model, ff, whole)


def test_the_site_counts_in_the_log_agree(smoke):
    """The figures rebuilt plus the unchanged ones are the figures on the site, in both builds (a no-op build
    logged "27 not built" then "27 figures built")."""
    _, first, second, _, _ = smoke
    for log in (first, second):
        m = re.search(r"^site: (\d+) figures rebuilt \((\d+) drawn, (\d+) drawings reused\), (\d+) unchanged", log, re.M)
        on = re.search(r"^site: (\d+) figures on the site, (\d+) not configured; (\d+) new or changed", log, re.M)
        rebuilt, drawn, reused, unchanged = map(int, m.groups())
        assert rebuilt + unchanged == int(on.group(1)) > 0 and drawn + reused == rebuilt
        assert not re.search(r"\bnot built\b|\bfigures built\b", log)
    assert re.search(r"^site: 0 figures rebuilt", second, re.M)
