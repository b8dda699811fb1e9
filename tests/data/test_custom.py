"""A user's own evaluation set: .txt, .jsonl, .csv/.tsv files and `datasets` hub datasets."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

from report_builder.config import from_dict
from report_builder.data import load_entry, load_eval_set
from report_builder.errors import DataError, MissingDependency
from report_builder.data.evalset import DATASHEET_KEYS, items_hash


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_txt_one_text_per_line(tmp_path):
    p = _write(tmp_path / "mine.txt", "First  text here.\n\n  Second text.\nThird <b>x</b>\n")
    s = load_eval_set("mine", path=p)
    assert [it.text_a for it in s] == ["First text here.", "Second text.", "Third <b>x</b>"]
    assert all(it.text_b is None for it in s)
    assert [it.id for it in s] == ["mine-00000", "mine-00001", "mine-00002"]
    assert set(DATASHEET_KEYS) <= set(s.datasheet)
    assert s.datasheet["size"] == 3
    assert "mine.txt" in s.datasheet["source"] and str(tmp_path) not in s.datasheet["source"]
    assert s.datasheet["licence"] == "unknown (user data)"
    assert s.hash == items_hash(s.items)
    assert load_eval_set("mine", path=p, n=2).items == s.items[:2]


def test_hash_follows_content_not_file_name(tmp_path):
    a = load_eval_set("x", path=_write(tmp_path / "a.txt", "one\ntwo\n"))
    b = load_eval_set("x", path=_write(tmp_path / "b.txt", "one\ntwo\n"))
    c = load_eval_set("x", path=_write(tmp_path / "c.txt", "one\nthree\n"))
    assert a.hash == b.hash != c.hash


def test_jsonl_single_and_pair(tmp_path):
    rows = [{"premise": "A man sleeps.", "hypothesis": "Nobody sleeps.", "label": 2},
            {"premise": "", "hypothesis": "skipped: empty premise"},
            {"premise": "Dogs bark.", "hypothesis": "Animals make noise."}]
    p = _write(tmp_path / "nli.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    single = load_eval_set("nli", path=p, column="premise")
    assert [it.text_a for it in single] == ["A man sleeps.", "Dogs bark."]
    pair = load_eval_set("nli", path=p, column="premise", pair_column="hypothesis", name="My NLI",
                         domain="NLI", licence="CC0")
    assert [(it.text_a, it.text_b) for it in pair] == [("A man sleeps.", "Nobody sleeps."),
                                                       ("Dogs bark.", "Animals make noise.")]
    assert pair.name == "My NLI" and pair.domain == "NLI" and pair.datasheet["licence"] == "CC0"
    assert "pair column 'hypothesis'" in pair.datasheet["source"]
    assert single.hash != pair.hash


@pytest.mark.parametrize("name, content, kwargs", [
    ("r.csv", "text,other\r\nHello there.,1\r\n", {"column": "text"}),       # Excel's "CSV UTF-8"
    ("r.tsv", "text\tother\nHello there.\t1\n", {"column": "text"}),
    ("r.jsonl", '{"text": "Hello there."}\n', {"column": "text"}),
    ("r.txt", "Hello there.\n", {}),
])
def test_a_byte_order_mark_is_not_part_of_the_data(tmp_path, name, content, kwargs):
    """A file saved with a UTF-8 byte order mark (Excel, Notepad) reads as the same file without one: the
    mark was glued to the first header field (`column: text` then missed a field shown as 'text'), to the
    first JSON line (not JSON) or to the first text."""
    plain = load_eval_set("mine", path=_write(tmp_path / name, content), **kwargs)
    (tmp_path / "bom").mkdir()
    marked = load_eval_set("mine", path=_write(tmp_path / "bom" / name, "\ufeff" + content), **kwargs)
    assert [it.text_a for it in marked] == [it.text_a for it in plain] == ["Hello there."]
    assert marked.hash == plain.hash


def test_csv_and_tsv_with_quotes(tmp_path):
    p = _write(tmp_path / "r.csv", 'id,text,other\n1,"Hello, world ""quoted""",x\n2,Plain one,y\n')
    s = load_eval_set("r", path=p, column="text")
    assert [it.text_a for it in s] == ['Hello, world "quoted"', "Plain one"]
    t = _write(tmp_path / "r.tsv", "a\tb\nleft one\tright one\n")
    s2 = load_eval_set("t", path=t, column="a", pair_column="b")
    assert (s2.items[0].text_a, s2.items[0].text_b) == ("left one", "right one")


@pytest.mark.parametrize("content, kwargs, message", [
    ("id,text\n1,a\n", {"column": "sentence"}, "no field(s) 'sentence'"),
    ("id,text\n1,a\n", {}, "needs `column:`"),
    ('{"text": "a"}\nnot json\n', {"column": "text"}, "line 2 is not JSON"),
])
def test_bad_files_name_the_problem(tmp_path, content, kwargs, message):
    suffix = ".jsonl" if "json" in content or "{" in content else ".csv"
    p = _write(tmp_path / f"bad{suffix}", content)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_eval_set("bad", path=p, **kwargs)


@pytest.mark.parametrize("name, content, line", [
    ("open.csv", 'text,label\nfirst row,1\n"second row, never closed,1\nthird row,0\nfourth row,1\n', 3),
    ("open.tsv", 'text\tlabel\nfirst\t1\n\n"two\nlines"\t2\nok\t"open\n\nmore\n', 6),  # after a closed multi-line one
    ("head.csv", '"text,label\nfirst,1\n', 1),
])
def test_an_unclosed_quote_names_its_line(tmp_path, name, content, line):
    """Before: csv read every line after an unclosed quote into one field, silently (one text, rows lost)."""
    p = _write(tmp_path / name, content)
    with pytest.raises(DataError, match=rf"^dataset 'mine': '{name}' line {line} opens a quote \(\"\) that is never "
                                        r"closed, so every later line would be read into one field; close the quote"):
        load_eval_set("mine", path=p, column="text")
    closed = _write(tmp_path / f"ok{name[-4:]}", content.replace('"', ""))  # the same rows without it: read as before
    assert len(load_eval_set("mine", path=closed, column="text")) >= 1


def test_other_input_errors(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="not found"):
        load_eval_set("mine", path=str(tmp_path / "missing.txt"))
    monkeypatch.chdir(tmp_path)  # a relative path: the message says where it was looked for
    with pytest.raises(DataError, match=rf"not found: 'notes.txt' \(a relative path is read from the current "
                                        rf"directory, {tmp_path}\); expected"):  # (not from the configuration file's folder)
        load_eval_set("mine", path="notes.txt")
    with pytest.raises(DataError, match="cannot read 'x.parquet'"):
        load_eval_set("mine", path=_write(tmp_path / "x.parquet", "x"))
    with pytest.raises(DataError, match="empty"):
        load_eval_set("mine", path=_write(tmp_path / "e.txt", "\n  \n"))
    with pytest.raises(DataError, match="column.*apply to .jsonl and .csv"):
        load_eval_set("mine", path=_write(tmp_path / "c.txt", "x\n"), column="text")
    with pytest.raises(DataError, match="unknown dataset id 'nope'.*`path:` or `hub:`"):
        load_eval_set("nope")
    with pytest.raises(DataError, match="built-in id"):
        load_eval_set("wiki", column="text")
    with pytest.raises(DataError, match="not UTF-8"):
        (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
        load_eval_set("mine", path=str(tmp_path / "latin.txt"))


class _FakeDataset(list):
    column_names = ["sentence", "label"]
    _fingerprint = "abc123"


def test_hub_dataset_through_datasets(monkeypatch):
    calls = []

    def load_dataset(repo, subset, split):
        calls.append((repo, subset, split))
        return _FakeDataset([{"sentence": "great film", "label": 1}, {"sentence": " ", "label": 0},
                             {"sentence": "dull", "label": 0}])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    s = load_eval_set("reviews", hub="nyu-mll/glue", subset="sst2", split="validation", column="sentence")
    assert calls == [("nyu-mll/glue", "sst2", "validation")]
    assert [it.text_a for it in s] == ["great film", "dull"]
    assert s.datasheet["source"].startswith("hub: nyu-mll/glue (sst2), split validation")
    with pytest.raises(DataError, match="needs `column:`"):
        load_eval_set("reviews", hub="nyu-mll/glue")
    with pytest.raises(DataError, match=r"no field\(s\) 'text'"):
        load_eval_set("reviews", hub="nyu-mll/glue", column="text")


def test_hub_unreachable_is_one_clear_line(monkeypatch):
    def load_dataset(*a, **k):
        raise ConnectionError("offline")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(DataError) as e:
        load_eval_set("reviews", hub="someone/reviews", column="text")
    msg = str(e.value)
    assert "\n" not in msg and "someone/reviews" in msg and "path:" in msg
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed
    with pytest.raises(MissingDependency, match=r"\[hub\] extra"):
        load_eval_set("reviews", hub="someone/reviews", column="text")


def test_config_entry_reaches_the_loader(tmp_path):
    p = _write(tmp_path / "mine.csv", "text,hyp\nA b c.,D e.\nF g.,H i.\nJ.,K.\n")
    cfg = from_dict({"models": [{"name": "m", "source": "minilm", "role": "primary_encoder"}],
                     "datasets": [{"id": "mine", "path": p, "column": "text", "pair_column": "hyp", "n": 2,
                                   "domain": "toy"}]})
    s = load_entry(cfg.datasets[0])
    assert len(s) == 2 and s.items[0].text_b == "D e." and s.domain == "toy"


def test_own_data_through_the_pipeline(tmp_path):
    """A user's .jsonl set is analysed, keyed by its hash and described in the datasets table."""
    from report_builder import api
    from test_pipeline import tiny_bert_dir

    model = tiny_bert_dir(tmp_path / "tiny", 0)
    p = _write(tmp_path / "pairs.jsonl", "\n".join(json.dumps({"q": f"Question {k}?", "a": f"Answer {k}."})
                                                    for k in range(3)))
    cfg = from_dict({"models": [{"name": "tiny", "source": str(model), "role": "primary_encoder"}],
                     "datasets": [{"id": "qa", "path": p, "column": "q", "pair_column": "a", "n": 2, "k24_n": 1,
                                   "max_length": 32, "name": "Q&A pairs", "licence": "CC0"}],
                     "k24": {"top_k": 3, "examples": 1},
                     "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")})
    rep = api.analyze(cfg, log=lambda *_: None, progress=False)
    row = rep.tables["datasets"].iloc[0]
    es = load_entry(cfg.datasets[0])
    assert (row["dataset"], row["name"], row["hash"], row["licence"]) == ("qa", "Q&A pairs", es.hash, "CC0")
    assert row["n_samples"] == 2 and "pairs.jsonl" in row["source"]
    assert set(rep.tables["k21_tokens"]["dataset"]) == {"qa"}
    assert rep.provenance["datasets"]["qa"]["hash"] == es.hash


@pytest.mark.parametrize("name, data, where", [
    ("latin.txt", b"fine\ncaf\xe9 au lait\n", "line 2 (byte 0xE9)"),
    ("latin.csv", b"text\r\nok\r\n\"na\xefve\"\r\n", "line 3 (byte 0xEF)"),
    ("utf16.jsonl", '{"text": "a"}\n'.encode("utf-16"), "line 1 (byte 0xFF)"),
])
def test_a_file_that_is_not_utf8_names_the_line_and_what_to_do(tmp_path, name, data, where):
    """Before: "'latin.txt' is not UTF-8 text", naming neither where nor what to do about it."""
    (tmp_path / name).write_bytes(data)
    with pytest.raises(DataError, match=rf"^dataset 'mine': '{name}' is not UTF-8 text: {re.escape(where)} is not "
                                        r"part of a UTF-8 character; save the file as UTF-8"):
        load_eval_set("mine", path=str(tmp_path / name), column=None if name.endswith(".txt") else "text")
