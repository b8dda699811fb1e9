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
