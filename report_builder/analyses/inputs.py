"""The inputs analyses read (`analyses.base.INPUTS`), encoded with the subject's tokenizer.

One place turns configuration + evaluation set + tokenizer into encoded sequences: K21-masked
(encoders; causal models are never masked), unmasked, the K21 example pair and the K24 examples.

Pitfall: K21 masking draws from one RNG over the whole set in file order, so a set is masked as a
whole and never sliced afterwards (`data.encode`); the K24 analyses slice *before* encoding.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from report_builder.analyses.base import Run, Subject
from report_builder.data import EncodedSeq, EvalSet, TextItem, encode
from report_builder.errors import DataError, shown
from report_builder.schema import example_label

if TYPE_CHECKING:  # pragma: no cover - the engine imports torch; a cached build never does
    from report_builder.engine import Tokens

PAIR_MAX_LENGTH = 128
"""Token limit of the K21 example pair."""
EXAMPLES_MAX_LENGTH = 64
"""Token limit of the K24 examples (their maps are drawn n x n)."""


def tokens_of(encoded: list[EncodedSeq]) -> list[Tokens]:
    """What the engine reads of each encoded sequence: its ids and token types."""
    from report_builder.engine import Tokens

    return [Tokens(e.input_ids, e.token_type_ids) for e in encoded]


def mask_rate(subject: Subject) -> float:
    """K21's masking rate for this subject: the configured rate for encoders, 0 for causal models."""
    return 0.0 if subject.causal else subject.cfg.k21.mask_rate


def k24_items(subject: Subject) -> int:
    """Sequences of the K24 full-layer analyses: the dataset's ``k24_n`` (default: every item)."""
    k = subject.dataset.k24_n
    return k if k is not None else subject.n_items


def masked(run: Run) -> list[EncodedSeq]:
    """The whole set, K21-masked (unmasked for causal models); an empty result is a `DataError`."""
    s = run.subject
    enc = encode(run.eval_set(), run.lm().tokenizer, causal=s.causal, max_length=s.dataset.max_length,
                 mask_rate=mask_rate(s), mask_seed=s.cfg.k21.seed)
    if not enc:
        raise DataError(f"dataset {shown(s.dataset.id)} is empty after encoding")
    return enc


def unmasked(run: Run, n: int | None = None) -> list[EncodedSeq]:
    """The first ``n`` items (default: all), unmasked."""
    s = run.subject
    es = run.eval_set() if n is None else run.eval_set().head(n)
    return encode(es, run.lm().tokenizer, causal=s.causal, max_length=s.dataset.max_length)


def _pair_item(subject: Subject) -> TextItem:
    a, b = subject.cfg.k21.example
    return TextItem("k21-example", a, b)


def pair(run: Run) -> EncodedSeq:
    """The K21 example pair (``k21.example``), encoded."""
    es = EvalSet("k21-example", "K21 example pair", (_pair_item(run.subject),), {})
    return encode(es, run.lm().tokenizer, causal=run.subject.causal, max_length=PAIR_MAX_LENGTH)[0]


def examples(run: Run) -> tuple[list[EncodedSeq], list[str]]:
    """The K24 examples: the K21 pair, then the dataset's first ``k24.examples - 1`` items, with names."""
    s = run.subject
    items = (_pair_item(s),) + tuple(run.eval_set().items[: max(0, s.cfg.k24.examples - 1)])
    ex = EvalSet("k24-examples", "K24 examples", items, {})
    enc = encode(ex, run.lm().tokenizer, causal=s.causal, max_length=min(s.dataset.max_length, EXAMPLES_MAX_LENGTH))
    names = [example_label(k + 1, e.text) for k, e in enumerate(enc)]
    return enc, names
