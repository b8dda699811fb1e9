"""Architectures refused by name: what a config asks that no adapter decomposes, read from the config alone.

`reason(model_type, config)` says, for a model type no adapter serves, what makes it unsupported: an
encoder-decoder (T5, BART: two stacks joined by cross-attention), a mixture-of-experts feed-forward
(Mixtral, Qwen-MoE: a router picks each token's experts), a multimodal checkpoint (its text model
named, and whether that one is supported), or a known model type whose layer matches no layout (`KNOWN`, asked first).
`models.registry` words the refusal, with the supported model types, so `plan`, `check` and a build
refuse in the same one line (exit 4) before any weight is read.

Pitfall: the config is read, never trusted: every attribute may be missing or of any type (a
hand-written config.json), so each is checked before it is used in the message.
"""
from __future__ import annotations

from report_builder.errors import shown

KNOWN: dict[str, str] = {
    "bloom": "its layer does not match a supported layout: residual added inside the module "
             "(BloomAttention and BloomMLP add the residual themselves)",
    "mpt": "its layer does not match a supported layout: residual added inside the module "
           "(MptBlock adds the residual inside its attention and FF paths)",
    "falcon": "its layer does not match a supported layout: parallel attention + FF whose norms and fused QKV "
              "vary with new_decoder_architecture / parallel_attn; no adapter checks both yet",
    "gptj": "its layer does not match a supported layout: parallel attention + FF (no adapter yet)",
    "t5": "T5 is an encoder-decoder model, and even its encoder alone adds the residual inside each sub-layer "
          "module (T5LayerSelfAttention, T5LayerFF)",
    "albert": "ALBERT shares one set of layer weights across its layers and its attention module adds the "
              "residual and LayerNorm itself (residual added inside the module); no adapter",
    "deberta": "DeBERTa's disentangled attention keeps its value bias and fused projection in a layout no adapter "
               "reads; no adapter yet",
    "deberta-v2": "DeBERTa-v2's disentangled attention keeps its projections in a layout no adapter reads, and its "
                  "optional convolution beside the first layer is a branch no layout has; no adapter yet",
    "mpnet": "MPNet's attention output projection sits inside its self-attention module and its relative "
             "position bias is computed by the encoder; no adapter yet",
}
"""Model types whose layer matches no supported layout, with what differs (refused by name)."""

DENSE_RELATIVE: dict[str, str] = {"mixtral": "mistral", "qwen2_moe": "qwen2", "qwen3_moe": "qwen3"}
"""A mixture-of-experts model type -> its dense relative (named when that one is supported)."""

_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_PER_TOKEN = ("num_experts_per_tok", "moe_top_k", "top_k")


def _count(obj, names: tuple[str, ...]) -> int | None:
    for a in names:
        v = getattr(obj, a, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def experts(config) -> tuple[int, int | None] | None:
    """(experts, experts per token) of a mixture-of-experts config (DBRX keeps them in ``ffn_config``), or None."""
    for obj in (config, getattr(config, "ffn_config", None)):
        n = _count(obj, _EXPERTS) if obj is not None else None
        if n is not None and n > 1:
            return n, _count(obj, _PER_TOKEN)
    return None


def reason(model_type: str, config=None, supported: frozenset[str] = frozenset()) -> str | None:
    """What makes ``model_type`` (with its ``config``, when there is one) unsupported, or None when nothing
    specific is known. ``supported``: the model types some adapter serves (to name a supported relative)."""
    if model_type in KNOWN:
        return KNOWN[model_type]
    if config is not None and getattr(config, "is_encoder_decoder", False) is True:
        return ("an encoder-decoder model (an encoder and a decoder stack joined by cross-attention): no layer "
                "layout has a cross-attention branch; encoder-only and decoder-only models are supported")
    moe = experts(config) if config is not None else None
    if moe is not None or model_type in DENSE_RELATIVE:
        n, k = moe or (None, None)
        count = f" ({n} experts" + (f", {k} per token" if k else "") + ")" if n else ""
        dense = DENSE_RELATIVE.get(model_type)
        rel = f" (its dense relative {dense} is)" if dense in supported else ""
        return (f"a mixture-of-experts model{count}: a router picks each token's experts, so a layer's "
                f"feed-forward has no closed-form attribution; dense feed-forward models are supported{rel}")
    text = getattr(config, "text_config", None) if config is not None else None
    text_type = getattr(text, "model_type", None)
    if isinstance(text_type, str) and text_type != model_type:
        known = "is supported" if text_type in supported else "is not supported either"
        return (f"a multimodal model (vision and text): its text model, model type {shown(text_type)}, {known} as a "
                "checkpoint of its own")
    return None
