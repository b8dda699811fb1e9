"""Encode an evaluation set with one model's tokenizer, with K21's masking.

Encoders get the tokenizer's own pair template (``[CLS] A [SEP] B [SEP]``, RoBERTa's
``<s> A </s></s> B </s>``) with ``longest_first`` truncation; causal models get the plain text
(``text_a + " " + text_b``) with the tokenizer's BOS prepended when it has one and does not add it.
Every token carries its string, a special flag, a K21 category (``Normal``, ``[MASK]``, ``[CLS]``,
``[SEP]``), the index of the source word it belongs to and its character offsets into ``text``.

K21 masking replaces ``max(1, round(rate * n_nonspecial))`` non-special tokens of each sequence by
the mask token, drawing positions from ONE ``random.Random(mask_seed)`` shared by the whole set in
file order. Pitfall: the draw depends on the order and lengths of all earlier sequences, so mask
a set only as a whole (slice it before, not after, if you need fewer sequences).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from report_builder.errors import DataError, shown
from .evalset import EvalSet, TextItem
from report_builder.schema import TOKEN_CATEGORIES

NORMAL, MASK, CLS, SEP = TOKEN_CATEGORIES
"""Token categories of K21 Fig. 3 (`schema.TOKEN_CATEGORIES`; RoBERTa's ``<mask>``, ``<s>``, ``</s>`` map to these)."""
K21_MASK_RATE = 0.12
"""The masking rate K21 used."""


@dataclasses.dataclass
class EncodedSeq:
    """One tokenized sequence (unpadded), aligned with its source text.

    Attributes:
        input_ids: Token ids, length ``n``.
        token_type_ids: Segment ids for tokenizers that use them, else ``None``.
        tokens: The tokenizer's token strings (``[MASK]`` where masked).
        special: Whether each token is a special token (CLS/SEP/BOS/...).
        masked: Whether each token was replaced by the mask token.
        category: ``Normal``, ``[MASK]``, ``[CLS]`` or ``[SEP]`` per token.
        word_ids: Index of the source word of each token (pieces of one word share it; words of
            ``text_b`` continue after those of ``text_a``); ``None`` for special tokens.
        offsets: ``(start, end)`` character span in :attr:`text` without surrounding whitespace,
            ``None`` for special tokens.
        text: The text the offsets refer to (pairs: ``text_a + "\\n" + text_b``; causal:
            ``text_a + " " + text_b``).
        item_id: Id of the source :class:`TextItem`.
        seq: Index of the sequence in the encoded set.
        full_length: The tokens the text has before it is cut to ``max_length`` (specials included;
            equal to ``len(input_ids)`` when nothing was cut; ``None``: not known).
    """

    input_ids: list[int]
    token_type_ids: list[int] | None
    tokens: list[str]
    special: list[bool]
    masked: list[bool]
    category: list[str]
    word_ids: list[int | None]
    offsets: list[tuple[int, int] | None]
    text: str
    item_id: str
    seq: int
    full_length: int | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def cut(self) -> bool:
        """Whether the text was cut to ``max_length`` (tokens after it left out)."""
        return self.full_length is not None and self.full_length > len(self.input_ids)


def _special_categories(tokenizer: Any, causal: bool) -> dict[int, str]:
    """Map special-token ids to K21 categories for this tokenizer."""
    cats: dict[int, str] = {}
    if causal:
        if tokenizer.bos_token_id is not None:
            cats[tokenizer.bos_token_id] = CLS
    else:
        if tokenizer.sep_token_id is not None:
            cats[tokenizer.sep_token_id] = SEP
        if tokenizer.cls_token_id is not None:
            cats[tokenizer.cls_token_id] = CLS
    if tokenizer.mask_token_id is not None:
        cats[tokenizer.mask_token_id] = MASK
    return cats


def _trim(off: tuple[int, int], text: str) -> tuple[int, int]:
    """Drop leading/trailing whitespace from a span (byte-level BPE may include the space)."""
    start, end = off
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _words_from_offsets(offsets: list[tuple[int, int] | None], text: str) -> list[int | None]:
    """Word ids from offsets: a token starts a new word unless it touches the previous token."""
    out: list[int | None] = []
    word, prev_end = -1, None
    for off in offsets:
        if off is None:
            out.append(None)
            prev_end = None
            continue
        start, end = off
        if prev_end is None or start > prev_end or (start < len(text) and text[start].isspace()):
            word += 1
        out.append(word)
        prev_end = end
    return out


def _encode_one(tokenizer: Any, item: TextItem, causal: bool, max_length: int,
                cats: dict[int, str], seq: int) -> EncodedSeq:
    if causal:
        text = item.text_a if item.text_b is None else item.text_a + " " + item.text_b
        enc = tokenizer(text, truncation=True, max_length=max_length,
                        return_offsets_mapping=True, return_special_tokens_mask=True)
    else:
        text = item.text_a if item.text_b is None else item.text_a + "\n" + item.text_b
        enc = tokenizer(item.text_a, item.text_b,
                        truncation="longest_first" if item.text_b is not None else True,
                        max_length=max_length, return_offsets_mapping=True,
                        return_special_tokens_mask=True)
    ids = list(enc["input_ids"])
    full = len(ids)
    if full >= max_length:  # perhaps cut: its length uncut (verbose=False: no "longer than the maximum" warning)
        args = (text,) if causal else (item.text_a, item.text_b)
        full = len(tokenizer(*args, verbose=False)["input_ids"])
    special = [bool(s) for s in enc["special_tokens_mask"]]
    raw_offsets = list(enc["offset_mapping"])
    tt = enc.get("token_type_ids")
    token_type_ids = list(tt) if tt is not None and "token_type_ids" in tokenizer.model_input_names else None
    try:
        seq_ids = enc.sequence_ids()
        tok_words = enc.word_ids()
    except (ValueError, AttributeError):  # slow tokenizer: no alignment info
        seq_ids = [None if s else 0 for s in special]
        tok_words = [None] * len(ids)

    shift_b = len(item.text_a) + 1
    offsets: list[tuple[int, int] | None] = []
    for k, (s, off) in enumerate(zip(seq_ids, raw_offsets)):
        if special[k] or s is None:
            offsets.append(None)
        elif s == 1 and not causal:
            offsets.append((int(off[0]) + shift_b, int(off[1]) + shift_b))
        else:
            offsets.append((int(off[0]), int(off[1])))

    offsets = [None if o is None else _trim(o, text) for o in offsets]

    # word ids: the tokenizer's pre-token words when complete, else offsets-based words
    if all(w is not None for w, sp, s in zip(tok_words, special, seq_ids) if not sp and s is not None):
        n_a = 1 + max((w for w, s in zip(tok_words, seq_ids) if s == 0 and w is not None), default=-1)
        word_ids: list[int | None] = [
            None if (special[k] or s is None) else (w + n_a if s == 1 else w)
            for k, (w, s) in enumerate(zip(tok_words, seq_ids))
        ]
    else:
        word_ids = _words_from_offsets(offsets, text)

    bos = tokenizer.bos_token_id
    if causal and bos is not None and (not ids or ids[0] != bos):
        full += 1
        ids = [bos] + ids[: max_length - 1]
        keep = len(ids) - 1
        special = [True] + special[:keep]
        offsets = [None] + offsets[:keep]
        word_ids = [None] + word_ids[:keep]
        token_type_ids = None if token_type_ids is None else [0] + token_type_ids[:keep]

    category = [cats.get(i, NORMAL) if sp else NORMAL for i, sp in zip(ids, special)]
    return EncodedSeq(
        input_ids=ids, token_type_ids=token_type_ids,
        tokens=list(tokenizer.convert_ids_to_tokens(ids)), special=special,
        masked=[False] * len(ids), category=category, word_ids=word_ids, offsets=offsets,
        text=text, item_id=item.id, seq=seq, full_length=full,
    )


def apply_mask(encoded: list[EncodedSeq], tokenizer: Any, *, rate: float = K21_MASK_RATE,
               seed: int = 0) -> None:
    """Mask ``max(1, round(rate * n_nonspecial))`` non-special tokens per sequence, in place.

    One ``random.Random(seed)`` serves the whole list in order, so the result is deterministic.

    Args:
        encoded: Sequences to mask (modified in place).
        tokenizer: Supplies the mask token.
        rate: Fraction of non-special tokens to mask.
        seed: Seed of the shared generator.

    Raises:
        DataError: If the tokenizer has no mask token.
    """
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise DataError(
            f"tokenizer {type(tokenizer).__name__} has no mask token, so mask_rate={rate} cannot "
            "be applied; use mask_rate=0 (causal models are analysed unmasked)"
        )
    mask_tok = tokenizer.convert_ids_to_tokens(mask_id)
    rng = random.Random(seed)
    for e in encoded:
        positions = [k for k, sp in enumerate(e.special) if not sp]
        if not positions:
            continue
        k = min(len(positions), max(1, round(rate * len(positions))))
        for p in sorted(rng.sample(positions, k)):
            e.input_ids[p] = mask_id
            e.tokens[p] = mask_tok
            e.masked[p] = True
            e.category[p] = MASK


def encode(eval_set: EvalSet, tokenizer: Any, *, causal: bool, max_length: int = 128,
           mask_rate: float = 0.0, mask_seed: int = 0) -> list[EncodedSeq]:
    """Tokenize every item of a set for one model.

    Args:
        eval_set: The evaluation set.
        tokenizer: A Hugging Face tokenizer (fast tokenizers give offsets and word ids).
        causal: ``True`` for decoder-only models (plain text, BOS prepended if missing).
        max_length: Maximum sequence length in tokens, specials included.
        mask_rate: K21 masking rate (0 = no masking; K21 used 0.12).
        mask_seed: Seed of the one generator shared across the set.

    Returns:
        One :class:`EncodedSeq` per item, in set order.

    Raises:
        DataError: If masking is requested and the tokenizer has no mask token, or the set is
            empty.
    """
    if not eval_set.items:
        raise DataError(f"dataset {shown(eval_set.id)} is empty; nothing to encode")
    if mask_rate > 0 and tokenizer.mask_token_id is None:
        apply_mask([], tokenizer, rate=mask_rate)  # raises the DataError
    cats = _special_categories(tokenizer, causal)
    out = [_encode_one(tokenizer, item, causal, max_length, cats, k)
           for k, item in enumerate(eval_set.items)]
    if mask_rate > 0:
        apply_mask(out, tokenizer, rate=mask_rate, seed=mask_seed)
    return out


def mean_tokens(encoded: list[EncodedSeq]) -> float:
    """Mean sequence length in tokens (specials included); 0.0 for an empty list."""
    return mean_tokens_of(sum(len(e.input_ids) for e in encoded), len(encoded))


def mean_tokens_of(n_tokens: int, n_seqs: int) -> float:
    """`mean_tokens` from the counts (tokens over sequences, exact integer sums; 0.0 for no sequence)."""
    return n_tokens / n_seqs if n_seqs else 0.0
