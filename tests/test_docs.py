"""The documentation, run as written: what README.md, the guide pages, the example files and the text the
tool prints (help, error lines) name must exist. A reader who follows `README "Run on a cluster"` finds no
such section when it moved to a guide page; a `report-builder CMD --flag` the docs write must be an option
of CMD; a number the docs quote from a command's output must be what that command prints now.
(`tests/test_failures.py` checks the exit-code table, `tests/test_notebook.py` runs the notebook script.)"""
from __future__ import annotations

import re
from pathlib import Path

from report_builder import cli

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"


def _prose() -> list[Path]:
    """Every file whose text a user reads: the docs, the pages' templates, the examples, and the
    package's source (help texts, error lines)."""
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "docs" / "examples").glob("*")), *sorted((ROOT / "templates").rglob("*.j2")),
            *sorted((ROOT / "report_builder").rglob("*.py"))]


def _headings(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [h.strip() for h in re.findall(r"^#{1,6}\s+(.*)$", text, re.M)]


# `README "Run on a cluster"`, `docs/guide/configuration.md "Your own data"` (in Python source the quotes
# are escaped): a section named by its file and the start of its heading
SECTION = re.compile(r'\b(README(?:\.md)?|docs/[\w/.-]+\.md)\s+\\?"([^"\\]+)\\?"')


def test_every_section_a_text_names_exists():
    missing = []
    for path in _prose():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for file, title in SECTION.findall(line):
                page = ROOT / (file if file.endswith(".md") else file + ".md")
                if not (page.is_file() and any(h.startswith(title) for h in _headings(page))):
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {file} \"{title}\"")
    assert not missing, "sections named that do not exist:\n" + "\n".join(missing)


def _options() -> dict[str, set[str]]:
    return {name: {s for a in p._actions for s in a.option_strings}
            for name, p in cli._subparsers(cli.build_parser()).items()}


def test_every_command_and_flag_the_docs_write_exists():
    """`report-builder CMD ... --flag` in the docs: CMD is a command and each flag one of its options."""
    opts, wrong = _options(), []
    for path in _prose():
        if path.suffix == ".py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for cmd, rest in re.findall(r"report-builder\s+([a-z]+)([^`\n|;)]*)", line):
                if cmd not in opts:
                    wrong.append(f"{path.relative_to(ROOT)}:{n}: no command {cmd!r}")
                    continue
                wrong += [f"{path.relative_to(ROOT)}:{n}: `{cmd}` has no {flag}"
                          for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", rest) if flag not in opts[cmd]]
    assert not wrong, "\n".join(wrong)


def test_every_docs_file_a_text_names_exists():
    """`docs/guide/cluster.md`, `docs/examples/config.yaml` in help texts, error lines and pages."""
    missing = [f"{path.relative_to(ROOT)}:{n}: {ref}"
               for path in _prose()
               for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               for ref in re.findall(r"(?<![\w/.-])(docs/[\w/.-]*\.(?:md|yaml|py))", line)
               if not (ROOT / ref).is_file()]
    assert not missing, "\n".join(missing)


# ------------------------------------------------------------------ outputs the docs quote

RUN_ALL = """
import sys
from report_builder.cli import main
for argv in sys.argv[1:]:
    print("\\x00 " + argv, flush=True)
    main(argv.split("\\x01"))
"""


def _quoted_runs(pages, keep) -> list[tuple[str, list[str], str]]:
    """Each ```text block of ``pages`` that starts with `$ report-builder ...` and that ``keep(command)``
    accepts: (command, its output lines as quoted, where)."""
    runs = []
    for page in pages:
        for block in re.findall(r"^```text\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M):
            for chunk in re.split(r"^(?=\$ )", block, flags=re.M):
                lines = chunk.rstrip("\n").splitlines()
                if lines and lines[0].startswith("$ report-builder ") and keep(lines[0]):
                    command = lines[0][2:].split("#")[0].strip()
                    runs.append((command, lines[1:], str(page.relative_to(ROOT))))
    return runs


def _matches(quoted: str, printed: list[str]) -> bool:
    """A quoted output line is printed as it is, "…" standing for any text."""
    pattern = ".*?".join(re.escape(part) for part in quoted.rstrip().split("…"))
    return any(re.fullmatch(pattern, line.rstrip()) for line in printed)


def test_the_paper_plan_the_docs_quote_is_what_plan_prints(tmp_path):
    """The Performance guide's `plan --preset paper --gpu H200 ...` outputs, and the times the README and
    the guides quote from them ("about 12 min on one H200 and 1.5 min on eight"), are what `plan` prints
    now: priced from the recorded H200 run, with nothing downloaded (an empty Hugging Face cache),
    so the same on any machine."""
    import os
    import subprocess
    import sys

    runs = _quoted_runs([GUIDE / "performance.md"], lambda c: " plan " in c and "--gpu " in c)
    assert len(runs) >= 2, runs
    argvs = [c.split()[1:] + ["--cache", str(tmp_path / "cache")] for c, _, _ in runs]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf"),
           "HF_HOME": str(tmp_path / "hf-home"), "PYTHONPATH": str(ROOT), "COLUMNS": "250"}
    r = subprocess.run([sys.executable, "-c", RUN_ALL, *("\x01".join(a) for a in argvs)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    printed = [out.splitlines() for out in r.stdout.split("\x00 ")[1:]]
    wrong = [f"{where}: `{command}` prints no line like\n  {line}"
             for (command, quoted, where), out in zip(runs, printed)
             for line in quoted if line.strip() not in ("", "…") and not _matches(line, out)]
    totals = [line for out in printed for line in out if re.match(r"(total|  of which|on 1 GPU): ", line)]
    assert not wrong, "\n".join(wrong) + "\nit printed:\n" + "\n".join(totals)
    one, eight = map(float, re.search(r"^on 1 GPU: ~([\d.]+) min; on 8 GPUs: ~([\d.]+) min", r.stdout.split(
        "\x00 ")[1], re.M).groups())
    pages = (ROOT / "README.md", GUIDE / "configuration.md", GUIDE / "performance.md")
    said = [(p.name, float(a), float(b)) for p in pages
            for a, b in re.findall(r"about ([\d.]+) min(?:utes)? on one H200,? (?:and )?([\d.]+) min(?:utes)? on eight",
                                   re.sub(r"\s+", " ", p.read_text(encoding="utf-8")))]
    assert len(said) >= 3, said
    assert all(abs(a - one) <= 0.5 and abs(b - eight) <= 0.05 for _, a, b in said), (said, one, eight)


# ------------------------------------------------------------------ the notebook guide, run

def test_the_notebook_guide_runs_as_written(tmp_path, monkeypatch):
    """docs/guide/notebook.md's Python blocks and inline `res…` expressions, and the README's block, run
    in the page's order on a tiny random BERT with MiniLM's 6 layers standing in for the embedded "minilm".
    The site's `data.csv` the join reads is the notebook's own frame written by the site's one CSV writer
    (`version_files.csv_text`: the published precision). The one-line repr is the one quoted, the plot's
    title the one quoted, the join's keys and columns exist and its difference is what the comment says."""
    import numpy as np

    from tiny_models import save_tiny

    save_tiny("bert", tmp_path / "tiny", layers=6)
    page = (GUIDE / "notebook.md").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    stand_in = repr(str(tmp_path / "tiny"))
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert len(blocks) >= 2
    ns: dict = {}
    first = blocks[0].replace('rb.load_model("minilm")', f'rb.load_model({stand_in}, name="minilm")')
    exec(compile(first, "notebook.md[1]", "exec"), ns)  # noqa: S102 - the page's own code
    quoted = re.search(r"^```text\n(<Decomposition: .*>)\n```", page, re.M).group(1)
    assert _matches(re.sub(r"max error [\d.e+-]+", "max error …", quoted), [repr(ns["res"])]), (quoted, ns["res"])

    readme = re.search(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S | re.M)
    ns_readme: dict = {}
    code = readme.group(1).replace('rb.decompose("minilm",', f"rb.decompose({stand_in},")
    exec(compile(code, "README.md", "exec"), ns_readme)  # noqa: S102 - the README's own code
    assert ns_readme["res"].max_error <= 1e-4

    inline = [c for c in re.findall(r"`(res[^`]*)`", page) if "..." not in c and not c.endswith(".")]
    assert len(inline) >= 5, inline
    tables = re.search(r"`res\.to_frame\(table\)` gives [^:]*: (.*?)\. ", page, re.S).group(1)
    for code in inline + [f'res.to_frame("{t}")' for t in re.findall(r"`(\w+)`", tables)]:
        if "(table)" in code:
            continue  # each table the sentence names, above
        eval(compile(code.replace('"map.html"', repr(str(tmp_path / "map.html"))), code, "eval"), ns)  # noqa: S307
    title = re.search(r'`res\.plot\(3, "ATB"\)` is titled "([^"]+)"', page).group(1)
    assert title in str(ns["res"].plot(3, "ATB").to_dict())

    join = blocks[1].replace('rb.load_model("minilm",', f"rb.load_model({stand_in},")
    site = tmp_path / "site" / "figures" / "k24-maps"
    site.mkdir(parents=True)
    from report_builder.citations.version_files import csv_text

    ns2: dict = {"rb": ns["rb"]}
    setup = join.split("site = pd.read_csv")[0]
    exec(compile(setup, "notebook.md[2]", "exec"), ns2)  # noqa: S102
    (site / "data.csv").write_text(csv_text(ns2["res"].to_frame("k24_maps")), encoding="utf-8")  # as a build
    exec(compile(join, "notebook.md[2]", "exec"), ns2)  # noqa: S102
    diff = ns2["both"]["value (row-normalised)_notebook"] - ns2["both"]["value (row-normalised)_site"]
    assert len(diff) == len(ns2["res"].to_frame("k24_maps")) and float(np.abs(diff).max()) < 1e-6


def test_no_text_names_a_version_of_the_tool_that_does_not_exist_yet():
    """"versions before 0.2" in a 0.1.0 package includes the version a reader runs: a version the docs
    compare against is one that exists, at most the package's own (pyproject.toml)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version = tuple(int(x) for x in project["version"].split("."))
    wrong = [f"{path.relative_to(ROOT)}: {m.group(0)}"
             for path in _prose()
             for m in re.finditer(r"\b[Vv]ersions?\s+(?:before|since|after|from)\s+(\d+(?:\.\d+)+)",
                                  path.read_text(encoding="utf-8"))
             if tuple(int(x) for x in m.group(1).split(".")) > version]
    assert not wrong, "\n".join(wrong)


def test_clean_all_help_names_what_it_removes(tmp_path, monkeypatch, capsys):
    """`clean --all --help` names every kind of thing `clean --all` says it removed (its help said
    "converted models ... and stale temporary folders" while it also removes the fetched model wheels,
    the cached evaluation sets and `reproduce`'s default cache, as install.md and safety.md say)."""
    monkeypatch.setenv("REPORT_BUILDER_CACHE", str(tmp_path / "user"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["clean", "--all", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "o")]) == 0
    kinds = re.findall(r"\b0 ([a-z][a-z ]+?)(?: from |,|$)", capsys.readouterr().out.strip())
    assert len(kinds) >= 3, kinds
    action = cli._subparsers(cli.build_parser())["clean"]._option_string_actions["--all"]
    help_text = re.sub(r"\s+", " ", action.help)
    missing = [k for k in kinds + ["reproduce"] if k.replace("cached ", "") not in help_text]
    assert not missing, (missing, help_text)


def test_the_pages_links_into_the_guide_land_on_what_they_promise():
    """A link a generated page writes in raw HTML (`href="guide/<page>.html#<anchor>"`, which mkdocs does
    not check) names a guide page and one of its headings; the "not configured" box's data layout
    (`SST-2/dev.tsv`, ...) is the one that section describes (the box said "see the README", which
    describes no such layout and is not on the site)."""
    from markdown.extensions.toc import slugify

    box = (ROOT / "templates" / "figure.md.j2").read_text(encoding="utf-8")
    links = re.findall(r'href="guide/([\w-]+)\.html#([\w-]+)"', box)
    assert links, "the not-configured box links no guide section"
    for page, anchor in links:
        text = (GUIDE / f"{page}.md").read_text(encoding="utf-8")
        sections = dict(zip([slugify(h, "-") for h in _headings(GUIDE / f"{page}.md")],
                            re.split(r"^#{1,6} .*$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M),
                                     flags=re.M)[1:]))
        assert anchor in sections, (page, anchor, list(sections))
        for path in re.findall(r"<code>([\w-]+/[\w.]+)</code>", box):
            assert path in sections[anchor], (path, page, anchor)


GENERATED = {"index.md", "k21.md", "k24.md", "methods.md", "models.md", "changes.md", "api.md"}
"""Pages the build writes beside docs/ (from templates/pages/): a link to one is checked by mkdocs."""


def test_every_relative_link_and_anchor_of_the_docs_exists():
    """`[text](page.md#anchor)` in README.md and docs/: the file exists and the anchor is one of its headings
    (as Python-Markdown's toc names them). mkdocs --strict checks pages, not anchors, and never the README."""
    from markdown.extensions.toc import slugify

    wrong = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            page = (path.parent / file).resolve() if file else path
            if file and not page.is_file():
                if page.name in GENERATED and page.parent == (ROOT / "docs").resolve():
                    continue
                wrong.append(f"{path.relative_to(ROOT)}: {target}: no such file")
            elif anchor and page.suffix == ".md" and anchor not in {slugify(h, "-") for h in _headings(page)}:
                wrong.append(f"{path.relative_to(ROOT)}: {target}: no such heading")
    assert not wrong, "\n".join(wrong)
