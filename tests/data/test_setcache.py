"""Evaluation sets cached on disk (`data.setcache`): built once per source file and parameters, built
again when the file, a parameter or the entry changes; `clean` removes only the tool's entries."""
from __future__ import annotations

from report_builder.data import setcache, wiki
from report_builder.data.evalset import EvalSet, TextItem, make_set


def _builder(path, calls):
    def build() -> EvalSet:
        calls.append(path)
        lines = open(path, encoding="utf-8").read().split("\n")
        return make_set("lines", "Lines", [TextItem(f"l-{k}", t, None if k % 2 else "pair")
                                           for k, t in enumerate(lines) if t],
                        source="a file", licence="none", domain="test", built="one item per line")
    return build


def test_set_is_built_once_per_file_and_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "ucache"))
    src = tmp_path / "lines.txt"
    src.write_text("one\ntwo\nthree\n", encoding="utf-8")
    calls: list = []
    first = setcache.cached_set("lines", 1, {"n": 3}, [src], _builder(src, calls))
    again = setcache.cached_set("lines", 1, {"n": 3}, [src], _builder(src, calls))
    assert len(calls) == 1 and again.items == first.items and again.hash == first.hash
    assert again.datasheet == first.datasheet and again.name == first.name and again.items[1].text_b is None
    setcache.cached_set("lines", 1, {"n": 4}, [src], _builder(src, calls))  # another parameter
    setcache.cached_set("lines", 2, {"n": 3}, [src], _builder(src, calls))  # another loader version
    assert len(calls) == 3
    src.write_text("one\ntwo\nfour\n", encoding="utf-8")  # the file changed: its sha256 is in the key
    changed = setcache.cached_set("lines", 1, {"n": 3}, [src], _builder(src, calls))
    assert len(calls) == 4 and changed.items[2].text_a == "four"
    # an entry whose items no longer match its hash is built again
    (entry,) = [p for p in setcache.cache_dir().iterdir()
                if p.name == f"lines-{setcache.set_key('lines', 1, {'n': 3}, [src])}.json"]
    entry.write_text(entry.read_text().replace("four", "five"), encoding="utf-8")
    assert setcache.cached_set("lines", 1, {"n": 3}, [src], _builder(src, calls)).items[2].text_a == "four"
    assert len(calls) == 5
    # clean removes the entries, never a foreign file
    (setcache.cache_dir() / "notes.txt").write_text("mine")
    assert setcache.clean() == 4
    assert [p.name for p in setcache.cache_dir().iterdir()] == ["notes.txt"]


def test_wiki_set_comes_from_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "ucache"))
    wiki._build.cache_clear()
    built = wiki.build_wiki()
    assert [p.name.split("-")[0] for p in setcache.cache_dir().iterdir()] == ["wiki"]
    wiki._build.cache_clear()
    monkeypatch.setattr(wiki, "build_from_dump", lambda *a: (_ for _ in ()).throw(AssertionError("rebuilt")))
    cached = wiki.build_wiki()
    wiki._build.cache_clear()
    assert cached.items == built.items and cached.hash == built.hash and cached.datasheet == built.datasheet


def test_a_damaged_entry_or_frequency_table_is_built_again(tmp_path, monkeypatch):
    """A cached set or frequency table of the user cache nested too deeply, or a frequency table that is a
    JSON list, was an internal error (RecursionError, AttributeError) of the build using it; it is built again."""
    from report_builder.data import frequency as f

    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "ucache"))
    src = tmp_path / "lines.txt"
    src.write_text("one\ntwo\n", encoding="utf-8")
    calls: list = []
    first = setcache.cached_set("lines", 1, {"n": 2}, [src], _builder(src, calls))
    (entry,) = setcache.cache_dir().glob("lines-*.json")
    entry.write_text("[" * 100_000 + "]" * 100_000)
    again = setcache.cached_set("lines", 1, {"n": 2}, [src], _builder(src, calls))
    assert len(calls) == 2 and again.items == first.items
    monkeypatch.setattr(f, "vocab_hash", lambda t: "v")
    monkeypatch.setattr(f, "compute_frequency_ranks", lambda t, n: {1: 1})
    folder = tmp_path / "freq"
    assert f.frequency_ranks(None, cache_root=str(folder)) == {1: 1}
    (table,) = folder.glob("*.json")
    for text in ("[" * 100_000 + "]" * 100_000, "[1, 2]", '{"a": 1}'):
        table.write_text(text)
        assert f.frequency_ranks(None, cache_root=str(folder)) == {1: 1}
