"""The inputs analyses read (`analyses.base.INPUTS`), encoded with the subject's tokenizer.

One place turns configuration + evaluation set + tokenizer into encoded sequences: K21-masked
(encoders; causal models are never masked), unmasked, the K21 example pair and the K24 examples.

Pitfall: K21 masking draws from one RNG over the whole set in file order, so a set is masked as a
whole and never sliced afterwards (`data.encode`); the K24 analyses slice *before* encoding.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from report_builder.analyses.base import Run, Subject
from report_builder.data import EncodedSeq, EvalSet, TextItem, encode
from report_builder.errors import ConfigError, DataError, for_terminal, shown
from report_builder import schema
from report_builder.schema import example_label

if TYPE_CHECKING:  # pragma: no cover - the engine imports torch; a cached build never does
    from report_builder.engine import Tokens

PAIR_MAX_LENGTH = 128
"""Token limit of the K21 example pair."""
EXAMPLES_MAX_LENGTH = schema.EXAMPLE_TOKENS
"""Token limit of the K24 examples (their maps are drawn n x n; `schema.EXAMPLE_TOKENS`)."""


_SAID: dict[int, tuple[object, set]] = {}
"""The cuts already said, per configuration object (one plan or build): each note once, not once per task."""
_CUTS: contextvars.ContextVar[list | None] = contextvars.ContextVar("texts_cut", default=None)
"""The cuts found by the task computing in this context (`recording_cuts`), for its cache entry's meta."""


@contextlib.contextmanager
def recording_cuts() -> Iterator[list[dict]]:
    """Collect the cuts `_fitted` finds while a task computes: its entry records the first one (``meta["cut"]``),
    so a build that reuses the entry says the same note without encoding anything (`say_cuts`)."""
    token = _CUTS.set([])
    try:
        yield _CUTS.get()
    finally:
        _CUTS.reset(token)


def _key(subject: Subject) -> str:
    """The dataset's configuration key, as the user wrote it (``datasets[0]``)."""
    ids = [d.id for d in subject.cfg.datasets]
    return f"datasets[{ids.index(subject.dataset.id)}]" if subject.dataset.id in ids else "the dataset's"


def _words(e: EncodedSeq) -> str:
    """The start of a sequence's text: which text a message means (texts count from 1 among the non-empty
    ones, which a file's line numbers do not)."""
    text = e.text.split()
    return " ".join(text[:6]) + (" …" if len(text) > 6 else "")


def _start(e: EncodedSeq) -> str:
    """`_words`, quoted."""
    return shown(_words(e), 60)


def _say_cut(s: Subject, rec: dict) -> None:
    """The note that a dataset's texts were cut to ``max_length`` (a `_fitted` record), once per model and
    dataset of one plan or build."""
    said = _SAID.setdefault(id(s.cfg), (s.cfg, set()))[1]
    if len(_SAID) > 16:  # one entry per plan or build of this process: keep the latest
        _SAID.pop(next(iter(_SAID)))
    if (s.model.name, s.dataset.id) in said:
        return
    said.add((s.model.name, s.dataset.id))
    name = for_terminal(s.model.name)
    more = (f"; {_key(s)}.max_length can be up to {name}'s {rec['positions']} positions"
            if rec["max_length"] < rec["positions"] else "")
    logging.getLogger("report_builder").info(
        f"dataset {shown(s.dataset.id)}: {rec['cut']} of {rec['texts']} text{'s' * (rec['texts'] > 1)} cut to "
        f"max_length {rec['max_length']} tokens for {name} (the longest: text {rec['longest']}, "
        f"{shown(rec['start'], 60)}, {rec['longest_tokens']} tokens){more}")


_CUT_FIELDS = {"cut": int, "texts": int, "max_length": int, "positions": int, "longest": int,
               "longest_tokens": int, "start": str}


def say_cuts(results: Iterable[Any]) -> Iterator[Any]:
    """Pass a build's task results through, saying the note of each reused entry whose texts were cut (its
    ``meta["cut"]``, read back from the cache: validated, else ignored) as computing it said it."""
    for r in results:
        rec, s = r.entry.meta.get("cut"), r.task.subject
        if (s.dataset is not None and isinstance(rec, dict) and rec.keys() == _CUT_FIELDS.keys()
                and all(type(rec[k]) is t for k, t in _CUT_FIELDS.items()) and rec["max_length"] == s.dataset.max_length):
            _say_cut(s, {**rec, "start": rec["start"][:200]})
        yield r


def _fitted(run: Run, enc: list[EncodedSeq], what: str | None = None) -> list[EncodedSeq]:
    """``enc`` when every sequence fits the model's positions (else one line naming the text and the key to
    change, exit 3, as `plan` says it too); a dataset's texts cut to ``max_length`` said in one line of the
    log (a note, not a warning: the cut is what ``max_length`` asks for; ``-q`` hides it) and recorded for
    the task's cache entry (`recording_cuts`).

    ``what``: the K21 example pair's name (``None``: the dataset's texts, cut to its ``max_length``)."""
    s = run.subject
    limit = run.lm().max_positions()
    name = for_terminal(s.model.name)
    over = next((e for e in enc if len(e) > limit), None)
    if over is not None:
        if what is not None:
            raise ConfigError(f"{what}: the pair has {len(over)} tokens with {name}'s tokenizer, more than {name}'s "
                              f"{limit} positions; give shorter sentences")
        raise ConfigError(f"dataset {shown(s.dataset.id)}: text {over.seq + 1} ({_start(over)}) has {len(over)} "
                          f"tokens with {name}'s tokenizer, more than {name}'s {limit} positions; set "
                          f"{_key(s)}.max_length to at most {limit} (it is {s.dataset.max_length})")
    cut = [e for e in enc if e.cut]
    if what is None and cut:
        longest = max(cut, key=lambda e: e.full_length)
        rec = {"cut": len(cut), "texts": len(enc), "max_length": s.dataset.max_length, "positions": limit,
               "longest": longest.seq + 1, "longest_tokens": longest.full_length, "start": _words(longest)}
        if _CUTS.get() is not None:
            _CUTS.get().append(rec)
        _say_cut(s, rec)
    return enc


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
    return _fitted(run, enc)


def unmasked(run: Run, n: int | None = None) -> list[EncodedSeq]:
    """The first ``n`` items (default: all), unmasked."""
    s = run.subject
    es = run.eval_set() if n is None else run.eval_set().head(n)
    return _fitted(run, encode(es, run.lm().tokenizer, causal=s.causal, max_length=s.dataset.max_length))


def _pair_item(subject: Subject) -> TextItem:
    a, b = subject.cfg.k21.example
    return TextItem("k21-example", a, b)


def pair(run: Run) -> EncodedSeq:
    """The K21 example pair (``k21.example``), encoded."""
    es = EvalSet("k21-example", "K21 example pair", (_pair_item(run.subject),), {})
    return _fitted(run, encode(es, run.lm().tokenizer, causal=run.subject.causal, max_length=PAIR_MAX_LENGTH),
                   "k21.example")[0]


def examples(run: Run) -> tuple[list[EncodedSeq], list[str]]:
    """The K24 examples: the K21 pair, then the dataset's first ``k24.examples - 1`` items, with names."""
    s = run.subject
    items = (_pair_item(s),) + tuple(run.eval_set().items[: max(0, s.cfg.k24.examples - 1)])
    ex = EvalSet("k24-examples", "K24 examples", items, {})
    enc = encode(ex, run.lm().tokenizer, causal=s.causal, max_length=min(s.dataset.max_length, EXAMPLES_MAX_LENGTH))
    _fitted(run, enc[:1], "k21.example")
    _fitted(run, [dataclasses.replace(e, seq=k - 1, full_length=None) for k, e in enumerate(enc[1:], 1)])
    names = [example_label(k + 1, e.text) for k, e in enumerate(enc)]
    return enc, names
