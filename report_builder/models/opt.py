"""OPT: pre-LN (``do_layer_norm_before``, most sizes) or post-LN (OPT-350m), ReLU FF without a module.

Pitfall: the FF is ``fc1 -> activation -> fc2`` directly in the layer (no ``mlp`` module), so the
FF check reads ``fc2``'s output; LayerNorms may have no affine weights (``layer_norm_elementwise_affine``).
OPT-350m's ``project_in``/``project_out`` act outside the layers.
"""
from __future__ import annotations

import torch

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, Variants, bias_of, linear_w
from report_builder.schema import POST_LN, PRE_LN


def _layers(model):
    return list(model.decoder.layers)


def _ln(m) -> NormWeights:
    w = m.weight.detach() if m.weight is not None else torch.ones(m.normalized_shape)
    return NormWeights("LayerNorm", w, bias_of(m), float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    layers = _layers(model)
    layer = layers[idx]
    cfg = model.config
    h = cfg.num_attention_heads
    at = layer.self_attn
    pre = cfg.do_layer_norm_before
    nxt = None
    if pre:
        final = model.decoder.final_layer_norm
        nxt = _ln(layers[idx + 1].self_attn_layer_norm) if idx + 1 < len(layers) else (
            _ln(final) if final is not None else None)
    return LayerWeights(
        layout=PRE_LN if pre else POST_LN,
        attn=AttentionWeights(linear_w(at.v_proj), bias_of(at.v_proj), linear_w(at.out_proj), bias_of(at.out_proj),
                              h, h, cfg.hidden_size // h),
        ln1=_ln(layer.self_attn_layer_norm),
        ln2=_ln(layer.final_layer_norm),
        ff=FFWeights(cfg.activation_function, False, linear_w(layer.fc1), bias_of(layer.fc1),
                     linear_w(layer.fc2), bias_of(layer.fc2)),
        next_norm=nxt,
    )


def _facts(cfg) -> dict:
    return {
        "norm": "LayerNorm",
        "activation": cfg.activation_function, "gated": False, "d_model": cfg.hidden_size,
        "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads, "kv_heads": cfg.num_attention_heads,
        "ff_size": cfg.ffn_dim,
    }


PRE = Adapter(
    family="opt",
    class_names=("OPTModel",),
    model_types=("opt",),
    layout=PRE_LN,
    layers=_layers,
    attention="self_attn",
    weights=_weights,
    probes={
        "LN1": Probe("self_attn_layer_norm", "out"),
        "ATTN": Probe("self_attn", "out"),
        "ATB": Probe("final_layer_norm", "in"),
        "ATBLN": Probe("final_layer_norm", "out"),
        "ATBLNFF": Probe("fc2", "out"),
        "ATBLNFFRES": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.max_position_embeddings,
    submodules=frozenset({"self_attn", "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm"}),
    causal=True,
)
POST = PRE.with_(
    layout=POST_LN,
    probes={
        "ATTN": Probe("self_attn", "out"),
        "ATTNRES": Probe("self_attn_layer_norm", "in"),
        "ATB": Probe("self_attn_layer_norm", "out"),
        "ATBFF": Probe("fc2", "out"),
        "ATBFFRES": Probe("final_layer_norm", "in"),
        "ATBFFRESLN": Probe("", "out"),
    },
)
ADAPTER = PRE.with_(variant=Variants(lambda cfg: bool(cfg.do_layer_norm_before), {True: PRE, False: POST}))
