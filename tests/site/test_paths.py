"""Where the site's sources are read from (`site.paths`): the checkout's top-level ``mkdocs.yml``,
``templates/`` and ``docs/``, so an edit reaches the next build; ``REPORT_BUILDER_RESOURCES`` for a
customised copy. (The installed wheel's packaged copy: tests/test_wheel.py.)"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from report_builder.site import paths

ROOT = Path(__file__).resolve().parents[2]
MARK = "TEMPLATE-EDIT-MARKER"


def test_the_checkout_reads_its_top_level_sources():
    assert paths.checkout_root() == ROOT
    if not os.environ.get(paths.ENV):
        assert paths.RESOURCES == ROOT and paths.TEMPLATES_DIR == ROOT / "templates"
        assert paths.MKDOCS_YML == ROOT / "mkdocs.yml" and paths.HANDWRITTEN_DOCS == ROOT / "docs"
    files = paths.source_files(ROOT)
    assert {"mkdocs.yml", "templates/figure.md.j2", "templates/overrides/main.html", "docs/methods.md"} <= set(files)
    assert not [f for f in files if f.startswith(("docs/img/", "docs/examples/", "docs/generated/"))]
    assert not list((ROOT / "report_builder").rglob("*.j2")), "one copy: the templates live at the top level only"


def _mini_checkout(dest: Path) -> Path:
    """The package and its site sources, laid out like the repository (no tests, images or examples)."""
    shutil.copytree(ROOT / "report_builder", dest / "report_builder", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(ROOT / "templates", dest / "templates")
    shutil.copytree(ROOT / "docs", dest / "docs", ignore=shutil.ignore_patterns("img", "examples", "generated"))
    return dest


def _render(checkout: Path, out: Path, **env) -> str:
    """Render the dummy site with the package of ``checkout`` in a fresh process started elsewhere;
    the K21 page's HTML."""
    code = ("import sys; from pathlib import Path; import report_builder\n"
            f"assert Path(report_builder.__file__).resolve().is_relative_to({str(checkout.resolve())!r})\n"
            "from tests import site_helpers as h\n"
            "h.render_dummy_site(Path(sys.argv[1]))\n")
    environ = {k: v for k, v in os.environ.items() if k != paths.ENV}
    environ.update(PYTHONPATH=os.pathsep.join([str(checkout), str(ROOT)]), **env)
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=environ,
                       cwd=out.parent, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return (out / "site" / "k21.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_top_level_template_edit_reaches_the_next_build(tmp_path):
    checkout = _mini_checkout(tmp_path / "checkout")
    out = tmp_path / "out"
    assert MARK not in _render(checkout, out)
    tmpl = checkout / "templates" / "figure.md.j2"
    tmpl.write_text(tmpl.read_text(encoding="utf-8") + f"\n{MARK}\n", encoding="utf-8")
    assert MARK in _render(checkout, out)  # the same output folder: the edit is not taken for a no-op

    # REPORT_BUILDER_RESOURCES: a customised copy of the sources wins over the checkout's
    custom = tmp_path / "custom"
    custom.mkdir()
    for name in ("mkdocs.yml", "templates", "docs"):
        (shutil.copytree if (checkout / name).is_dir() else shutil.copy2)(checkout / name, custom / name)
    (custom / "templates" / "figure.md.j2").write_text(tmpl.read_text(encoding="utf-8").replace(MARK, "CUSTOM-COPY"))
    html = _render(checkout, out, REPORT_BUILDER_RESOURCES=str(custom))
    assert "CUSTOM-COPY" in html and MARK not in html


def test_every_guide_page_is_in_the_nav_and_every_nav_entry_exists():
    """docs/guide/*.md are the site's standalone hand-written pages: each is listed in mkdocs.yml's nav."""
    import yaml

    from report_builder.site.paths import MKDOCS_YML, guide_pages

    def leaves(nav):
        for item in nav:
            for v in item.values():
                yield from (leaves(v) if isinstance(v, list) else [v])

    text = "\n".join(l for l in MKDOCS_YML.read_text(encoding="utf-8").splitlines() if "!!" not in l)
    nav = [p for p in leaves(yaml.safe_load(text)["nav"]) if p.startswith("guide/")]
    assert sorted(nav) == [f"guide/{n}" for n in guide_pages()]
