"""Local GLUE TSV and CoNLL-2003 loading, and the DataError messages."""

from __future__ import annotations

import pytest

from report_builder.data import load_eval_set
from report_builder.errors import DataError, MissingDependency


def test_sst2_from_tsv(tmp_path):
    f = tmp_path / "dev.tsv"
    f.write_text('sentence\tlabel\nit \'s a charming and "often" affecting journey . \t1\n'
                 "unflinchingly bleak and desperate \t0\n", encoding="utf-8")
    s = load_eval_set("sst2", path=str(f))
    assert [it.text_a for it in s.items] == [
        'it \'s a charming and "often" affecting journey .', "unflinchingly bleak and desperate"]
    assert all(it.text_b is None for it in s.items)
    # the task folder works too and gives the same set
    assert load_eval_set("sst2", path=str(tmp_path)).hash == s.hash
    assert load_eval_set("sst2", path=str(f), n=1).items == s.items[:1]


def test_mnli_pairs_from_tsv(tmp_path):
    header = "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence1\tsentence2\tgold_label"
    rows = ["0\t1\t1e\tgov\t( x )\tThe new rights are nice enough\tEveryone really likes the newest benefits\tneutral",
            "1\t2\t2e\tfic\t( y )\tHe said \"no.\tHe refused.\tentailment"]
    f = tmp_path / "dev_matched.tsv"
    f.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    s = load_eval_set("mnli", path=str(f))
    assert len(s) == 2
    assert s.items[0].text_a == "The new rights are nice enough"
    assert s.items[1].text_a == 'He said "no.'  # quotes are not CSV quoting in GLUE
    assert s.items[1].text_b == "He refused."


def test_conll_from_file(tmp_path):
    f = tmp_path / "valid.txt"
    f.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n"
                 ". . O O\n\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n", encoding="utf-8")
    s = load_eval_set("conll2003", path=str(f))
    assert [it.text_a for it in s.items] == ["EU rejects German .", "Peter Blackburn"]
    # a user's file is described as that file, never as the official set whose format it matches
    assert s.datasheet["domain"] == "user-supplied"
    assert s.datasheet["source"].startswith("user file valid.txt")
    assert load_eval_set("conll2003", path=str(tmp_path)).hash == s.hash


@pytest.mark.parametrize("set_id,expect", [("sst2", "sentence"), ("mnli", "sentence1"),
                                           ("conll2003", "one token per line")])
def test_missing_file_names_path_and_format(tmp_path, set_id, expect):
    missing = tmp_path / "nope" / "dev.tsv"
    with pytest.raises(DataError) as err:
        load_eval_set(set_id, path=str(missing))
    assert str(missing) in str(err.value)
    assert expect in str(err.value)
    assert isinstance(err.value, ValueError)


def test_empty_datasets(tmp_path):
    f = tmp_path / "dev.tsv"
    f.write_text("sentence\tlabel\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        load_eval_set("sst2", path=str(f))
    g = tmp_path / "valid.txt"
    g.write_text("-DOCSTART- -X- -X- O\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        load_eval_set("conll2003", path=str(g))


def test_missing_column(tmp_path):
    f = tmp_path / "dev.tsv"
    f.write_text("text\tlabel\nhello\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match="sentence"):
        load_eval_set("sst2", path=str(f))


def test_hub_without_datasets_is_actionable(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(MissingDependency) as err:
        load_eval_set("mnli")
    assert "datasets (the [hub] extra)" in str(err.value) and "pip install -e '.[hub]'" in str(err.value)
    assert "path=" in str(err.value)
