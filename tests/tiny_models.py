"""Tiny randomly initialised models of every supported family, built from configs (no hub)."""
from __future__ import annotations

import torch
from transformers import (BertConfig, BertModel, ElectraConfig, ElectraModel, GPT2Config, GPT2Model, LlamaConfig,
                          LlamaModel, RobertaConfig, RobertaModel)

from report_builder.models.loading import from_model

COMMON = dict(attn_implementation="eager")


def tiny(family: str, seed: int = 0, attn_implementation: str = "eager"):
    """A `LoadedModel` wrapping a tiny random model of ``family`` (bert, roberta, gpt2, llama)."""
    torch.manual_seed(seed)
    kw = dict(attn_implementation=attn_implementation)
    if family == "bert":
        m = BertModel(BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0, **kw))
    elif family == "roberta":
        m = RobertaModel(RobertaConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=66, pad_token_id=1,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw))
    elif family == "electra":  # embedding size != hidden size: ELECTRA projects the embeddings
        m = ElectraModel(ElectraConfig(vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw))
    elif family == "gpt2":
        m = GPT2Model(GPT2Config(vocab_size=120, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **kw))
    elif family == "llama":
        m = LlamaModel(LlamaConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64, **kw))
    elif family in LAYOUT_FAMILIES:
        m = _layout_model(family, kw)
    else:
        raise ValueError(family)
    # larger random weights make activations leave GELU/SiLU's linear region (a real test of IG)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 2 and "embed" not in n and "wte" not in n and "wpe" not in n:
                p.mul_(3.0)
        if family in LAYOUT_FAMILIES:  # norms away from 1 (Gemma's 1 + w must be read right)
            for n, p in m.named_parameters():
                if p.dim() == 1 and "norm" in n and "weight" in n:
                    p.add_(0.3 * torch.randn_like(p))
    return from_model(m.eval(), None, name=f"tiny-{family}")


FAMILIES = ("bert", "roberta", "electra", "gpt2", "llama")

_SIZES = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64)
_GEMMA = dict(_SIZES, num_key_value_heads=2, head_dim=8, sliding_window=4, attn_logit_softcapping=5.0,
              query_pre_attn_scalar=8, pad_token_id=0)


def _layout_model(family: str, kw: dict):
    """Tiny models of the layouts and families beyond the first five (SPEC §7)."""
    import transformers as tr

    if family == "distilbert":
        return tr.DistilBertModel(tr.DistilBertConfig(vocab_size=120, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                      max_position_embeddings=64, dropout=0.0,
                                                      attention_dropout=0.0, **kw))
    if family in ("opt", "opt-post"):
        return tr.OPTModel(tr.OPTConfig(vocab_size=120, hidden_size=32, word_embed_proj_dim=32, num_hidden_layers=2,
                                        num_attention_heads=4, ffn_dim=64, max_position_embeddings=64, dropout=0.0,
                                        do_layer_norm_before=family == "opt", pad_token_id=1, **kw))
    if family in ("neox", "neox-seq"):
        return tr.GPTNeoXModel(tr.GPTNeoXConfig(**_SIZES, use_parallel_residual=family == "neox",
                                                rotary_pct=0.5, hidden_dropout=0.0, attention_dropout=0.0, **kw))
    if family == "phi":
        return tr.PhiModel(tr.PhiConfig(**_SIZES, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
                                        partial_rotary_factor=0.5, **kw))
    if family == "mistral":
        return tr.MistralModel(tr.MistralConfig(**_SIZES, num_key_value_heads=2, sliding_window=4, **kw))
    if family == "qwen2":
        return tr.Qwen2Model(tr.Qwen2Config(**_SIZES, num_key_value_heads=2, **kw))
    if family == "xlm-roberta":
        return tr.XLMRobertaModel(tr.XLMRobertaConfig(**dict(_SIZES, max_position_embeddings=66), pad_token_id=1,
                                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw))
    if family == "qwen3":
        return tr.Qwen3Model(tr.Qwen3Config(**_SIZES, num_key_value_heads=2, head_dim=8, **kw))
    if family == "granite":
        return tr.GraniteModel(tr.GraniteConfig(**_SIZES, num_key_value_heads=2, residual_multiplier=0.4,
                                                embedding_multiplier=6.0, attention_multiplier=0.2, **kw))
    if family == "gemma":
        return tr.GemmaModel(tr.GemmaConfig(**{k: v for k, v in _GEMMA.items()
                                              if k not in ("sliding_window", "attn_logit_softcapping",
                                                           "query_pre_attn_scalar")}, **kw))
    if family == "gemma2":
        return tr.Gemma2Model(tr.Gemma2Config(**_GEMMA, **kw))
    if family == "gemma3":
        return tr.Gemma3TextModel(tr.Gemma3TextConfig(**_GEMMA, layer_types=["sliding_attention", "full_attention"],
                                                      **kw))
    raise ValueError(family)


LAYOUT_FAMILIES = ("distilbert", "opt", "opt-post", "neox", "neox-seq", "phi", "mistral", "qwen2", "xlm-roberta",
                   "qwen3", "granite", "gemma", "gemma2", "gemma3")
"""Families added for SPEC §7 (every registered adapter class has at least one tiny model)."""
CLASS_OF = {"mistral": "MistralModel", "qwen2": "Qwen2Model", "xlm-roberta": "XLMRobertaModel",
            "distilbert": "DistilBertModel", "opt": "OPTModel", "opt-post": "OPTModel", "neox": "GPTNeoXModel",
            "neox-seq": "GPTNeoXModel", "phi": "PhiModel", "qwen3": "Qwen3Model", "granite": "GraniteModel",
            "gemma": "GemmaModel", "gemma2": "Gemma2Model", "gemma3": "Gemma3TextModel", "bert": "BertModel",
            "roberta": "RobertaModel", "electra": "ElectraModel", "gpt2": "GPT2Model", "llama": "LlamaModel"}


def _tokenizer_dir(kind: str):
    """A real tokenizer for a tiny saved model: MiniLM's (WordPiece) for encoders, SmolLM2's (BPE) for
    causal models (both embedded; SmolLM2's is converted once from its GGUF)."""
    from pathlib import Path

    from report_builder.models.loading import _resolve

    return Path(_resolve("minilm" if kind in ("bert", "roberta", "electra") else "smollm2")[0])


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
