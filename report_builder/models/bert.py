"""BERT family (post-LN): BERT, RoBERTa, ELECTRA, MiniLM (BertModel) — one adapter.

Pitfall: ELECTRA may project embeddings (embedding size != hidden size); the layers are unaffected.
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, bias_of, linear_w
from report_builder.schema import POST_LN


def _layers(model):
    return list(model.encoder.layer)


def _ln(m) -> NormWeights:
    return NormWeights("LayerNorm", m.weight.detach(), bias_of(m), float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    layer = _layers(model)[idx]
    cfg = model.config
    sa, so = layer.attention.self, layer.attention.output
    h = cfg.num_attention_heads
    dh = cfg.hidden_size // h
    act = cfg.hidden_act if isinstance(cfg.hidden_act, str) else "gelu"
    return LayerWeights(
        layout=POST_LN,
        attn=AttentionWeights(linear_w(sa.value), bias_of(sa.value), linear_w(so.dense), bias_of(so.dense), h, h, dh),
        ln1=_ln(so.LayerNorm),
        ln2=_ln(layer.output.LayerNorm),
        ff=FFWeights(act, False, linear_w(layer.intermediate.dense), bias_of(layer.intermediate.dense),
                     linear_w(layer.output.dense), bias_of(layer.output.dense)),
    )


def _facts(cfg) -> dict:
    return {
        "norm": "LayerNorm", "activation": cfg.hidden_act, "gated": False,
        "d_model": cfg.hidden_size, "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
        "kv_heads": cfg.num_attention_heads, "ff_size": cfg.intermediate_size,
    }


def _max_positions(cfg) -> int:
    n = cfg.max_position_embeddings
    # RoBERTa reserves padding_idx + 1 positions
    return n - (cfg.pad_token_id + 1) if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta") else n


ADAPTER = Adapter(
    family="bert",
    class_names=("BertModel", "RobertaModel", "ElectraModel", "XLMRobertaModel"),
    model_types=("bert", "roberta", "electra", "xlm-roberta"),
    layout=POST_LN,
    causal=False,
    layers=_layers,
    attention="attention.self",
    weights=_weights,
    probes={
        "ATTN": Probe("attention.output.dense", "out"),
        "ATTNRES": Probe("attention.output.LayerNorm", "in"),
        "ATB": Probe("attention.output.LayerNorm", "out"),
        "ATBFF": Probe("output.dense", "out"),
        "ATBFFRES": Probe("output.LayerNorm", "in"),
        "ATBFFRESLN": Probe("", "out"),
    },
    facts=_facts,
    max_positions=_max_positions,
    submodules=frozenset({"attention", "intermediate", "output"}),
)
