"""K24 pair categories: the linguistic relation of each token pair ``(i, j)`` of one sequence.

A pair gets the first category of `CATEGORY_ORDER` (`schema.PAIR_CATEGORIES`) that applies: special
token, same word, multi-word name, adjacent, identical token, punctuation, other. Word ids come from
the fast tokenizer or are inferred from subword markers (`infer_word_ids`); multi-word names from an
installed spaCy English pipeline, else from runs of capitalised words (`find_name_spans`).

Pitfall: the rules are an ordered cascade, so `pair_category_codes` must test them in exactly
`CATEGORY_ORDER`'s order; the name finder never downloads a spaCy model (`name_method` says which ran).
"""
from __future__ import annotations

import functools
import re
import unicodedata
from typing import Sequence

import numpy as np

from report_builder import schema

CATEGORY_ORDER = schema.PAIR_CATEGORIES
"""Pair categories (`schema.PAIR_CATEGORIES`); a pair gets the **first** that applies, in exactly this order."""

_MARKERS = ("Ġ", "▁", "Ċ", " ")  # leading-space / newline markers of byte-level BPE and SentencePiece
_NAME_RE = re.compile(r"\b[A-Z][\w'’.\-]*(?:[ \t]+[A-Z][\w'’\-]*)+")
_NAME_STOP = {"The", "A", "An", "This", "That", "These", "Those", "In", "On", "At", "Of", "For", "And",
              "But", "Or", "If", "When", "While", "As", "By", "To", "From", "With", "It", "He", "She",
              "They", "We", "I", "You", "His", "Her", "Their", "Our", "My", "After", "Before"}


def strip_marker(token: str) -> str:
    """Token text without its WordPiece ``##`` prefix or BPE/SentencePiece leading-space marker."""
    if token.startswith("##"):
        return token[2:]
    t = token
    while t[:1] in _MARKERS:
        t = t[1:]
    return t


def is_punctuation(token: str) -> bool:
    """True if the marker-stripped token is non-empty and all Unicode punctuation or symbols."""
    t = strip_marker(token)
    return bool(t) and all(unicodedata.category(c)[0] in "PS" for c in t)


def infer_word_ids(tokens: Sequence[str], special: Sequence[bool]) -> list[int | None]:
    """Word ids from subword markers when the tokenizer's ``word_ids()`` are unavailable.

    A non-special token continues the previous word if it is a WordPiece ``##`` piece, or (for
    marker-based BPE vocabularies, i.e. when any token carries ``Ġ``/``▁``) if it has no leading-space
    marker; punctuation tokens and tokens after punctuation always start a new word. Special tokens
    get ``None``.
    """
    bpe = any(t[:1] in ("Ġ", "▁") for t in tokens)
    out: list[int | None] = []
    wid = -1
    prev_punct = True
    prev_special = True
    for tok, sp in zip(tokens, special):
        if sp:
            out.append(None)
            prev_special = True
            continue
        punct = is_punctuation(tok)
        if bpe:
            cont = not (tok[:1] in _MARKERS) and not punct and not prev_punct and not prev_special
        else:
            cont = tok.startswith("##") and not prev_special
        if not cont:
            wid += 1
        out.append(wid)
        prev_punct = punct
        prev_special = False
    return out


@functools.lru_cache(maxsize=1)
def _spacy_nlp():
    """An installed spaCy English pipeline with NER, or None (never downloads anything)."""
    try:  # pragma: no cover - spaCy is optional and not installed by default
        import spacy

        for name in ("en_core_web_sm", "en_core_web_md", "en_core_web_lg", "en_core_web_trf"):
            try:
                return spacy.load(name, disable=["parser", "lemmatizer"])
            except Exception:
                continue
    except Exception:
        pass
    return None


def name_method() -> str:
    """Which multi-word-name finder `find_name_spans` uses: ``"spacy-ner"`` or ``"capitalised-span"``."""
    return "spacy-ner" if _spacy_nlp() is not None else "capitalised-span"


def find_name_spans(text: str, use_ner: bool | None = None) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of multi-word names in ``text``.

    With spaCy and an English model importable (and ``use_ner`` not False): entities of ≥ 2 words.
    Otherwise: runs of ≥ 2 consecutive capitalised words (regex), with a leading function word such
    as "The" or "In" dropped (so a sentence-initial "The New York Times" gives "New York Times"); a
    run that is then shorter than 2 words is not a name.
    """
    nlp = _spacy_nlp() if use_ner in (None, True) else None
    spans: list[tuple[int, int]] = []
    if nlp is not None:  # pragma: no cover
        for ent in nlp(text).ents:
            if len(ent.text.split()) >= 2:
                spans.append((ent.start_char, ent.end_char))
        return spans
    for m in _NAME_RE.finditer(text):
        s, e = m.start(), m.end()
        words = list(re.finditer(r"\S+", text[s:e]))
        while words and words[0].group().rstrip(".") in _NAME_STOP:
            words = words[1:]
        if len(words) >= 2:
            spans.append((s + words[0].start(), s + words[-1].end()))
    return spans


def _token_name_ids(offsets, text: str, special, names) -> np.ndarray:
    """Index of the name span each token lies inside, or a unique negative number."""
    n = len(offsets)
    out = -np.arange(1, n + 1)
    if not names:
        return out
    for k in range(n):
        if special[k] or offsets[k] is None:
            continue
        s, e = int(offsets[k][0]), int(offsets[k][1])
        if e <= s:
            continue
        piece = text[s:e]
        s += len(piece) - len(piece.lstrip())  # BPE offsets may include the leading space
        e -= len(piece) - len(piece.rstrip())
        if e <= s:
            continue
        for q, (ns, ne) in enumerate(names):
            if s >= ns and e <= ne:
                out[k] = q
                break
    return out


_CATEGORY_NAMES = np.array(CATEGORY_ORDER, dtype=object)


def pair_categories(tokens: Sequence[str], word_ids: Sequence[int | None] | None,
                    offsets: Sequence[tuple[int, int] | None] | None, text: str,
                    special: Sequence[bool], names: list[tuple[int, int]] | None = None) -> np.ndarray:
    """Category of every pair ``(i, j)`` of one sequence (vectorised `pair_category`).

    Args:
        tokens: ``n`` token strings as the tokenizer writes them (``##ing``, ``Ġthe``, ``▁the``).
        word_ids: ``n`` source-word ids (the fast tokenizer's ``word_ids()``; ``None`` for special
            tokens); if ``None`` they are inferred from subword markers (`infer_word_ids`).
        offsets: ``n`` ``(start, end)`` character offsets into ``text`` (``(0, 0)``/None for specials);
            if ``None``, no multi-word names are found.
        text: the source text the offsets refer to.
        special: ``n`` bools, True for special tokens ([CLS], [SEP], <s>, BOS, …).
        names: name spans from `find_name_spans` (computed from ``text`` if None).

    Returns:
        ``(n, n)`` array of str from `CATEGORY_ORDER`, first that applies in that order:
        ``special token`` (either token special), ``same word`` (same word id), ``multi-word name``
        (both tokens inside one name span), ``adjacent`` (``|i − j| = 1``), ``identical token`` (same
        marker-stripped string, different words), ``punctuation`` (either token punctuation),
        ``other``. The diagonal is labelled by the same rules (callers exclude ``i = j``).
    """
    return _CATEGORY_NAMES[pair_category_codes(tokens, word_ids, offsets, text, special, names)]


def pair_category_codes(tokens: Sequence[str], word_ids: Sequence[int | None] | None,
                        offsets: Sequence[tuple[int, int] | None] | None, text: str,
                        special: Sequence[bool], names: list[tuple[int, int]] | None = None) -> np.ndarray:
    """`pair_categories` as ``(n, n)`` int8 indices into `CATEGORY_ORDER` (same arguments and rules)."""
    n = len(tokens)
    sp = np.asarray(special, dtype=bool).reshape(n)
    if word_ids is None:
        word_ids = infer_word_ids(tokens, sp)
    wid = np.array([(-1 - k) if (w is None or sp[k]) else int(w) for k, w in enumerate(word_ids)])
    if offsets is not None:
        if names is None:
            names = find_name_spans(text)
        nid = _token_name_ids(offsets, text, sp, names)
    else:
        nid = -np.arange(1, n + 1)
    ids: dict[str, int] = {}  # equal marker-stripped strings <-> equal ids (int compares, not n^2 str ones)
    stripped = np.array([ids.setdefault(strip_marker(t), len(ids)) for t in tokens], dtype=np.int64).reshape(n)
    punct = np.array([is_punctuation(t) for t in tokens], dtype=bool)
    idx = np.arange(n)
    conds = [
        sp[:, None] | sp[None, :],
        wid[:, None] == wid[None, :],
        (nid[:, None] == nid[None, :]) & (nid[:, None] >= 0),
        np.abs(idx[:, None] - idx[None, :]) == 1,
        stripped[:, None] == stripped[None, :],
        punct[:, None] | punct[None, :],
    ]
    return np.select(conds, list(range(len(CATEGORY_ORDER) - 1)), default=len(CATEGORY_ORDER) - 1).astype(np.int8)


def pair_category(tokens, word_ids, offsets, text, special, i: int, j: int, names=None) -> str:
    """Category of one pair ``(i, j)``; same rules and arguments as `pair_categories`."""
    return str(pair_categories(tokens, word_ids, offsets, text, special, names)[i, j])
