"""Display forms of tokens (report_builder/tokens.py) against the tokenizers library's own byte decoder."""
from __future__ import annotations

import pytest

from report_builder import tokens as T


def test_byte_alphabet_is_gpt2s():
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    assert T._byte_alphabet() == {c: b for b, c in bytes_to_unicode().items()}


@pytest.mark.parametrize("text", ["The man went to the store.", " naïve café – “quoted” 東京", "a\nb\tc  d"])
def test_byte_level_tokens_decode_like_the_tokenizer(text):
    from tokenizers import decoders, pre_tokenizers

    pieces = [p for p, _ in pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(text)]
    assert T.token_style(pieces) == T.BYTE_BPE
    shown = T.display_tokens(pieces)
    assert "".join(shown) == T._visible(decoders.ByteLevel().decode(pieces))
    assert not any(ch in s for s in shown for ch in "ĠĊâ")


def test_partial_utf8_bytes_and_markers():
    assert T.display_token("âĢĵ", T.BYTE_BPE) == "–"
    assert T.display_token("âĢ", T.BYTE_BPE) == "<0xE2><0x80>"
    assert T.display_token("Ġman", T.BYTE_BPE) == "▁man"
    assert T.display_token("Ċ", T.BYTE_BPE) == "↵"


def test_styles_and_specials():
    assert T.token_style(["[CLS]", "ana", "##rch", "##ism", "[SEP]"]) == T.WORDPIECE
    assert T.token_style(["<s>", "▁The", "▁man"]) == T.SENTENCEPIECE
    assert T.token_style(["the", "man"]) == T.PLAIN
    # WordPiece keeps its ## and its non-ASCII characters (never "decoded" as bytes)
    assert T.display_tokens(["[CLS]", "caf", "##é", "Ã©"]) == ["[CLS]", "caf", "##é", "Ã©"]
    # a causal model's leading special token is its BOS; an encoder's [CLS] keeps its name
    assert T.display_tokens(["<|im_start|>", "An", "Ġis"], causal=True, positions=[0, 1, 2]) == ["BOS", "An", "▁is"]
    assert T.display_tokens(["[CLS]", "is"], causal=False, positions=[0, 1]) == ["[CLS]", "is"]
    assert T.category_label("[CLS]", causal=True) == "BOS"
    assert T.category_label("[CLS]", causal=False) == "[CLS]"
