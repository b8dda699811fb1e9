"""Phi-3 family (Phi-3/3.5-mini, Phi-4-mini): the Llama layer (pre-LN, RMSNorm, gated SiLU FF, grouped-query
attention, RoPE) with fused projections.

Partial rotary factors and long-RoPE scaling only change the attention probabilities, which are read from
the model. Pitfall: ``qkv_proj`` stacks [q (H d_h) | k (H_kv d_h) | v (H_kv d_h)] along its output, and
``gate_up_proj`` stacks [gate (d') | up (d')] (HF chunks it in two, the gate first: ``up * act(gate)``).
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.models.adapter import bias_of, head_dims, linear_w
from report_builder.models.llama import ADAPTER as LLAMA
from report_builder.models.llama import rms_norm
from report_builder.schema import PRE_LN


def _cols(t, start: int, stop: int | None = None):
    """Columns ``start:stop`` of a row-vector weight (or entries of a bias), contiguous; None stays None."""
    return None if t is None else t[..., start:stop].contiguous()


def _weights(model, idx: int) -> LayerWeights:
    layers = list(model.layers)
    layer = layers[idx]
    cfg = model.config
    at, mlp = layer.self_attn, layer.mlp
    h, kv, dh = head_dims(cfg)
    v0 = (h + kv) * dh  # the value columns follow the query and key ones
    d_ff = cfg.intermediate_size
    gate_up, gate_up_b = linear_w(mlp.gate_up_proj), bias_of(mlp.gate_up_proj)
    nxt = rms_norm(layers[idx + 1].input_layernorm) if idx + 1 < len(layers) else rms_norm(model.norm)
    return LayerWeights(
        layout=PRE_LN,
        attn=AttentionWeights(_cols(linear_w(at.qkv_proj), v0), _cols(bias_of(at.qkv_proj), v0),
                              linear_w(at.o_proj), bias_of(at.o_proj), h, kv, dh),
        ln1=rms_norm(layer.input_layernorm),
        ln2=rms_norm(layer.post_attention_layernorm),
        ff=FFWeights(cfg.hidden_act, True, None, None, linear_w(mlp.down_proj), bias_of(mlp.down_proj),
                     w_gate=_cols(gate_up, 0, d_ff), b_gate=_cols(gate_up_b, 0, d_ff),
                     w_up=_cols(gate_up, d_ff), b_up=_cols(gate_up_b, d_ff)),
        next_norm=nxt,
    )


ADAPTER = LLAMA.with_(family="phi3", class_names=("Phi3Model",), model_types=("phi3",), weights=_weights)
"""Phi-3: Llama's probes, facts and child modules (``resid_*_dropout`` are dropouts), its own weights."""
