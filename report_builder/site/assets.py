"""Static assets of the site: vendored Vega/Vega-Lite/Vega-Embed, the chart loader and the CSS.

The JavaScript bundle comes from ``vl_convert.javascript_bundle()`` (the same Vega versions that
render the static SVG/PNG), so nothing is fetched from npm or a CDN. Pitfall: the bundle declares
top-level ``const``s; it is wrapped in a function so it cannot clash with other classic scripts.
"""
from __future__ import annotations

import shutil
from functools import lru_cache
from pathlib import Path

import vl_convert as vlc

from report_builder.site.paths import TEMPLATES_DIR
from report_builder.atomic import read_inside, write_text
from report_builder.errors import UnsafeOutput
from report_builder.guard import user_cache_dir

ASSET_DIR = "assets/rb"  # relative to the docs/site root
BUNDLE_MAX = 32 << 20
"""The most bytes of a kept bundle read back (one is about 0.9 MB): a link to /dev/zero was read until
memory ran out, a FIFO waited on forever."""


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega + Vega-Lite + Vega-Embed as one classic script that sets ``window.vega*``.

    Bundling takes a few seconds, so the result is kept in the user cache (``vendor/``) keyed by versions;
    a kept file that is not a regular UTF-8 file of at most `BUNDLE_MAX` bytes is made again.
    """
    v = versions()
    vendor = user_cache_dir() / "vendor"
    cached = vendor / f"vega-bundle-{v['vega']}-{v['vega-lite']}-{v['vega-embed']}.js"
    try:
        return read_inside(vendor, cached, BUNDLE_MAX).decode("utf-8")
    except (OSError, UnsafeOutput, UnicodeDecodeError):  # missing, a link, device or FIFO, too large, damaged
        pass
    text = _make_bundle()
    try:
        write_text(cached, text)
    except OSError:
        pass
    return text


def _make_bundle() -> str:
    header = (
        f"/* Vega {vlc.get_vega_version()}, Vega-Lite {vlc.get_vegalite_versions()[-1]}, "
        f"Vega-Embed {vlc.get_vega_embed_version()} (BSD-3-Clause), bundled offline by vl-convert. */\n"
    )
    return header + "(function(){\n" + vlc.javascript_bundle() + "\n})();\n"


def versions() -> dict[str, str]:
    """Versions of the vendored libraries (shown on the Methods page)."""
    return {
        "vega": vlc.get_vega_version(),
        "vega-lite": vlc.get_vegalite_versions()[-1],
        "vega-embed": vlc.get_vega_embed_version(),
    }


def write_assets(docs_dir: Path) -> None:
    """Write every static asset into ``docs_dir/assets/rb``."""
    out = docs_dir / ASSET_DIR
    out.mkdir(parents=True, exist_ok=True)
    (out / "vega-bundle.js").write_text(vega_bundle(), encoding="utf-8")
    for src in sorted((TEMPLATES_DIR / "assets").iterdir()):
        if src.is_file():
            shutil.copy2(src, out / src.name)
