"""DistilBERT (post-LN, like BERT with six layers and no token types).

sa = LN1(x + ATTN(x)), y = LN2(sa + FF(sa)). Pitfall: the layer norms' eps is fixed at 1e-12 in
the module, not in the config; it is read from the module.
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, bias_of, linear_w
from report_builder.schema import POST_LN


def _layers(model):
    return list(model.transformer.layer)


def _ln(m) -> NormWeights:
    return NormWeights("LayerNorm", m.weight.detach(), bias_of(m), float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    layer = _layers(model)[idx]
    cfg = model.config
    at = layer.attention
    h = cfg.n_heads
    return LayerWeights(
        layout=POST_LN,
        attn=AttentionWeights(linear_w(at.v_lin), bias_of(at.v_lin), linear_w(at.out_lin), bias_of(at.out_lin),
                              h, h, cfg.dim // h),
        ln1=_ln(layer.sa_layer_norm),
        ln2=_ln(layer.output_layer_norm),
        ff=FFWeights(cfg.activation, False, linear_w(layer.ffn.lin1), bias_of(layer.ffn.lin1),
                     linear_w(layer.ffn.lin2), bias_of(layer.ffn.lin2)),
    )


def _facts(cfg) -> dict:
    return {
        "norm": "LayerNorm", "activation": cfg.activation, "gated": False,
        "d_model": cfg.dim, "layers": cfg.n_layers, "heads": cfg.n_heads, "kv_heads": cfg.n_heads,
        "ff_size": cfg.hidden_dim,
    }


ADAPTER = Adapter(
    family="distilbert",
    class_names=("DistilBertModel",),
    model_types=("distilbert",),
    layout=POST_LN,
    layers=_layers,
    attention="attention",
    weights=_weights,
    probes={
        "ATTN": Probe("attention", "out"),
        "ATTNRES": Probe("sa_layer_norm", "in"),
        "ATB": Probe("sa_layer_norm", "out"),
        "ATBFF": Probe("ffn", "out"),
        "ATBFFRES": Probe("output_layer_norm", "in"),
        "ATBFFRESLN": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.max_position_embeddings,
    submodules=frozenset({"attention", "sa_layer_norm", "ffn", "output_layer_norm"}),
    causal=False,
)
