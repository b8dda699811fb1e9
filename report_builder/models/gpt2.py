"""GPT-2 (pre-LN, Conv1D weights, gelu_new).

Pitfall: HF's last ``hidden_states`` entry is after the final ``ln_f``; checks use the block's own
output (a forward hook), never ``hidden_states[l + 1]``.
"""
from __future__ import annotations

from report_builder.decompose.attention import AttentionWeights
from report_builder.decompose.feedforward import FFWeights
from report_builder.decompose.layer import LayerWeights
from report_builder.decompose.norms import NormWeights
from report_builder.models.adapter import Adapter, Probe, bias_of
from report_builder.schema import PRE_LN


def _layers(model):
    return list(model.h)


def _ln(m) -> NormWeights:
    return NormWeights("LayerNorm", m.weight.detach(), bias_of(m), float(m.eps))


def _weights(model, idx: int) -> LayerWeights:
    blocks = _layers(model)
    b = blocks[idx]
    cfg = model.config
    d = cfg.hidden_size
    h = cfg.num_attention_heads
    w = b.attn.c_attn.weight.detach()  # Conv1D: (d, 3d), y = x @ W + b
    bb = b.attn.c_attn.bias.detach()
    nxt = _ln(blocks[idx + 1].ln_1) if idx + 1 < len(blocks) else _ln(model.ln_f)
    return LayerWeights(
        layout=PRE_LN,
        attn=AttentionWeights(w[:, 2 * d:], bb[2 * d:], b.attn.c_proj.weight.detach(), bias_of(b.attn.c_proj), h, h, d // h),
        ln1=_ln(b.ln_1),
        ln2=_ln(b.ln_2),
        ff=FFWeights(cfg.activation_function, False, b.mlp.c_fc.weight.detach(), bias_of(b.mlp.c_fc),
                     b.mlp.c_proj.weight.detach(), bias_of(b.mlp.c_proj)),
        next_norm=nxt,
    )


def _facts(cfg) -> dict:
    return {
        "norm": "LayerNorm", "activation": cfg.activation_function, "gated": False,
        "d_model": cfg.hidden_size, "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
        "kv_heads": cfg.num_attention_heads, "ff_size": cfg.n_inner or 4 * cfg.hidden_size,
    }


ADAPTER = Adapter(
    family="gpt2",
    class_names=("GPT2Model",),
    model_types=("gpt2",),
    layout=PRE_LN,
    causal=True,
    layers=_layers,
    attention="attn",
    weights=_weights,
    probes={
        "LN1": Probe("ln_1", "out"),
        "ATTN": Probe("attn", "out"),
        "ATB": Probe("ln_2", "in"),
        "ATBLN": Probe("ln_2", "out"),
        "ATBLNFF": Probe("mlp", "out"),
        "ATBLNFFRES": Probe("", "out"),
    },
    facts=_facts,
    max_positions=lambda cfg: cfg.n_positions,
    submodules=frozenset({"ln_1", "attn", "ln_2", "mlp"}),
)
