"""Tiny randomly initialised models of every supported family, built from configs (no hub).

`TINY` is the one table: a family's tiny model is one entry (its HF classes and config). The tests
generated from it (every adapter x every scope exact against the HF forward, tests/models and
tests/test_layouts.py) read `FAMILIES`, `LAYOUT_FAMILIES` and `CLASS_OF`, which are views of `TINY`.
Adding a family is one entry here (a test fails while a registered class has none).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import BertConfig, BertModel, LlamaConfig, LlamaModel

from report_builder.models.loading import from_model


@dataclass(frozen=True)
class Tiny:
    """One tiny model.

    Attributes:
        model, config: the HF base-model and config class names (attributes of ``transformers``).
        kwargs: the config's keyword arguments (``attn_implementation`` is added by `tiny`).
        layouts: a family added for SPEC §7 (tests/test_layouts.py): its norms' weights are moved away
            from 1 after initialisation (Gemma's ``1 + w`` must be read right).
    """

    model: str
    config: str
    kwargs: dict
    layouts: bool = False


_SIZES = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64)
_GEMMA = dict(_SIZES, num_key_value_heads=2, head_dim=8, sliding_window=4, attn_logit_softcapping=5.0,
              query_pre_attn_scalar=8, pad_token_id=0)
_OPT = dict(vocab_size=120, hidden_size=32, word_embed_proj_dim=32, num_hidden_layers=2, num_attention_heads=4,
            ffn_dim=64, max_position_embeddings=64, dropout=0.0, pad_token_id=1)
_NEOX = dict(_SIZES, rotary_pct=0.5, hidden_dropout=0.0, attention_dropout=0.0)

TINY: dict[str, Tiny] = {
    "bert": Tiny("BertModel", "BertConfig", dict(
        vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    "roberta": Tiny("RobertaModel", "RobertaConfig", dict(
        vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=66, pad_token_id=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    # embedding size != hidden size: ELECTRA projects the embeddings
    "electra": Tiny("ElectraModel", "ElectraConfig", dict(
        vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
    "gpt2": Tiny("GPT2Model", "GPT2Config", dict(
        vocab_size=120, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0)),
    "llama": Tiny("LlamaModel", "LlamaConfig", dict(
        vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=64)),
    # the layouts and families of SPEC §7
    "distilbert": Tiny("DistilBertModel", "DistilBertConfig", dict(
        vocab_size=120, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, dropout=0.0,
        attention_dropout=0.0), layouts=True),
    "opt": Tiny("OPTModel", "OPTConfig", dict(_OPT, do_layer_norm_before=True), layouts=True),
    "opt-post": Tiny("OPTModel", "OPTConfig", dict(_OPT, do_layer_norm_before=False), layouts=True),
    "neox": Tiny("GPTNeoXModel", "GPTNeoXConfig", dict(_NEOX, use_parallel_residual=True), layouts=True),
    "neox-seq": Tiny("GPTNeoXModel", "GPTNeoXConfig", dict(_NEOX, use_parallel_residual=False), layouts=True),
    "phi": Tiny("PhiModel", "PhiConfig", dict(_SIZES, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
                                              partial_rotary_factor=0.5), layouts=True),
    "mistral": Tiny("MistralModel", "MistralConfig", dict(_SIZES, num_key_value_heads=2, sliding_window=4),
                    layouts=True),
    # fused qkv_proj and gate_up_proj; partial rotary only changes the probabilities
    "phi3": Tiny("Phi3Model", "Phi3Config", dict(_SIZES, num_key_value_heads=2, pad_token_id=0,
                                                 partial_rotary_factor=0.5, resid_pdrop=0.0), layouts=True),
    "qwen2": Tiny("Qwen2Model", "Qwen2Config", dict(_SIZES, num_key_value_heads=2), layouts=True),
    "xlm-roberta": Tiny("XLMRobertaModel", "XLMRobertaConfig", dict(
        _SIZES, max_position_embeddings=66, pad_token_id=1, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), layouts=True),
    "qwen3": Tiny("Qwen3Model", "Qwen3Config", dict(_SIZES, num_key_value_heads=2, head_dim=8), layouts=True),
    "granite": Tiny("GraniteModel", "GraniteConfig", dict(
        _SIZES, num_key_value_heads=2, residual_multiplier=0.4, embedding_multiplier=6.0,
        attention_multiplier=0.2), layouts=True),
    "gemma": Tiny("GemmaModel", "GemmaConfig", {k: v for k, v in _GEMMA.items()
                                                if k not in ("sliding_window", "attn_logit_softcapping",
                                                             "query_pre_attn_scalar")}, layouts=True),
    "gemma2": Tiny("Gemma2Model", "Gemma2Config", _GEMMA, layouts=True),
    "gemma3": Tiny("Gemma3TextModel", "Gemma3TextConfig",
                   dict(_GEMMA, layer_types=["sliding_attention", "full_attention"]), layouts=True),
}
"""Family -> its tiny model (every registered adapter class has at least one entry)."""

FAMILIES = tuple(k for k, t in TINY.items() if not t.layouts)
"""The first five families (post-/pre-LN, checked against the naive oracle in tests/decompose)."""
LAYOUT_FAMILIES = tuple(k for k, t in TINY.items() if t.layouts)
"""Families added for SPEC §7 (tests/test_layouts.py)."""
CLASS_OF = {k: t.model for k, t in TINY.items()}
"""Family -> its HF base-model class name."""


def tiny(family: str, seed: int = 0, attn_implementation: str = "eager"):
    """A `LoadedModel` wrapping a tiny random model of ``family`` (a key of `TINY`)."""
    import transformers as tr

    if family not in TINY:
        raise ValueError(family)
    t = TINY[family]
    torch.manual_seed(seed)
    m = getattr(tr, t.model)(getattr(tr, t.config)(**t.kwargs, attn_implementation=attn_implementation))
    # larger random weights make activations leave GELU/SiLU's linear region (a real test of IG)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 2 and "embed" not in n and "wte" not in n and "wpe" not in n:
                p.mul_(3.0)
        if t.layouts:  # norms away from 1 (Gemma's 1 + w must be read right)
            for n, p in m.named_parameters():
                if p.dim() == 1 and "norm" in n and "weight" in n:
                    p.add_(0.3 * torch.randn_like(p))
    return from_model(m.eval(), None, name=f"tiny-{family}")


def _tokenizer_dir(kind: str):
    """A real tokenizer for a tiny saved model: MiniLM's (WordPiece) for encoders, SmolLM2's (BPE) for
    causal models (both embedded; SmolLM2's is converted once from its GGUF)."""
    from pathlib import Path

    from report_builder.models.sources import embedded_dir

    return Path(embedded_dir("minilm" if kind in ("bert", "roberta", "electra") else "smollm2"))


def save_tiny(kind: str, path, seed: int = 0, layers: int = 2):
    """Save a tiny random model of ``kind`` (bert or llama, ``layers`` deep) with a real tokenizer to
    ``path``; returns it.

    The vocabulary matches the tokenizer's, so the directory loads like a real checkpoint.
    """
    import shutil
    from pathlib import Path

    path = Path(path)
    tok = _tokenizer_dir(kind)
    torch.manual_seed(seed)
    if kind == "bert":
        m = BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=128))
    elif kind == "llama":
        m = LlamaModel(LlamaConfig(vocab_size=49152, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                                   bos_token_id=1, eos_token_id=2))
    else:
        raise ValueError(kind)
    m.save_pretrained(path)
    for f in tok.iterdir():
        if f.name.startswith(("tokenizer", "vocab", "special_tokens", "merges")):
            shutil.copy(f, path / f.name)
    return path
