"""`site.assets`: the Vega bundle kept in the user cache is read back bounded, like every file read back."""

from __future__ import annotations

import os

import pytest

from report_builder.site import assets


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """The path the bundle is kept at, in a user cache of the test's own; bundling is a stub."""
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "uc"))
    monkeypatch.setattr(assets, "_make_bundle", lambda: "/* made */\n")
    assets.vega_bundle.cache_clear()
    v = assets.versions()
    path = tmp_path / "uc" / "vendor" / f"vega-bundle-{v['vega']}-{v['vega-lite']}-{v['vega-embed']}.js"
    path.parent.mkdir(parents=True)
    yield path
    assets.vega_bundle.cache_clear()


def test_a_kept_bundle_is_read_back(kept):
    kept.write_text("/* kept */\n", encoding="utf-8")
    assert assets.vega_bundle() == "/* kept */\n"


def test_a_kept_bundle_over_the_bound_is_made_again(kept):
    """Before: read whole, whatever its size (a link to /dev/zero: until memory ran out)."""
    with open(kept, "wb") as f:
        f.truncate(assets.BUNDLE_MAX + 1)  # sparse: no disk used
    assert assets.vega_bundle() == "/* made */\n"
    assert kept.read_text(encoding="utf-8") == "/* made */\n"  # and kept again, as a plain file


@pytest.mark.parametrize("kind", ["link", "fifo", "binary"])
def test_a_kept_bundle_that_is_not_a_plain_text_file_is_made_again(kept, tmp_path, kind):
    if kind == "link":
        (tmp_path / "elsewhere.js").write_text("/* not ours */\n")
        kept.symlink_to(tmp_path / "elsewhere.js")
    elif kind == "fifo":
        os.mkfifo(kept)  # before: waited on forever
    else:
        kept.write_bytes(b"\xff\xfe not UTF-8")
    assert assets.vega_bundle() == "/* made */\n"
    assert not kept.is_symlink() and kept.read_text(encoding="utf-8") == "/* made */\n"
