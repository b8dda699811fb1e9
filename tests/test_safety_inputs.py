"""Untrusted strings and bad inputs (issue #22): `site_url` parsed as a web address and escaped, CSV
cells inert in a spreadsheet, no code from a model folder, every bad input one line with its
documented exit code (never "internal error"), values in messages bounded, control characters
escaped on the terminal. Through the command line (in-process `cli.main`, or a subprocess where the
terminal itself matters); each payload with variants."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from report_builder.cli import main
from tests import site_helpers as h

ROOT = Path(__file__).resolve().parents[1]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: "), err[-2000:]
    assert "internal error" not in err and "Traceback" not in err, err[-2000:]
    return lines[-1]


# ------------------------------------------------------------------ site_url (#22.2)

HOSTILE_URLS = [
    'https://example.org/"><script>alert(1)</script>',
    "https://example.org/'onmouseover='alert(1)",
    "https://example.org/a b/",
    "https://example.org/\x1b[31m/",
    "https://example.org/a&quot;b",
    "https://example.org/?q=<b>",
    "https://example.org/#\"x",
    "https://user:pw@example.org/",
    "javascript:alert(1)//https://x",
    "https://exa mple.org/",
    "https:///report/",
    "https://example.org/%zz/",
    "https://example.org/é/",
    "https://example.org/a\\b/",
]


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_site_url_must_be_a_plain_web_address(capsys, url):
    """Before: any text after `http(s)://` went into every page's canonical link unescaped."""
    code, _, err = _run(capsys, "list", "models", "--preset", "smoke", "--set", f"site_url={json.dumps(url)}")
    line = _one_error_line(err)
    assert code == 3 and line.startswith("error: site_url: expected the published address"), line
    assert "\x1b" not in err and len(line) < 600


def test_site_url_is_normalised_and_checked_again_where_it_reaches_mkdocs(tmp_path):
    from report_builder.config import from_dict
    from report_builder.errors import ConfigError

    base = {"models": [{"name": "m", "source": "minilm", "role": "primary_encoder"}], "datasets": [{"id": "wiki"}]}
    for given, kept in [("https://Example.org/report", "https://example.org/report/"),
                        ("HTTP://127.0.0.1:8000", "http://127.0.0.1:8000/"),
                        ("https://[::1]:8080/a%20b/(x)", "https://[::1]:8080/a%20b/(x)/")]:
        assert from_dict({**base, "site_url": given}).site_url == kept
    with pytest.raises(ConfigError, match="site_url"):  # the Python API path (a Config made by hand)
        h.render_dummy_site(tmp_path, site_url=HOSTILE_URLS[0])
    assert not (tmp_path / "site").exists()


def test_canonical_link_is_escaped_by_the_theme_even_unchecked(tmp_path, monkeypatch):
    """The theme override's second wall: with the URL check bypassed, a quote in site_url still cannot
    leave the canonical link's href (material's base.html writes it unescaped)."""
    from html.parser import HTMLParser

    from report_builder.site import build as build_mod

    payload = 'https://example.org/r/"><script>alert(1)</script><a x="/'
    monkeypatch.setattr(build_mod, "check_site_url", lambda u: u)
    h.render_dummy_site(tmp_path, site_url=payload)

    class Links(HTMLParser):
        def __init__(self):
            super().__init__()
            self.canonical, self.scripts = [], []
            self._in_script = False

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "link" and a.get("rel") == "canonical":
                self.canonical.append(a.get("href"))
            self._in_script = tag == "script"

        def handle_data(self, data):
            if self._in_script:
                self.scripts.append(data)

    p = Links()
    p.feed((tmp_path / "site" / "index.html").read_text(encoding="utf-8"))
    assert p.canonical == [payload + "index.html"]  # one link, the whole value inside its href
    assert not any("alert(1)" in s for s in p.scripts)


# ------------------------------------------------------------------ CSV formula injection (#22.7)


def test_csv_cells_that_would_start_a_formula_are_neutralised(tmp_path):
    """Before: `=`, `+`, `@` and `-` text went into data.csv / paper_vs_ours.csv as they were. The
    site's one CSV writer: text that a spreadsheet would read as a formula gets a leading `'`
    (reversibly), numbers stay numbers, a lone CR cannot open a new row."""
    from report_builder.citations.version_files import csv_text, unspreadsheet_cell

    tokens = ["=HYPERLINK(\"http://x\",\"y\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)", "\tx", "\r=x",
              "'=x", "-", "plain", "-0.5", "1e5", "a\r=b", None]
    df = pd.DataFrame({"token": tokens, "value": [-0.5] * len(tokens), "=col": range(len(tokens))})
    text = csv_text(df)
    back = pd.read_csv(pd.io.common.StringIO(text), keep_default_na=False)
    assert list(back.columns) == ["token", "value", "'=col"]
    assert len(back) == len(tokens)  # no row split by a CR
    cells = back["token"].tolist()
    for cell in cells:
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
        assert not cell.startswith("-") or cell == "-0.5", cell
    assert cells[:4] == ["'" + t for t in tokens[:4]] and cells[7:11] == ["'-", "plain", "-0.5", "1e5"]
    assert "a\n=b" in cells and (back["value"] == -0.5).all()  # numbers stay numbers
    assert [unspreadsheet_cell(c) for c in cells[:4]] == tokens[:4] and unspreadsheet_cell("''=x") == "'=x"
    plain = pd.DataFrame({"a": ["x", "y"], "b": [1.5, -2.0]})
    assert csv_text(plain) == plain.to_csv(index=False)  # a table without such cells: the same bytes


def test_data_csv_and_paper_vs_ours_csv_of_a_site_are_neutralised(tmp_path, monkeypatch):
    """Both CSV files a figure folder gets go through the one writer (a dummy site's figure whose
    data and paper comparison hold formula-like text)."""
    from report_builder.figures.compare import Comparison
    from report_builder.figures.spec import FigureResult, FigureSpec
    from report_builder.site import build as build_mod

    evil = ["=1+1", "@cmd", "+x", "-y"]

    def builder(ctx):
        return FigureResult(data=pd.DataFrame({"model": evil, "ours": [1.0, -2.0, 3.0, -4.5]}))

    calls = []

    def comparison(fig_id, data, tables, roles, reported, units=None):
        calls.append(fig_id)
        return Comparison(pd.DataFrame({"stat": evil, "paper": [1, 2, 3, 4], "ours": [-1.5] * 4}), False, "context")

    fig = FigureSpec("k21-evil", "K21", "Evil", "Formula-like cells.", (), builder)
    monkeypatch.setattr(build_mod.compare, "comparison", comparison)
    build_mod.render_site({}, h.DUMMY_ROLES, h.provenance(), out_dir=tmp_path / "site",
                          docs_dir=tmp_path / "gen", log=lambda *_: None, figures=[fig])
    assert calls == ["k21-evil"]
    for name, col in (("data.csv", "model"), ("paper_vs_ours.csv", "stat")):
        got = pd.read_csv(tmp_path / "site" / "figures" / "k21-evil" / name)
        assert got[col].tolist() == ["'=1+1", "'@cmd", "'+x", "'-y"], name
        assert pd.api.types.is_float_dtype(got.iloc[:, -1]), name  # numbers stay numbers


# ------------------------------------------------------------------ bad values: one line, documented code (#22.8)

BAD_SETS = [
    ("max_memory=1e400", "max_memory: '1e400' is larger than any machine's memory"),
    ("max_memory=99999999999999999999999999TiB", "larger than any machine's memory"),
    ("device_memory=1e400", "device_memory:"),
    ("max_memory=.nan", "max_memory"),
    ("preset=[1]", "preset: expected a preset name"),
    ("preset={a: b}", "preset: expected a preset name"),
    ("models.0={}", "models[0]: missing key(s) name, source"),
    ("threads=100000000000000000000000", "threads: expected an integer >= 1 and <= 2147483647"),
    ("datasets.0.max_length=100000000000000000000000", "datasets[0].max_length"),
    ("k21.seed=4294967296", "k21.seed: expected an integer >= 0 and <= 4294967295"),
    ("device=cuda:99999999999999", "device:"),
    ("models.0.name=\"a\\x1b[31mb\"", "models[0].name: 'a\\x1b[31mb' holds U+001B"),
    ("datasets.0.id=\"w\\x07iki\"", "datasets[0].id"),
    ("k21.example=[\"a\\ufffeb\", \"c\"]", "k21.example[0]"),
    ("models.²=1", "--set models.²: models.² needs an index 0..1"),
    ("datasets[99999999999999999999].n=1", "needs an index 0..1"),
]


@pytest.mark.parametrize("item, expected", BAD_SETS)
def test_bad_set_values_are_one_line_with_their_exit_code(capsys, item, expected):
    """Before: `max_memory=1e400`, `preset=[1]`, huge integers and the like were "internal error"
    (exit 1) or a TypeError text."""
    code, _, err = _run(capsys, "list", "models", "--preset", "smoke", "--set", item)
    line = _one_error_line(err)
    assert code == 3 and expected in line, line
    assert "\x1b" not in err and "\x07" not in err


def test_values_in_messages_are_bounded(capsys, tmp_path):
    """Before: an error quoted the whole value (a YAML alias bomb: a 351 MB line). A value of millions
    of elements by reference (`--set` with anchors) or of 100,000 characters: a line of a few hundred
    characters, built without forming the whole text."""
    levels = ["&a [x, x, x, x, x, x, x, x]"] + [f"&{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 8) + "]"
                                                 for i in range(6)]  # 8^7 = 2 million strings by reference
    bomb = "[" + ", ".join(levels) + "]"
    for item in (f"models.0.name={bomb}", f"site_url={bomb}", "models.0.name=" + "[" * 5000 + "]" * 5000,
                 "site_url=https://x.org/" + "a" * 100_000 + "'"):
        t0 = time.perf_counter()
        code, _, err = _run(capsys, "list", "models", "--preset", "smoke", "--set", item)
        line = _one_error_line(err)
        assert code == 3 and len(line) < 800, (item[:40], len(line))
    from report_builder.errors import clip, shown

    assert len(shown("x" * 10**6)) < 300 and len(shown(list(range(10**6)))) < 300 and len(shown(10**5000)) < 60
    text = clip("start " + "y" * 10_000 + " end")
    assert text.startswith("start ") and text.endswith(" end") and len(text) <= 2000


def _custom_data_config(tmp_path: Path, name: str, content: str, **extra) -> Path:
    data = tmp_path / name
    data.write_text(content, encoding="utf-8")
    cfg = {"models": [{"name": "m", "source": "minilm", "role": "primary_encoder"}],
           "datasets": [{"id": "mine", "path": str(data), "n": 2, "k24_n": 1, "max_length": 16, **extra}],
           "cache_dir": str(tmp_path / "cache"), "out_dir": str(tmp_path / "site")}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return p


@pytest.mark.parametrize("name, content, expected", [
    ("deep.jsonl", '{"text": "a b", "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "line 1 cannot be read (nested too deeply)"),
    ("deep2.jsonl", '{"text": "ok"}\n{"text": "a", "x": ' + '{"y": ' * 50_000 + "1" + "}" * 50_000 + "}\n", "line 2 cannot be read"),
    ("digits.jsonl", '{"text": "a b", "n": 1' + "0" * 5000 + "}\n", "line 1 cannot be read"),
    ("long.csv", 'text\n"' + "a" * 131_073 + '"\nfine text\n', "row 1 after the header cannot be read as CSV"),
    ("long.tsv", "text\tother\nfine\tx\n" + "b" * 200_000 + "\ty\n", "row 2 after the header cannot be read as TSV"),
])
def test_bad_user_data_is_one_line(capsys, tmp_path, name, content, expected):
    """Before: deeply nested JSONL (RecursionError), an integer of 5000 digits, a CSV field over
    131,072 characters (csv.Error) were "internal error", exit 1."""
    cfg = _custom_data_config(tmp_path, name, content, column="text")
    code, _, err = _run(capsys, "plan", "--config", str(cfg))
    line = _one_error_line(err)
    assert code == 3 and f"dataset 'mine': '{name}' {expected}" in line, line


def test_a_built_in_dataset_given_the_wrong_file_is_one_line(capsys, tmp_path):
    """Found by probing: `wiki` reads a MediaWiki .xml.bz2 dump; a text file there (bz2's "Invalid data
    stream", an OSError), a truncated dump (EOFError) or a file that cannot be read was "internal
    error", exit 1."""
    import bz2

    (tmp_path / "text.xml.bz2").write_text("not bz2 at all\n")
    (tmp_path / "cut.xml.bz2").write_bytes(bz2.compress(b"<mediawiki>" + b"x" * 5000)[:40])
    for name in ("text.xml.bz2", "cut.xml.bz2"):
        cfg = {"models": [{"name": "m", "source": "minilm", "role": "primary_encoder"}],
               "datasets": [{"id": "wiki", "path": str(tmp_path / name), "n": 2}], "cache_dir": str(tmp_path / "c")}
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(cfg))
        for cmd in (["plan"], ["analyze", "--no-progress"]):  # `plan` estimates only a set that is not
            code, _, err = _run(capsys, *cmd, "--config", str(p))                # here, never a bad file
            line = _one_error_line(err)
            assert code == 3 and f"dataset 'wiki': cannot read '{tmp_path / name}'" in line, (cmd, line)


@pytest.mark.parametrize("source", ["x" * 300, "/tmp/" + "y" * 300, "a/" + "z" * 300])
def test_a_model_source_too_long_for_the_filesystem_is_one_line(capsys, tmp_path, source):
    """Found by probing: a source longer than a file name may be (ENAMETOOLONG from pathlib) was
    "internal error"; now it is what it is: no such folder, not a cached hub id (exit 4)."""
    code, _, err = _run(capsys, "plan", "--model", source, "--preset", "smoke", "--cache", str(tmp_path / "c"))
    line = _one_error_line(err)
    assert code == 4 and len(line) < 1200, line


# ------------------------------------------------------------------ path inputs

LONG = "n" * 300  # a folder name longer than any filesystem's NAME_MAX (255)


def _path_cases(tmp_path: Path) -> list[tuple[list[str], int, tuple[str, ...]]]:
    """(argv, exit code, words of the one error line): each path input of the configuration and the
    commands, with a name too long for the filesystem, a path through a regular file, a NUL byte."""
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    long, through = str(tmp_path / LONG), str(f / "x")
    smoke = ["--preset", "smoke"]
    cases = []
    for bad, words in ((long, "is 300 bytes; this filesystem allows"), (through, "which is a file, not a folder")):
        cases += [
            (["plan", *smoke, "--cache", bad], 3, ("cache_dir: ", words)),
            (["build", *smoke, "--cache", bad, "--out", str(tmp_path / "o")], 3, ("cache_dir: ", words)),
            (["build", *smoke, "--cache", str(tmp_path / "c"), "--out", bad], 3, ("out_dir: ", words)),
            (["render", "--cache", str(tmp_path / "c"), "--out", bad], 3, ("out_dir: ", words)),
            (["clean", "--cache", bad, "--out", str(tmp_path / "o")], 3, ("cache_dir: ", words)),
            (["clean", "--cache", str(tmp_path / "c"), "--out", bad], 3, ("out_dir: ", words)),
            (["plan", *smoke, "--data-dir", bad], 3, ("data_dir: ", words)),
            (["plan", *smoke, "--set", f"datasets.0.path={bad}"], 3, ("datasets[0].path: ", words)),
            (["plan", "--config", bad], 3, ("--config: ", words)),
            (["serve", "--port", "0", "--dir", bad], 3, ("serve --dir: ", words)),
            (["reproduce", bad], 2, ("reproduce PATH: ", words)),
            (["diff", bad, bad], 2, ("diff: ", words)),
        ]
    nul = str(tmp_path / "a\\0b")  # a YAML escape: --set reads the value as YAML
    for key in ("cache_dir", "out_dir", "data_dir", "datasets.0.path"):
        shown = key.replace(".0.", "[0].")
        cases.append((["plan", *smoke, "--set", f'{key}="{nul}"'], 3, (f"{shown}: ", "U+0000")))
    cases.append((["clean", "--set", f'out_dir="{nul}"'], 3, ("out_dir: ", "U+0000")))
    cases.append((["build", *smoke, "--cache", str(tmp_path / "c"), "--out", str(tmp_path / ("o" * 230))], 3,
                  ("out_dir: ", "less 40 for the tool's temporary")))
    return cases


def test_path_inputs_are_one_line_with_their_exit_code(capsys, tmp_path):
    """Found by probing: a ``cache_dir``/``--out`` name too long for the filesystem was "internal error",
    exit 1 (ENAMETOOLONG), as were ``--config``, ``serve --dir``, ``reproduce`` and ``diff`` given one; a NUL
    byte in ``out_dir``/``cache_dir``/``data_dir`` (``--set 'cache_dir="a\\0b"'``) was "embedded null byte",
    exit 1 (or no error at all from ``plan``); ``plan --cache notes.txt/x`` exited 0. Now each is one line
    naming the key, exit 3 (the configuration) or 2 (a command's argument), before any work."""
    for argv, code, words in _path_cases(tmp_path):
        got, out, err = _run(capsys, *argv)
        line = _one_error_line(err)
        assert got == code and all(w in line for w in words), (argv, got, line)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing was created


@pytest.mark.parametrize("var, value, folder", [("REPORT_BUILDER_CACHE", "notes.txt", "notes.txt/results"),
                                                ("XDG_CACHE_HOME", "notes.txt", "notes.txt/report_builder/results")])
def test_a_bad_user_cache_variable_is_named(capsys, tmp_path, monkeypatch, var, value, folder):
    """Before: `REPORT_BUILDER_CACHE=/dev/null report-builder build` blamed `cache_dir:`, a key the user never
    set; the default results cache lies under the variable, and the message names it."""
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.delenv("REPORT_BUILDER_CACHE", raising=False)
    monkeypatch.setenv(var, str(tmp_path / value))
    for argv in (["build", "--preset", "smoke", "--out", str(tmp_path / "o")], ["plan", "--preset", "smoke"],
                 ["plan", "--preset", "smoke", "--cache", str(tmp_path / "c")]):  # (models and sets live under it too)
        code, _, err = _run(capsys, *argv)
        line = _one_error_line(err)
        assert code == 3 and line.startswith(f"error: {var} (the environment variable that places the default "
                                             f"results cache): '{tmp_path / folder}' goes through"), line


def test_an_unwritable_default_cache_names_the_variable(tmp_path, monkeypatch):
    """The cache's own checks (`guard.mark_cache`, `housekeeping.preflight`) name the variable too."""
    from report_builder import guard
    from report_builder.errors import UnsafeOutput

    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "notes.txt" / "x"))  # not a folder: cannot be made
    with pytest.raises(UnsafeOutput, match=r"with cache_dir \(or REPORT_BUILDER_CACHE, which places the default one\) "):
        guard.mark_cache(tmp_path / "notes.txt" / "x" / "results")
    with pytest.raises(UnsafeOutput, match=r"with cache_dir or fix"):  # a cache the user gave (API: its keyword)
        guard.mark_cache(tmp_path / "notes.txt" / "mine")


# ------------------------------------------------------------------ a model folder's own code never runs (#22.4)


def _custom_code_model(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """A tiny BERT folder that asks for its own code (config or tokenizer `auto_map`, known or unknown
    model_type) or declares int8 weights; its code files write ``ran`` when imported."""
    from tests.test_pipeline import tiny_bert_dir

    d = tiny_bert_dir(tmp_path / f"model-{kind}", 0)
    marker = tmp_path / f"ran-{kind}"
    code = f"open({str(marker)!r}, 'w').write('ran')\nfrom transformers import BertConfig as EvilConfig, BertModel as EvilModel\n"
    for f in ("configuration_evil.py", "modeling_evil.py", "tokenization_evil.py"):
        (d / f).write_text(code.replace("BertModel as EvilModel", "BertModel as EvilModel, BertTokenizer as EvilTok"))
    cfg = json.loads((d / "config.json").read_text())
    if kind in ("auto_map", "custom_type"):
        cfg["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}
        if kind == "custom_type":
            cfg["model_type"] = "evil-custom"
    elif kind in ("int8", "uint8"):
        cfg["torch_dtype"] = kind
    elif kind == "bitsandbytes":  # float torch_dtype, quantised weights: was 'the weight file may be damaged'
        cfg["quantization_config"] = {"quant_method": kind, "load_in_8bit": True}
    (d / "config.json").write_text(json.dumps(cfg))
    if kind == "tokenizer":
        t = json.loads((d / "tokenizer_config.json").read_text())
        t["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTok", None]}
        (d / "tokenizer_config.json").write_text(json.dumps(t))
    return d, marker


@pytest.mark.parametrize("kind, expected, code", [
    ("auto_map", "needs its own Python code to load (`auto_map` in its config.json", 4),
    ("custom_type", "needs its own Python code to load (`auto_map` in its config.json", 4),
    ("tokenizer", "needs its own Python code to load (`auto_map` in its tokenizer_config.json", 4),
    ("int8", "declares torch_dtype 'int8', not a floating-point type", 4),
    ("uint8", "declares torch_dtype 'uint8'", 4),
    ("bitsandbytes", "declares quantised weights (quantization_config, quant_method 'bitsandbytes')", 4),
])
def test_model_folder_code_is_refused_without_a_terminal(capsys, tmp_path, kind, expected, code):
    """Before: a known model_type with `auto_map` loaded silently, an unknown one was "internal error"
    (exit 1) without a terminal, `torch_dtype: int8` "internal error" too; now one line, exit 4,
    before anything is loaded, and the folder's code never ran."""
    d, marker = _custom_code_model(tmp_path, kind)
    got, _, err = _run(capsys, "plan", "--model", str(d), "--preset", "smoke", "--cache", str(tmp_path / "c"))
    line = _one_error_line(err)
    assert got == code and expected in line, line
    assert not marker.exists()


def test_model_folder_code_is_refused_on_a_terminal_too(tmp_path):
    """On a terminal transformers asked "Do you wish to run the custom code? [y/N]" and ran it on `y`:
    the answer is typed in advance; nothing asks, nothing runs, one line, exit 4."""
    import pty
    import select

    d, marker = _custom_code_model(tmp_path, "custom_type")
    master, slave = pty.openpty()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "report_builder", "plan", "--model", str(d), "--preset", "smoke",
                             "--cache", str(tmp_path / "c")], stdin=slave, stdout=slave, stderr=slave, env=env,
                            cwd=tmp_path)
    os.close(slave)
    os.write(master, b"y\ny\ny\n")
    out = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    os.close(master)
    text = out.decode("utf-8", "replace")
    assert "Do you wish to run the custom code" not in text, text[-2000:]
    assert proc.returncode == 4 and "needs its own Python code to load" in text, text[-2000:]
    assert not marker.exists()


def test_every_transformers_load_passes_trust_remote_code_false():
    """Source check of the rule: each ``from_pretrained``/``from_config`` call of the package passes
    ``trust_remote_code=False`` (directly or through `sources.NO_REMOTE_CODE` in ``**kw``)."""
    import re

    offenders = []
    for p in (ROOT / "report_builder").rglob("*.py"):
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\.(from_pretrained|from_config)\(", line) and not line.lstrip().startswith(("#", '"', "`")):
                if "trust_remote_code=False" not in line and "**kw" not in line and "**{**kw" not in line:
                    offenders.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
    from report_builder.models import sources

    assert sources.NO_REMOTE_CODE == {"trust_remote_code": False}
    assert sources.resolve("minilm")[1]["trust_remote_code"] is False


# ------------------------------------------------------------------ the terminal (#22.8)

ESC_NAME = "m\x1b]0;pwned\x07\u202e\x9b31m"
"""A folder name with an OSC title sequence, BEL, a right-to-left override and an 8-bit CSI."""


def test_control_characters_are_escaped_on_the_terminal(capsys, tmp_path, monkeypatch):
    """`list models`, `plan`, the build summary and error lines print names from the configuration,
    folders and data: control characters appear as visible escapes, never raw (before: raw)."""
    from report_builder import api
    from report_builder.errors import for_terminal
    from tests.test_pipeline import tiny_bert_dir

    model = tiny_bert_dir(tmp_path / ESC_NAME, 0)  # a folder name: the model's name comes from it
    escaped = for_terminal(ESC_NAME)
    assert escaped == "m\\x1b]0;pwned\\x07\\u202e\\x9b31m"
    # the folder's name is refused as a model name (it cannot be shown on a chart), in one escaped line
    code, out, err = _run(capsys, "plan", "--model", str(model), "--preset", "smoke", "--cache", str(tmp_path / "c"))
    assert code == 3 and escaped in _one_error_line(err)
    # a bidirectional override is shown text (allowed in names), escaped on the terminal
    model = tiny_bert_dir(tmp_path / "plain", 0)
    name = "rtl\u202eevil\u2066x"
    cfg = {"models": [{"name": name, "source": str(model), "role": "primary_encoder"}],
           "datasets": [{"id": "wiki", "n": 2, "k24_n": 1, "max_length": 16}], "cache_dir": str(tmp_path / "cache")}
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    for argv in (["list", "models"], ["plan"]):
        code, out, err = _run(capsys, *argv, "--config", str(p))
        assert code == 0 and "rtl\\u202eevil\\u2066x" in out and "\u202e" not in out + err, argv
    # the build summary goes through the same function (api.build prints through `out`)
    monkeypatch.setattr(api, "build", lambda cfg, **kw: kw["out"](f"  {ESC_NAME} 1.00"))
    code, out, err = _run(capsys, "build", "--config", str(p))
    assert code == 0 and out.strip() == f"{escaped} 1.00" and "\x1b" not in out
    # an error line quoting a path with control characters
    code, out, err = _run(capsys, "plan", "--preset", "smoke", "--cache", str(tmp_path / "c"), "--model",
                          str(tmp_path / "no\x1b[2Jsuch"))
    assert code == 4 and "no\\x1b[2Jsuch" in _one_error_line(err) and "\x1b" not in err


def test_a_file_name_that_is_not_utf8_prints_as_its_byte(tmp_path):
    """`clean` names what it leaves; a file of the cache named with a byte that is not UTF-8 (``mine\\xff.txt``)
    reached stdout as a lone surrogate: on a terminal whose stdout is strict UTF-8 (``en_US.UTF-8``) an
    internal error (UnicodeEncodeError) after the clean. `for_terminal` shows the byte, ``\\xff``."""
    from report_builder import guard
    from report_builder.errors import for_terminal

    assert for_terminal("mine\udcff.txt \ud800") == "mine\\xff.txt \\ud800"
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / guard.CACHE_MARKER).write_text("")
    open(os.path.join(os.fsencode(cache), b"mine\xff.txt"), "w").close()
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, "-m", "report_builder", "clean", "--cache", str(cache), "--out",
                        str(tmp_path / "site")], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "mine\\xff.txt" in r.stdout and "internal error" not in r.stderr, r.stderr
    assert os.listdir(os.fsencode(cache)).count(b"mine\xff.txt") == 1  # named, never removed


@pytest.mark.parametrize("config_text, shown", [
    ("[" * 100_000 + "]" * 100_000, "RecursionError"),  # nested too deeply for the JSON reader
    ('{"model_type": "bert", "hidden_size": 1e400, "num_hidden_layers": 2}', "hidden_size"),  # a field's type
])
def test_a_model_config_transformers_cannot_read_is_one_line(capsys, tmp_path, config_text, shown):
    """A model folder's config.json nested too deeply, or with a value of the wrong type (transformers 5
    validates its fields: StrictDataclassFieldValidationError): "internal error" before, now one line, exit 4."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(config_text)
    got, _, err = _run(capsys, "check", "--model", str(d))
    line = _one_error_line(err)
    assert got == 4 and "could not read the config of" in line and shown in line, line


@pytest.mark.parametrize("file, change, expected", [
    ("config.json", {"num_hidden_layers": 0}, "its config.json declares no layers (num_hidden_layers 0)"),
    ("config.json", {"num_attention_heads": 3}, "could not build"),  # 32 is not a multiple of 3
    ("tokenizer.json", "[" * 100_000 + "]" * 100_000, "could not read the tokenizer of"),
    ("tokenizer_config.json", {"tokenizer_class": 5}, "could not read the tokenizer of"),
])
def test_a_damaged_model_folder_is_one_line(capsys, tmp_path, file, change, expected):
    """A model folder whose config declares no layers or heads that do not divide its width, or whose
    tokenizer files are nested too deeply or hold a value of the wrong type: "internal error" (IndexError,
    ValueError, RecursionError, AttributeError) in `check`, `plan` and a build before; now one line, exit 4."""
    from tests.test_pipeline import tiny_bert_dir

    d = tiny_bert_dir(tmp_path / "model", 0)
    if isinstance(change, dict):
        (d / file).write_text(json.dumps({**json.loads((d / file).read_text()), **change}))
    else:
        (d / file).write_text(change)
    argvs = [("check", "--model", str(d))]
    if file.startswith("tokenizer"):  # a plan reads the tokenizer too (its cost estimate)
        argvs.append(("plan", "--preset", "smoke", "--model", str(d), "--cache", str(tmp_path / "c")))
    for argv in argvs:
        got, _, err = _run(capsys, *argv)
        line = _one_error_line(err)
        assert got == 4 and expected in line, (argv, line)


def test_a_damaged_memo_of_the_user_cache_is_ignored(tmp_path):
    """The fingerprint and causality memos (``<user cache>/fingerprints.json``, ``causal.json``) only save
    time: one nested too deeply, holding a list, or a FIFO in its place was an internal error (RecursionError,
    TypeError) or a hang of `plan` and `build`; now it reads as empty and the next write replaces it."""
    from report_builder.models.fingerprints import memo_put, memo_read

    memo = tmp_path / "fingerprints.json"
    for text in ("[" * 100_000 + "]" * 100_000, "[1, 2]", "{", "7"):
        memo.write_text(text)
        assert memo_read(memo) == {}
        memo_put(memo, "k", "v")
        assert memo_read(memo) == {"k": "v"}
    memo.unlink()
    os.mkfifo(memo)  # in a subprocess: a reader that opens a FIFO waits for a writer forever
    code = f"from pathlib import Path; from report_builder.models.fingerprints import memo_read; print(memo_read(Path({str(memo)!r})))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 0 and r.stdout.strip() == "{}", r.stderr
