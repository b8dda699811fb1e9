"""What `reproduce` and `cite` say in their one line (docs/cite.md): what was compared, what was given."""
from __future__ import annotations

from report_builder.citations.reproduce import Reproduction


def test_identical_from_a_bare_recipe_says_only_the_recorded_hash_was_compared():
    bare = Reproduction(figure="k21-tab1", recorded="f521c1003afb", status="identical", folder_files=[])
    assert bare.line().startswith("reproduced k21-tab1 f521c1003afb: identical (")
    assert "only the recorded hash was compared" in bare.line()
    whole = Reproduction(figure="k21-tab1", recorded="f521c1003afb", status="identical",
                         folder_files=["chart.png", "chart.svg", "data.csv", "spec.json"])
    assert whole.line() == "reproduced k21-tab1 f521c1003afb: identical"


def test_a_recorded_model_name_holding_an_equals_sign_can_be_pointed_at():
    """`reproduce --model 'a=b=/path'` for a model named ``a=b`` (a name the configuration accepts) split
    at the first ``=`` and answered "the recipe has no model 'a'"."""
    from report_builder.citations.reproduce import _pairs

    assert _pairs(["a=b=/models/x"], "model", ["a=b", "c"]) == {"a=b": "/models/x"}
    assert _pairs(["c=/m=1"], "model", ["a=b", "c"]) == {"c": "/m=1"}
    assert _pairs(["tiny=/m"], "model") == {"tiny": "/m"}


def test_cite_of_a_link_to_a_site_says_it_is_a_link(tmp_path):
    """`cite --dir LINK` said "not a built site (no figures/versions.json)" of a link to a built site."""
    import os

    import pytest

    from report_builder.citations.citing import cite
    from report_builder.errors import UsageError
    from tests.citations import synthetic as syn

    info = syn.make_site(tmp_path)
    os.symlink(info["site"], tmp_path / "link")
    with pytest.raises(UsageError, match="a symbolic link.*give the site folder it points to"):
        cite(syn.FIG, site_dir=tmp_path / "link")
    assert cite(syn.FIG, site_dir=info["site"]).hash == info["new"]


def test_a_verdict_from_results_reused_from_the_cache_says_so():
    """Before: ``reproduce FOLDER --cache DIR`` reused every analysis result DIR held (checked only against the
    SHA-256 its own meta.json records) and said "identical" -- with a cache handed over beside a forged
    figure (tables and their recorded hashes edited together), the forgery verified, exit 0. The verdict now
    says how many results were reused, from where, and how to recompute them."""
    reused = Reproduction(figure="k21-fig3", recorded="76cdb687c471", status="identical", reused=2, computed=0,
                          cache="/given/cache", folder_files=["data.csv", "spec.json"])
    line = reused.line()
    assert line.startswith("reproduced k21-fig3 76cdb687c471: identical (")
    assert "2 of 2 analysis results reused from the cache /given/cache" in line and "not recomputed" in line, line
    assert "empty cache_dir" in line, line  # the Python API's keyword; the CLI's option under its vocabulary
    from report_builder import errors

    with errors.cli_vocabulary():
        assert "empty --cache recomputes" in reused.line(), reused.line()
    within = Reproduction(figure="k21-fig3", recorded="76cdb687c471", status="within", reused=1, computed=1,
                          cache="/c", reproduced="849cfb71cd74", reasons=["no recorded input differs"])
    assert "1 of 2 analysis results reused from the cache /c" in within.line(), within.line()
    fresh = Reproduction(figure="k21-fig3", recorded="76cdb687c471", status="identical", reused=0, computed=2,
                         cache="/c", folder_files=["data.csv", "spec.json"])
    assert fresh.line() == "reproduced k21-fig3 76cdb687c471: identical"


def test_reproduce_names_every_missing_input_at_once(tmp_path):
    """Before: `reproduce` stopped at the first model it could not load ("model 'enc' is not available here
    ...; pass --model enc=PATH"), so a figure of two local models took two failed runs to learn both. Every
    model and dataset is checked, and the one line names each missing one."""
    from report_builder.citations.reproduce import _check_inputs
    from report_builder.config import from_dict

    cfg = from_dict({"preset": "custom", "cache_dir": str(tmp_path / "c"),
                     "models": [{"name": "enc", "source": str(tmp_path / "gone-enc")},
                                {"name": "lm", "source": str(tmp_path / "gone-lm")}],
                     "datasets": [{"id": "wiki"}]})
    rec = {"models": {"enc": {"fingerprint": "a" * 16}, "lm": {"fingerprint": "b" * 16}},
           "datasets": {"wiki": {"hash": "c" * 16}}}
    out = Reproduction(figure="k24-models", recorded="0123456789ab", status="")
    assert _check_inputs(rec, cfg, out) is False
    assert out.status == "model"
    line = out.line()
    assert "model 'enc' is not available here" in line and "model 'lm' is not available here" in line, line
