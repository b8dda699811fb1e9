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


def test_control_characters_are_shown_never_kept():
    """A data file's ESC, BEL, NUL, CR, DEL, C1 control or noncharacter reaches byte-level BPE tokens as
    the character itself; the display form shows it (SVG cannot hold it: the chart renderer aborted)."""
    byte = {b: c for c, b in T._byte_alphabet().items()}
    raw = "".join(byte[b] for b in "a\x1b[31m\x07\x00\r\x7f".encode()) + "".join(byte[b] for b in "\u0085\ufffe".encode())
    assert T.token_style([raw, "Ġthe"]) == T.BYTE_BPE
    shown = T.display_token(raw, T.BYTE_BPE)
    assert shown == "a<0x1B>[31m<0x07><0x00><0x0D><0x7F><U+0085><U+FFFE>"
    assert T.display_token("x\x1by\u2028", T.PLAIN) == "x<0x1B>y\u2028"
    assert T.display_token("<|x\x07|>", T.PLAIN) == "<|x<0x07>|>"
    assert T.display_token("".join(byte[b] for b in " naïve".encode()), T.BYTE_BPE) == "▁naïve"  # other text kept


def test_figures_show_a_data_files_control_characters():
    """K24's top pairs and maps of a data file holding ESC, BS, NUL: the tokens, the text around them and the
    example's label reach charts without them (the static SVG renderer aborted the build: rc 134)."""
    import pandas as pd

    from report_builder.figures.display import display_tables

    byte = {b: c for c, b in T._byte_alphabet().items()}
    esc, nul = byte[0x1B], byte[0x00]
    pairs = pd.DataFrame({"model": ["m", "m"], "layer": [0, 0], "seq": [0, 0], "i": [2, 3], "j": [1, 2],
                          "token_i": [esc, "Ġgood"], "token_j": ["Ġfilm", nul],
                          "context": ["the ⟦film⟧ \x1b[31m\x08", "a ⟦good\x00⟧ film \x7f"]})
    maps = pd.DataFrame({"model": ["m"], "example": ["2: the film \x1b[31mred …"], "layer": [0], "scope": ["ATB"],
                         "i": [1], "j": [0], "token_i": [esc], "token_j": ["Ġthe"], "value": [0.5]})
    out = display_tables({"k24_ffamp_pairs": pairs, "k24_maps": maps})
    cells = [v for name in out for col in out[name].columns if not col.endswith("_raw")
             for v in out[name][col] if isinstance(v, str)]
    assert not [v for v in cells if not v.isprintable()], cells
    assert list(out["k24_ffamp_pairs"]["context"]) == ["the ⟦film⟧ <0x1B>[31m<0x08>", "a ⟦good<0x00>⟧ film <0x7F>"]
    assert out["k24_maps"]["example"][0] == "2: the film <0x1B>[31mred …"
    assert list(out["k24_ffamp_pairs"]["token_i"]) == ["<0x1B>", "▁good"]


def test_invisible_and_combining_tokens_get_a_visible_label():
    """SmolLM2's vocabulary holds tokens that are one variation selector (``ï¸ı``: U+FE0F, after "❤" in
    "❤️") or one combining mark (``Ùĳ``: the Arabic shadda): their labels were invisible ("12:") or fused
    with the label's colon; a bidirectional override in a token or a data file's text (an example's label,
    a top pair's context) reversed what follows it on the page. Shown as ``<U+FE0F>``, ``◌ّ``, ``<U+202E>``."""
    assert T.display_token("ï¸ı", T.BYTE_BPE) == "<U+FE0F>"
    assert T.display_token("Ùĳ", T.BYTE_BPE) == "◌\u0651"
    assert T.display_token("##\u0651", T.WORDPIECE) == "##◌\u0651"
    assert T.display_token("\u202egnirts", T.PLAIN) == "<U+202E>gnirts"
    assert T.display_token("a\u200db\u200b\ufeff", T.SENTENCEPIECE) == "a<U+200D>b<U+200B><U+FEFF>"
    assert T.visible_controls("rtl \u202egnirts\u202c here") == "rtl <U+202E>gnirts<U+202C> here"
    assert T.display_token("caf\u00e9 e\u0301 \u05e9\u05c1", T.PLAIN) == "caf\u00e9▁e\u0301▁\u05e9\u05c1"  # marks on a letter kept
