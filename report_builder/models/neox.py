"""GPT-NeoX / Pythia: parallel attention + FF (``use_parallel_residual``, the default) or sequential pre-LN.

Parallel: y = x + ATTN(N1(x)) + FF(N2(x)) with two LayerNorms of the same input; sequential:
x' = x + ATTN(N1(x)), y = x' + FF(N2(x')). Partial rotary embeddings only change the attention
probabilities. Pitfall: the fused ``query_key_value`` interleaves per head as [q | k | v] blocks of
``head_size`` (HF views it as (…, H, 3 d_h)), so head h's value columns are ``h*3*d_h + 2*d_h …``.
"""
from __future__ import annotations

import torch

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, Variants, bias_of, linear_w
from report_builder.schema import PARALLEL, PRE_LN


def _layers(model):
    return list(model.layers)


def _ln(m) -> NormWeights:
    return NormWeights("LayerNorm", m.weight.detach(), bias_of(m), float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    layers = _layers(model)
    layer = layers[idx]
    cfg = model.config
    h = cfg.num_attention_heads
    dh = cfg.hidden_size // h
    at = layer.attention
    cols = torch.cat([torch.arange(k * 3 * dh + 2 * dh, k * 3 * dh + 3 * dh) for k in range(h)])
    w_v = linear_w(at.query_key_value)[:, cols]
    b = bias_of(at.query_key_value)
    nxt = _ln(layers[idx + 1].input_layernorm) if idx + 1 < len(layers) else _ln(model.final_layer_norm)
    return LayerWeights(
        layout=PARALLEL if cfg.use_parallel_residual else PRE_LN,
        attn=AttentionWeights(w_v, None if b is None else b[cols], linear_w(at.dense), bias_of(at.dense), h, h, dh),
        ln1=_ln(layer.input_layernorm),
        ln2=_ln(layer.post_attention_layernorm),
        ff=FFWeights(cfg.hidden_act, False, linear_w(layer.mlp.dense_h_to_4h), bias_of(layer.mlp.dense_h_to_4h),
                     linear_w(layer.mlp.dense_4h_to_h), bias_of(layer.mlp.dense_4h_to_h)),
        next_norm=nxt,
    )


def _facts(cfg) -> dict:
    return {
        "norm": "LayerNorm",
        "activation": cfg.hidden_act, "gated": False, "d_model": cfg.hidden_size, "layers": cfg.num_hidden_layers,
        "heads": cfg.num_attention_heads, "kv_heads": cfg.num_attention_heads, "ff_size": cfg.intermediate_size,
    }


_PARALLEL = Adapter(
    family="gpt_neox",
    class_names=("GPTNeoXModel",),
    model_types=("gpt_neox",),
    layout=PARALLEL,
    layers=_layers,
    attention="attention",
    weights=_weights,
    probes={
        "LN1": Probe("input_layernorm", "out"),
        "ATTN": Probe("attention", "out"),
        "LN2": Probe("post_attention_layernorm", "out"),
        "FF": Probe("mlp", "out"),
        "ATBPFF": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.max_position_embeddings,
    submodules=frozenset({"input_layernorm", "post_attention_layernorm", "attention", "mlp"}),
    causal=True,
)
_SEQUENTIAL = _PARALLEL.with_(
    layout=PRE_LN,
    probes={
        "LN1": Probe("input_layernorm", "out"),
        "ATTN": Probe("attention", "out"),
        "ATB": Probe("post_attention_layernorm", "in"),
        "ATBLN": Probe("post_attention_layernorm", "out"),
        "ATBLNFF": Probe("mlp", "out"),
        "ATBLNFFRES": Probe("", "out"),
    },
)
ADAPTER = _PARALLEL.with_(variant=Variants(lambda cfg: bool(cfg.use_parallel_residual),
                                           {True: _PARALLEL, False: _SEQUENTIAL}))
