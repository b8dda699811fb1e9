"""Wikipedia sequence pairs from the MediaWiki dump excerpt in gensim's test data.

Built like Clark et al. (2019), which K21 follows: two *consecutive* spans of whole sentences from
one paragraph-ordered article, to be encoded as ``[CLS] A [SEP] B [SEP]``. Each span holds at most
:data:`SPAN_WORDS` words so that the pair fits 128 BERT tokens most of the time (the encoder still
truncates). All candidate pairs are enumerated deterministically, ``random.Random(0)`` draws
:data:`N_PAIRS` of them, and the draw is put back into file order.

Pitfall: wiki markup is only stripped "reasonably" (gensim's ``filter_wiki`` plus a clean-up of
what it leaves: bold/italic quotes, headings, lists, empty brackets); sentences that still look
like markup are dropped rather than repaired.
"""

from __future__ import annotations

import bz2
import functools
import random
import re

from .evalset import EvalSet, TextItem, make_set
from .gensim_data import WIKI_FILE, gensim_test_file
from .setcache import cached_set
from .text import normalise_space, split_sentences, word_count

SPAN_WORDS = 45
"""Word budget of one span (whole sentences; a longer single sentence is skipped)."""
MIN_SPAN_WORDS = 8
"""Spans shorter than this are not used."""
N_PAIRS = 992
"""Number of pairs drawn (K21/Clark et al. used 992 Wikipedia sequences)."""
SEED = 0

_SKIP_SECTIONS = frozenset({
    "references", "see also", "external links", "further reading", "notes", "bibliography",
    "sources", "footnotes", "citations", "works cited", "notes and references",
})

_HEADING = re.compile(r"^\s*(=+)\s*(.*?)\s*\1\s*$")
_BOLD_ITALIC = re.compile(r"'{2,}")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)|\[\s*\]")
_SPACE_PUNCT = re.compile(r"\s+([,.;:!?)])")
_OPEN_SPACE = re.compile(r"\(\s+")
_MARKUP_LEFT = re.compile(r"[{}|=<>\[\]]|https?:|\bthumb\b")


def clean_article(wikitext: str) -> list[list[str]]:
    """Turn one article's wikitext into paragraphs of clean sentences.

    Args:
        wikitext: The raw ``<text>`` of a page.

    Returns:
        Paragraphs (in article order), each a list of sentences. Headings, lists, tables, files,
        categories, templates, references and reference-like sections are removed.
    """
    from gensim.corpora.wikicorpus import filter_wiki

    plain = filter_wiki(wikitext)
    paragraphs: list[list[str]] = []
    skipping = False
    for block in re.split(r"\n\s*\n|\n(?==)", plain):
        lines = []
        for line in block.split("\n"):
            head = _HEADING.match(line)
            if head:
                skipping = head.group(2).strip().lower() in _SKIP_SECTIONS
                continue
            if not line.strip() or line.lstrip()[:1] in "*#:;|!{}":
                continue
            lines.append(line)
        if skipping or not lines:
            continue
        text = _BOLD_ITALIC.sub("", " ".join(lines))
        text = _EMPTY_BRACKETS.sub("", text)
        text = _OPEN_SPACE.sub("(", _SPACE_PUNCT.sub(r"\1", normalise_space(text)))
        sentences = [s for s in split_sentences(text)
                     if word_count(s) >= 3 and not _MARKUP_LEFT.search(s) and s[-1] in ".!?\"'"]
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


def read_articles(path: str) -> list[tuple[str, str]]:
    """Read the main-namespace, non-redirect articles of a MediaWiki XML dump.

    Args:
        path: A ``.xml.bz2`` dump.

    Returns:
        ``(title, wikitext)`` in file order.
    """
    from gensim.corpora.wikicorpus import extract_pages

    with bz2.open(path, "rb") as fh:
        return [(title, text) for title, text, _pid in extract_pages(fh)
                if text and not text.lstrip().lower().startswith("#redirect")]


def candidate_pairs(paragraphs: list[list[str]], span_words: int = SPAN_WORDS) -> list[tuple[str, str]]:
    """Non-overlapping pairs of consecutive sentence spans within each paragraph.

    Greedy: a span takes whole sentences while it stays within ``span_words``; span B starts at
    the sentence right after span A; the next pair starts after span B. A sentence longer than
    the budget breaks the run.

    Args:
        paragraphs: Output of :func:`clean_article`.
        span_words: Word budget per span.

    Returns:
        ``(span_a, span_b)`` pairs in article order.
    """
    pairs = []
    for sentences in paragraphs:
        spans: list[str] = []
        current: list[str] = []
        words = 0

        def close() -> None:
            nonlocal current, words
            if current and words >= MIN_SPAN_WORDS:
                spans.append(" ".join(current))
            elif current:
                spans.append("")  # too short: breaks contiguity
            current, words = [], 0

        for s in sentences:
            n = word_count(s)
            if n > span_words:
                close()
                spans.append("")
                continue
            if words + n > span_words:
                close()
            current.append(s)
            words += n
        close()
        i = 0
        while i + 1 < len(spans):
            if spans[i] and spans[i + 1]:
                pairs.append((spans[i], spans[i + 1]))
                i += 2
            else:
                i += 1
    return pairs


LOADER_VERSION = 1
"""Version of this builder's output for the same dump and parameters (in the disk cache's key)."""


@functools.lru_cache(maxsize=2)
def _build(path: str, n_pairs: int, seed: int) -> EvalSet:
    """The set, from the disk cache (`setcache`: keyed on the dump's sha256, gensim's version, this
    package's data code and the parameters) or built and stored there."""
    return cached_set("wiki", LOADER_VERSION, {"n_pairs": n_pairs, "seed": seed, "span_words": SPAN_WORDS,
                                               "min_span_words": MIN_SPAN_WORDS},
                      [path], lambda: build_from_dump(path, n_pairs, seed), libs=("gensim",))


def build_from_dump(path: str, n_pairs: int, seed: int) -> EvalSet:
    """Build the set from a MediaWiki dump (seconds: every article's markup is stripped)."""
    candidates: list[tuple[str, str]] = []
    articles = read_articles(path)
    for _title, wikitext in articles:
        candidates.extend(candidate_pairs(clean_article(wikitext)))
    chosen = sorted(random.Random(seed).sample(range(len(candidates)), min(n_pairs, len(candidates))))
    items = [TextItem(f"wiki-{k:04d}", *candidates[c]) for k, c in enumerate(chosen)]
    return make_set(
        "wiki", "Wikipedia (sequence pairs)", items,
        source=f"gensim test data: {WIKI_FILE} ({len(articles)} articles)",
        licence="CC BY-SA 3.0 (Wikipedia text)",
        domain="Wikipedia",
        built=(f"Pairs of consecutive whole-sentence spans (each <= {SPAN_WORDS} words) from one "
               f"paragraph of an article, as in Clark et al. 2019; {len(items)} of "
               f"{len(candidates)} candidate pairs drawn with random.Random({seed}), kept in file "
               "order."),
    )


def build_wiki(path: str | None = None) -> EvalSet:
    """The ``wiki`` evaluation set.

    Args:
        path: Optional MediaWiki ``.xml.bz2`` dump; defaults to gensim's test-data excerpt.

    Returns:
        Up to :data:`N_PAIRS` sequence pairs (deterministic).
    """
    if path is None:
        path = gensim_test_file(WIKI_FILE)
    else:
        import os

        from report_builder.errors import DataError

        if not os.path.isfile(path):
            raise DataError(f"Wikipedia dump not found: {path} (expected a MediaWiki "
                            "pages-articles .xml.bz2 file)")
    return _build(path, N_PAIRS, SEED)
