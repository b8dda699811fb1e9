"""LaTeX formulas in hand-written Markdown -> MathML at build time (no MathJax/KaTeX, no CDN).

``$$ ... $$`` becomes a display formula, ``$ ... $`` an inline one; fenced and inline code are left
alone and ``\\$`` is a literal dollar. Pitfall: the MathML is emitted on one line and its bracket
characters are escaped, so Markdown's inline patterns cannot rewrite it.
"""
from __future__ import annotations

import re

from latex2mathml.converter import convert

_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\$)")


def to_mathml(latex: str, display: bool) -> str:
    """One formula as a single line of MathML."""
    out = convert(latex.strip(), display="block" if display else "inline")
    return out.replace("\n", "").replace(">[<", ">&#x5B;<").replace(">]<", ">&#x5D;<")


def convert_markdown(text: str) -> str:
    """Replace every LaTeX formula of a Markdown text by MathML, leaving code untouched."""
    parts = _CODE.split(text)
    for k in range(0, len(parts), 2):  # even parts are outside code
        chunk = _DISPLAY.sub(lambda m: "\n\n" + to_mathml(m.group(1), True) + "\n\n", parts[k])
        chunk = _INLINE.sub(lambda m: to_mathml(m.group(1), False), chunk)
        parts[k] = chunk.replace("\\$", "$")
    return "".join(parts)
