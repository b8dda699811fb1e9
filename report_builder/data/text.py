"""Plain-text helpers shared by the set builders: sentence splitting and word counts.

The splitter is a small rule-based one (no NLTK/spaCy dependency): it breaks after ``.``, ``!`` or
``?`` (optionally followed by a closing quote or bracket) when the next word starts with an
upper-case letter, digit or opening quote, and it refuses to break after common abbreviations and
initials. Pitfall: it is deliberately conservative; a missed break only makes a span longer, which
the word budget in the builders absorbs.
"""

from __future__ import annotations

import re

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof st sr jr vs etc e.g i.e cf al no nos vol pp p ed eds inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec gen col lt capt sgt rev gov sen rep ft mt
    approx fig figs ca c u.s u.k u.n""".split()
)

_BREAK = re.compile(r"""(?<=[.!?])(["'”’)\]]*)\s+(?=["'“‘(\[]?[A-Z0-9])""")
_SPACE = re.compile(r"\s+")


def normalise_space(text: str) -> str:
    """Collapse runs of whitespace to one space and strip the ends."""
    return _SPACE.sub(" ", text).strip()


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences.

    Args:
        text: One paragraph of plain text.

    Returns:
        The sentences, whitespace-normalised, in order (empty strings dropped).
    """
    text = normalise_space(text)
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        end = m.start() + len(m.group(1))
        candidate = text[start:end]
        last = candidate.rstrip("\"'”’)]").rsplit(" ", 1)[-1].rstrip(".!?").lower()
        # initials ("J. R. R. Tolkien") and known abbreviations do not end a sentence
        if len(last) == 1 and last.isalpha() or last in _ABBREVIATIONS:
            continue
        out.append(candidate.strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]
