"""A user's texts against the lengths a build can take: a text longer than a model's positions is refused by
`plan` and `build` alike, in one line naming the dataset, the text and the key to change (exit 3); a text cut
to ``max_length`` is said in one line of the log (a note: ``-q`` hides it), by `plan` and `build` alike. Through the command line
(in-process `cli.main`) on a tiny BERT with MiniLM's tokenizer (128 positions)."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from report_builder.cli import main
from report_builder.errors import EXIT_CODES

LONG = " ".join(["word"] * 300)  # 302 tokens with [CLS] and [SEP]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tests.test_pipeline import tiny_bert_dir

    return tiny_bert_dir(tmp_path_factory.mktemp("m") / "tiny", 0)


def _config(tmp_path: Path, model: Path, lines: list[str], max_length: int, figures: list[str]) -> Path:
    data = tmp_path / "mine.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = {"models": [{"name": "tb", "source": str(model), "role": "primary_encoder"}],
           "datasets": [{"id": "mine", "path": str(data), "k24_n": 1, "max_length": max_length}],
           "k24": {"top_k": 3, "examples": 1}, "figures": figures,
           "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")}
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return p


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    return code, err


def test_a_text_longer_than_the_positions_is_refused_by_plan_and_build_alike(capsys, tmp_path, tiny_dir):
    """Before: `plan` priced a text of 302 tokens for a model of 128 positions (exit 0), and `build` computed
    the first tasks, then stopped with "a sequence of 302 tokens is longer than tb's 128 positions" (exit 4, a
    model error, naming neither the dataset nor the text)."""
    cfg = _config(tmp_path, tiny_dir, ["a short text .", LONG], 512, ["k21-tab1"])
    expected = ("error: dataset 'mine': text 2 ('word word word word word word …') has 302 tokens with tb's "
                "tokenizer, more than tb's 128 positions; set datasets[0].max_length to at most 128 (it is 512)")
    lines = {}
    for command in ("plan", "build"):
        code, err = _run(capsys, command, "--config", str(cfg), *(["--no-progress"] if command == "build" else []))
        lines[command] = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert code == EXIT_CODES["config"] == 3, (command, err[-2000:])
    assert lines["plan"] == lines["build"] == [expected], lines


def test_a_text_cut_to_max_length_is_said_in_one_line_by_plan_and_build(capsys, caplog, tmp_path, tiny_dir):
    """Before: a text longer than the dataset's max_length was cut without a word, by `build` and `plan`; and
    a rebuild that reused every result (nothing encoded) did not say it while `plan` did: the note is now kept
    in the cache entry that found the cut and said again from there."""
    cfg = _config(tmp_path, tiny_dir, ["a short text .", LONG, "another short one ."], 32, ["k21-tab1"])
    said = {}
    for command in ("plan", "build", "rebuild"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="report_builder"):
            code, _ = _run(capsys, command.replace("rebuild", "build"), "--config", str(cfg),
                           *(["--no-progress"] if command != "plan" else []))
        assert code == 0
        said[command] = [r.getMessage() for r in caplog.records if "cut to" in r.getMessage()]
        if command == "rebuild":
            assert not [r for r in caplog.records if r.getMessage().lstrip().startswith("computed")], "all reused"
            assert [r for r in caplog.records if r.getMessage().lstrip().startswith("reused")]
    expected = ("dataset 'mine': 1 of 3 texts cut to max_length 32 tokens for tb (the longest: text 2, "
                "'word word word word word word …', 302 tokens); datasets[0].max_length can be up to tb's 128 positions")
    assert said["plan"] == said["build"] == said["rebuild"] == [expected], said


def test_a_cut_read_back_from_the_cache_is_said_only_when_well_formed(caplog):
    """The cache's meta.json is read back (untrusted): a malformed ``cut`` record is ignored, never an error."""
    from types import SimpleNamespace

    from report_builder.analyses import inputs

    cfg = SimpleNamespace(datasets=[SimpleNamespace(id="mine")])
    subject = SimpleNamespace(cfg=cfg, model=SimpleNamespace(name="tb"), dataset=SimpleNamespace(id="mine", max_length=32))
    good = {"cut": 1, "texts": 3, "max_length": 32, "positions": 128, "longest": 2, "longest_tokens": 302,
            "start": "word \x1b[2J"}
    bad = [None, "x", {**good, "cut": "1"}, {**good, "extra": 1}, {**good, "max_length": 64}, {**good, "start": 3}]
    results = [SimpleNamespace(task=SimpleNamespace(subject=subject), entry=SimpleNamespace(meta={"cut": c}))
               for c in bad + [good]]
    with caplog.at_level(logging.INFO, logger="report_builder"):
        assert len(list(inputs.say_cuts(results))) == len(results)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["dataset 'mine': 1 of 3 texts cut to max_length 32 tokens for tb (the longest: text 2, "
                    "'word \\x1b[2J', 302 tokens); datasets[0].max_length can be up to tb's 128 positions"], said
