"""Gemma family: Gemma-2 and Gemma-3 (sandwich norms), Gemma (pre-LN); RMSNorm with weight 1 + w, GeGLU.

Sandwich layer (SPEC §7): h = x + N_pa(ATTN(N_in(x))), y = h + N_po(FF(N_pf(h))).
The embedding scale sqrt(d) acts before layer 0; attention soft-capping, sliding windows, Gemma-3's
q/k norms and query_pre_attn_scalar only change the attention probabilities, read from the model;
final-logit soft-capping acts after the last layer. None of them enters the per-layer decomposition.
Pitfall: Gemma's RMSNorm multiplies by ``1 + weight`` (the stored weight is an offset from 1).
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, Variants, bias_of, head_dims, linear_w
from report_builder.schema import PRE_LN, SANDWICH


def _layers(model):
    return list(model.layers)


def _rms(m) -> NormWeights:
    return NormWeights("RMSNorm", 1.0 + m.weight.detach(), None, float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    layers = _layers(model)
    layer = layers[idx]
    cfg = model.config
    at, mlp = layer.self_attn, layer.mlp
    h, kv, dh = head_dims(cfg)
    sandwich = hasattr(layer, "pre_feedforward_layernorm")
    nxt = _rms(layers[idx + 1].input_layernorm) if idx + 1 < len(layers) else _rms(model.norm)
    act = _act(cfg)
    return LayerWeights(
        layout=SANDWICH if sandwich else PRE_LN,
        attn=AttentionWeights(linear_w(at.v_proj), bias_of(at.v_proj), linear_w(at.o_proj), bias_of(at.o_proj), h, kv, dh),
        ln1=_rms(layer.input_layernorm),
        ln2=_rms(layer.pre_feedforward_layernorm if sandwich else layer.post_attention_layernorm),
        ff=FFWeights(act, True, None, None, linear_w(mlp.down_proj), bias_of(mlp.down_proj),
                     w_gate=linear_w(mlp.gate_proj), b_gate=bias_of(mlp.gate_proj),
                     w_up=linear_w(mlp.up_proj), b_up=bias_of(mlp.up_proj)),
        next_norm=nxt,
        post_attn_norm=_rms(layer.post_attention_layernorm) if sandwich else None,
        post_ff_norm=_rms(layer.post_feedforward_layernorm) if sandwich else None,
    )


def _act(cfg) -> str:
    """The activation the family's MLP applies: Gemma's reads ``hidden_act``, Gemma-2/3's ``hidden_activation``
    (a config may carry both, the other one stale)."""
    return cfg.hidden_act if cfg.model_type == "gemma" else cfg.hidden_activation


def _facts(cfg) -> dict:
    return {
        "norm": "RMSNorm", "activation": _act(cfg),
        "gated": True, "d_model": cfg.hidden_size, "layers": cfg.num_hidden_layers,
        "heads": cfg.num_attention_heads,
        "kv_heads": getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads,
        "ff_size": cfg.intermediate_size,
    }


_SANDWICH = Adapter(
    family="gemma",
    class_names=("Gemma2Model", "Gemma3TextModel", "GemmaModel"),
    model_types=("gemma2", "gemma3_text", "gemma"),
    layout=SANDWICH,
    causal=True,
    layers=_layers,
    attention="self_attn",
    weights=_weights,
    probes={
        "LN1": Probe("input_layernorm", "out"),
        "ATTN": Probe("self_attn", "out"),
        "ATTNLN": Probe("post_attention_layernorm", "out"),
        "ATB": Probe("pre_feedforward_layernorm", "in"),
        "ATBLN": Probe("pre_feedforward_layernorm", "out"),
        "ATBLNFF": Probe("mlp", "out"),
        "ATBLNFFLN": Probe("post_feedforward_layernorm", "out"),
        "ATBLNFFLNRES": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.max_position_embeddings,
    submodules=frozenset({"self_attn", "mlp", "input_layernorm", "post_attention_layernorm",
                          "pre_feedforward_layernorm", "post_feedforward_layernorm"}),
)
_PRE = _SANDWICH.with_(
    layout=PRE_LN,
    probes={
        "LN1": Probe("input_layernorm", "out"),
        "ATTN": Probe("self_attn", "out"),
        "ATB": Probe("post_attention_layernorm", "in"),
        "ATBLN": Probe("post_attention_layernorm", "out"),
        "ATBLNFF": Probe("mlp", "out"),
        "ATBLNFFRES": Probe("", "out"),
    },
    submodules=frozenset({"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}),
)
ADAPTER = _SANDWICH.with_(variant=Variants(lambda cfg: cfg.model_type == "gemma", {True: _PRE, False: _SANDWICH}))
"""Gemma-2/3: sandwich; Gemma (model type ``gemma``): pre-LN with the same norms and GeGLU."""
