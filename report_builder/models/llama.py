"""Llama family (pre-LN, RMSNorm, SwiGLU, grouped-query attention, RoPE): Llama, SmolLM2, Mistral, Qwen2,
Qwen3 (q/k norms); Granite reuses it with its residual multiplier (granite.py).

RoPE, sliding windows and Qwen3's q/k norms only change the attention probabilities, which are read from the model. Grouped-query
attention: query head h uses value group h // (H / H_kv).
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, bias_of, head_dims, linear_w
from report_builder.schema import PRE_LN


def _layers(model):
    return list(model.layers)


def rms_norm(m) -> NormWeights:
    """An RMSNorm module's weights (Llama's and the families built on its layer)."""
    eps = getattr(m, "variance_epsilon", None) or getattr(m, "eps", 1e-6)
    return NormWeights("RMSNorm", m.weight.detach(), None, float(eps))


def _scaled(t, k: float):
    return None if t is None else (t if k == 1.0 else t * k)


def layer_weights(model, idx: int, multiplier: float = 1.0) -> LayerWeights:
    """Layer weights; ``multiplier`` scales each block's output (folded into W_O, b_O, W_down, b_down)."""
    layers = _layers(model)
    layer = layers[idx]
    cfg = model.config
    at = layer.self_attn
    h, kv, dh = head_dims(cfg)
    mlp = layer.mlp
    nxt = rms_norm(layers[idx + 1].input_layernorm) if idx + 1 < len(layers) else rms_norm(model.norm)
    return LayerWeights(
        layout=PRE_LN,
        attn=AttentionWeights(linear_w(at.v_proj), bias_of(at.v_proj), _scaled(linear_w(at.o_proj), multiplier),
                              _scaled(bias_of(at.o_proj), multiplier), h, kv, dh),
        ln1=rms_norm(layer.input_layernorm),
        ln2=rms_norm(layer.post_attention_layernorm),
        ff=FFWeights(cfg.hidden_act, True, None, None, _scaled(linear_w(mlp.down_proj), multiplier),
                     _scaled(bias_of(mlp.down_proj), multiplier),
                     w_gate=linear_w(mlp.gate_proj), b_gate=bias_of(mlp.gate_proj),
                     w_up=linear_w(mlp.up_proj), b_up=bias_of(mlp.up_proj)),
        next_norm=nxt,
    )


def _facts(cfg) -> dict:
    return {
        "norm": "RMSNorm", "activation": cfg.hidden_act, "gated": True,
        "d_model": cfg.hidden_size, "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
        "kv_heads": getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads,
        "ff_size": cfg.intermediate_size,
    }


ADAPTER = Adapter(
    family="llama",
    class_names=("LlamaModel", "MistralModel", "Qwen2Model", "Qwen3Model"),
    model_types=("llama", "mistral", "qwen2", "qwen3"),
    layout=PRE_LN,
    causal=True,
    layers=_layers,
    attention="self_attn",
    weights=layer_weights,
    probes={
        "LN1": Probe("input_layernorm", "out"),
        "ATTN": Probe("self_attn", "out"),
        "ATB": Probe("post_attention_layernorm", "in"),
        "ATBLN": Probe("post_attention_layernorm", "out"),
        "ATBLNFF": Probe("mlp", "out"),
        "ATBLNFFRES": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.max_position_embeddings,
    submodules=frozenset({"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}),
)
