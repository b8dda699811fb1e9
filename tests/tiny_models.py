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
    else:
        raise ValueError(family)
    # larger random weights make activations leave GELU/SiLU's linear region (a real test of IG)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 2 and "embed" not in n and "wte" not in n and "wpe" not in n:
                p.mul_(3.0)
    return from_model(m.eval(), None, name=f"tiny-{family}")


FAMILIES = ("bert", "roberta", "electra", "gpt2", "llama")
