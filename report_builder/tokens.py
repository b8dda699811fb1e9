"""Token strings as a reader should see them: byte-level BPE decoded, spaces visible, specials named.

Tokenizers store tokens in their own alphabets: byte-level BPE (GPT-2, RoBERTa, SmolLM2) writes each
byte as a printable stand-in (a leading space is ``Ġ``, a newline ``Ċ``, the UTF-8 bytes of an en
dash ``âĢĵ``); WordPiece (BERT) marks word continuations with ``##``; SentencePiece (Llama 2, T5)
marks a word start with ``▁``. For display every style is shown the same way: a word-initial space
is the visible marker ``▁`` (as SentencePiece does), WordPiece ``##`` is kept, bytes that are not a
whole UTF-8 character are written ``<0xE2>`` (SentencePiece's byte-fallback form), and so is a control
character (``<0x1B>`` for ESC; ``<U+0085>``, ``<U+FFFE>`` above ASCII for C1 controls, lone surrogates and
noncharacters): a data file's text reaches tokens unfiltered, and SVG, XML and the terminal cannot hold
those characters (the chart renderer aborts on one; `values.plain_text` refuses them in configured text).
Invisible characters (zero-width joiner, bidirectional overrides, byte order mark, variation selectors) are
written ``<U+200D>`` too (a blank label, or the text after it reversed), and a token that starts with a
combining mark is shown on a dotted circle (``◌ّ``), so that it does not join the ``:`` of its label.

Special tokens are named by the role they play for the model: a causal model's first special token
is ``BOS`` (not ``[CLS]``, which is K21's category name for it); an encoder's keep their own strings.

Pitfall: the style is a property of the tokenizer, not of one token; decide it once per model from
all of its tokens with :func:`token_style` (a WordPiece token like ``Ã©`` must not be "decoded").
The raw strings are never replaced in result tables; figures show both (``token`` and ``token_raw``).

No torch, no rendering imports: both compute and figures may use this module.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

SPACE_MARK = "▁"
NEWLINE_MARK = "↵"
TAB_MARK = "⇥"
BOS = "BOS"

BYTE_BPE = "byte-level BPE"
WORDPIECE = "WordPiece"
SENTENCEPIECE = "SentencePiece"
PLAIN = "plain"
STYLES = (BYTE_BPE, WORDPIECE, SENTENCEPIECE, PLAIN)

_SPECIAL = re.compile(r"^(\[[A-Z]+\]|<\|[^|<>]+\|>|</?[a-z_]+>)$")


@lru_cache(maxsize=1)
def _byte_alphabet() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: stand-in character -> byte value."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars = list(keep)
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}


def is_special(token: str) -> bool:
    """Whether a token string has the shape of a special token (``[CLS]``, ``<s>``, ``<|im_start|>``)."""
    return bool(_SPECIAL.match(token))


def token_style(tokens: Iterable[str]) -> str:
    """The tokenizer style of one model, judged from (a sample of) its token strings.

    Byte-level BPE when every non-special token is written in the byte alphabet and some token uses
    a stand-in character (``Ġ``, ``Ċ``, ...); SentencePiece when some token starts with ``▁``;
    WordPiece when some token starts with ``##``; otherwise plain.
    """
    alphabet = _byte_alphabet()
    in_alphabet, shifted, sp, wp = True, False, False, False
    for t in tokens:
        if not isinstance(t, str) or is_special(t):
            continue
        if t.startswith(SPACE_MARK):
            sp = True
        if t.startswith("##") and len(t) > 2:
            wp = True
        for ch in t:
            if ch not in alphabet:
                in_alphabet = False
            elif ord(ch) >= 256:
                shifted = True
    if in_alphabet and shifted:
        return BYTE_BPE
    if sp:
        return SENTENCEPIECE
    if wp:
        return WORDPIECE
    return PLAIN


def _visible(text: str) -> str:
    return visible_controls(text.replace(" ", SPACE_MARK).replace("\n", NEWLINE_MARK).replace("\t", TAB_MARK))


@lru_cache(maxsize=1 << 16)
def visible_controls(text: str) -> str:
    """``text`` with each control character, lone surrogate, noncharacter and invisible format character
    (zero-width joiner and space, bidirectional overrides and isolates, byte order mark, variation selector)
    in its visible form (``<0x1B>``, ``<U+FFFE>``, ``<U+202E>``): what a token or a snippet of a data file's
    text is shown as. An invisible one would leave a label blank, and a bidirectional override would reverse
    what follows it on the page."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(map(_control_mark, text))


_INVISIBLE = ((0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xE0100, 0xE01EF))
"""Invisible characters besides the format characters (category Cf): Unicode's default-ignorable
combining grapheme joiner, fillers and variation selectors."""


@lru_cache(maxsize=1 << 14)
def _control_mark(c: str) -> str:
    """``c``, or its visible form when it is a control character, a lone surrogate, a noncharacter or
    invisible (a format character, a variation selector). Cached, like `visible_controls`: a table's
    tokens repeat, and a byte-level BPE's (``Ġthe``) are never plain ASCII."""
    import unicodedata

    o = ord(c)
    if (unicodedata.category(c) in ("Cc", "Cs", "Cf") or 0xFDD0 <= o <= 0xFDEF or (o & 0xFFFE) == 0xFFFE
            or any(lo <= o <= hi for lo, hi in _INVISIBLE)):
        return f"<0x{o:02X}>" if o < 0x80 else f"<U+{o:04X}>"
    return c


DOTTED_CIRCLE = "\u25cc"
"""The base a token that starts with a combining mark is shown on (``◌ّ``), as Unicode's charts show a lone mark:
without one the mark joins the character before it (the ``:`` of a ``pos:token`` label)."""


def _on_a_base(shown: str) -> str:
    """``shown`` with a dotted circle before a leading combining mark (after WordPiece's ``##``)."""
    import unicodedata

    head = 2 if shown.startswith("##") and len(shown) > 2 else 0
    if shown[head:head + 1] and unicodedata.category(shown[head]).startswith("M"):
        return shown[:head] + DOTTED_CIRCLE + shown[head:]
    return shown


def _decode_bytes(data: bytes) -> str:
    """UTF-8 text of ``data``; bytes that are not part of a whole character become ``<0xNN>``."""
    out, k = [], 0
    while k < len(data):
        for width in (1, 2, 3, 4):
            try:
                out.append(data[k:k + width].decode("utf-8"))
                k += width
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"<0x{data[k]:02X}>")
            k += 1
    return "".join(out)


def display_token(token: str, style: str, *, causal: bool = False, first: bool = False) -> str:
    """The display form of one token.

    Args:
        token: the tokenizer's raw token string.
        style: the model's :func:`token_style`.
        causal: whether the model is causal (its leading special token is shown as ``BOS``).
        first: whether the token is at position 0 of its sequence.
    """
    if not isinstance(token, str):
        return token
    if is_special(token):
        return BOS if causal and first else visible_controls(token)
    if style == BYTE_BPE:
        alphabet = _byte_alphabet()
        if all(ch in alphabet for ch in token):
            return _on_a_base(_visible(_decode_bytes(bytes(alphabet[ch] for ch in token))))
    return _on_a_base(_visible(token))


def display_tokens(tokens: Iterable[str], style: str | None = None, *, causal: bool = False,
                   positions: Iterable[int] | None = None) -> list[str]:
    """Display forms of many tokens of one model (style judged from them when not given)."""
    toks = list(tokens)
    style = style or token_style(toks)
    pos = list(positions) if positions is not None else [None] * len(toks)
    return [display_token(t, style, causal=causal, first=p == 0) for t, p in zip(toks, pos)]


def category_label(category: str, causal: bool) -> str:
    """K21 token category as shown for a model: a causal model's ``[CLS]`` category is its BOS token."""
    return BOS if causal and category == "[CLS]" else category
