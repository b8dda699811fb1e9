"""Small offline single-text sets from gensim's test data: movie reviews and news.

``sentiment-sample``: the 200 lines of ``pang_lee_polarity.cor`` (Pang & Lee movie-review
sentences, already lower-cased and tokenized like SST), label prefix removed.
``news-sample``: the 300 texts of ``lee_background.cor`` (Australian news, Lee et al. 2005), each
cut to its first sentence, plus the second when both fit :data:`NEWS_WORDS` words, so items look
like CoNLL-2003 news sentences. Pitfall: a first sentence longer than the budget is cut at a word
boundary (rare), so such an item may not end with a full stop.
"""

from __future__ import annotations

import os
import re

from report_builder.errors import DataError, shown
from .evalset import EvalSet, TextItem, make_set
from .gensim_data import NEWS_FILE, SENTIMENT_FILE, gensim_test_file
from .text import normalise_space, split_sentences, word_count

NEWS_WORDS = 60
"""Word budget of one news item."""

_LABEL = re.compile(r"^__label__\S+\s*")


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return [line.rstrip("\n") for line in fh]


def _local(path: str | None, default: str, set_id: str) -> str:
    if path is None:
        return gensim_test_file(default)
    if not os.path.isfile(path):
        raise DataError(f"data file for {shown(set_id)} not found: {path}; expected a text file with "
                        f"one text per line (like gensim's {default})")
    return path


def build_sentiment(path: str | None = None) -> EvalSet:
    """The ``sentiment-sample`` set: one movie-review sentence per item, file order.

    Args:
        path: Optional replacement for gensim's ``pang_lee_polarity.cor`` (same format).
    """
    path = _local(path, SENTIMENT_FILE, "sentiment-sample")
    texts = [normalise_space(_LABEL.sub("", line)) for line in _read_lines(path)]
    items = [TextItem(f"sentiment-sample-{k:04d}", t) for k, t in enumerate(t for t in texts if t)]
    return make_set(
        "sentiment-sample", "Movie-review sentences (SST-like sample)", items,
        source=f"{os.path.basename(path)} (Pang & Lee sentence polarity, gensim test data)",
        licence="research use (Pang & Lee sentence polarity dataset v1.0)",
        domain="Movie reviews",
        built="Every line of the file in order, the __label__ prefix removed; sentences stay "
              "lower-cased and tokenized as distributed.",
    )


def first_sentences(text: str, budget: int = NEWS_WORDS) -> str:
    """The first sentence of a text, plus the second if both fit the word budget.

    Args:
        text: A news text.
        budget: Maximum number of words.

    Returns:
        The shortened text (cut at a word boundary if the first sentence alone is too long).
    """
    sentences = split_sentences(text)
    if not sentences:
        return ""
    out = sentences[0]
    if word_count(out) > budget:
        return " ".join(out.split()[:budget])
    if len(sentences) > 1 and word_count(out) + word_count(sentences[1]) <= budget:
        out = out + " " + sentences[1]
    return out


def build_news(path: str | None = None) -> EvalSet:
    """The ``news-sample`` set: the opening sentence(s) of each news text, file order.

    Args:
        path: Optional replacement for gensim's ``lee_background.cor`` (one text per line).
    """
    path = _local(path, NEWS_FILE, "news-sample")
    texts = [first_sentences(line) for line in _read_lines(path)]
    items = [TextItem(f"news-sample-{k:04d}", t) for k, t in enumerate(t for t in texts if t)]
    return make_set(
        "news-sample", "News sentences (CoNLL-like sample)", items,
        source=f"{os.path.basename(path)} (Lee et al. 2005 news corpus, gensim test data)",
        licence="research use (Lee background corpus, ABC news texts)",
        domain="News",
        built=f"The first sentence of each news text, plus the second when both fit "
              f"{NEWS_WORDS} words, in file order.",
    )
