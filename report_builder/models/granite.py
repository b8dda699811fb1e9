"""Granite: the Llama layer with multipliers (SPEC §7).

``h = x + m * ATTN(LN1(x))``, ``y = h + m * FF(LN2(h))`` with ``m = residual_multiplier``: a linear
factor on each block's output, folded into W_O, b_O and W_down, b_down, so the pre-LN mathematics
applies unchanged. The embedding multiplier acts before layer 0 and the attention multiplier is the
softmax scale (the probabilities are read from the model): neither enters the per-layer view.
Pitfall: HF's ``self_attn`` and ``mlp`` outputs are unscaled; their probes multiply by ``m``.
"""
from __future__ import annotations

from report_builder.models.adapter import Probe
from report_builder.models.llama import ADAPTER as LLAMA
from report_builder.models.llama import layer_weights

ADAPTER = LLAMA.with_(
    family="granite",
    class_names=("GraniteModel",),
    model_types=("granite",),
    multipliers=("residual_multiplier", "embedding_multiplier", "attention_multiplier"),
    weights=lambda model, idx: layer_weights(model, idx, float(model.config.residual_multiplier)),
    probes={**LLAMA.probes, "ATTN": Probe("self_attn", "out", scale="residual_multiplier"),
            "ATBLNFF": Probe("mlp", "out", scale="residual_multiplier")},
)
