"""Phi (Phi-1, Phi-1.5, Phi-2): parallel attention + FF reading one shared LayerNorm.

y = x + ATTN(N(x)) + FF(N(x)). Partial rotary embeddings and the optional q/k LayerNorms only change
the attention probabilities. Pitfall: both branches read the same norm, so N1 = N2.
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, bias_of, head_dims, linear_w
from report_builder.schema import PARALLEL


def _layers(model):
    return list(model.layers)


def _ln(m) -> NormWeights:
    return NormWeights("LayerNorm", m.weight.detach(), bias_of(m), float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    layers = _layers(model)
    layer = layers[idx]
    cfg = model.config
    h, kv, dh = head_dims(cfg)
    at = layer.self_attn
    nxt = _ln(layers[idx + 1].input_layernorm) if idx + 1 < len(layers) else _ln(model.final_layernorm)
    norm = _ln(layer.input_layernorm)
    return LayerWeights(
        layout=PARALLEL,
        attn=AttentionWeights(linear_w(at.v_proj), bias_of(at.v_proj), linear_w(at.dense), bias_of(at.dense), h, kv, dh),
        ln1=norm,
        ln2=norm,
        ff=FFWeights(cfg.hidden_act, False, linear_w(layer.mlp.fc1), bias_of(layer.mlp.fc1),
                     linear_w(layer.mlp.fc2), bias_of(layer.mlp.fc2)),
        next_norm=nxt,
    )


def _facts(cfg) -> dict:
    return {
        "norm": "LayerNorm", "activation": cfg.hidden_act, "gated": False,
        "d_model": cfg.hidden_size, "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
        "kv_heads": getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads,
        "ff_size": cfg.intermediate_size,
    }


ADAPTER = Adapter(
    family="phi",
    class_names=("PhiModel",),
    model_types=("phi",),
    layout=PARALLEL,
    layers=_layers,
    attention="self_attn",
    weights=_weights,
    probes={
        "LN1": Probe("input_layernorm", "out"),
        "ATTN": Probe("self_attn", "out"),
        "LN2": Probe("input_layernorm", "out"),
        "FF": Probe("mlp", "out"),
        "ATBPFF": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.max_position_embeddings,
    submodules=frozenset({"self_attn", "mlp", "input_layernorm"}),
    causal=True,
)
