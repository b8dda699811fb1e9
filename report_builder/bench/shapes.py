"""What the benchmark runs on: synthetic shapes with seeded random weights (or a named model), random
token ids, and the dimensions of a model's layers.

Shapes are HF configs with overrides (HF defaults otherwise), built with eager attention so the
forward pass returns the probabilities the decomposition reads. Pitfall: ``tf32`` is float32 storage
with TF32 matmuls, switched on globally in torch for CUDA when a model is built.
"""
from __future__ import annotations

import torch

from report_builder.errors import UsageError, shown

# name -> (family, config overrides, description); configs use HF defaults otherwise
SHAPES: dict[str, tuple[str, dict, str]] = {
    "tiny": ("bert", dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=256, max_position_embeddings=512), "tiny BERT"),
    "base": ("bert", {}, "BERT-base shape"),
    "large": ("bert", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
              "BERT-large shape"),
    "gpt2-base": ("gpt2", {}, "GPT-2 base shape"),
    "tiny-llama": ("llama", dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, intermediate_size=128, max_position_embeddings=512),
                   "tiny Llama (causal, GQA 4/2, SwiGLU)"),
    "llama-small": ("llama", dict(vocab_size=49152, hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                                  num_key_value_heads=3, intermediate_size=1536, max_position_embeddings=2048,
                                  tie_word_embeddings=True), "Llama shape (SmolLM2-135M: GQA 9/3, SwiGLU)"),
}


def parse_dtype(name: str) -> tuple[torch.dtype, bool]:
    """``float32``/``bfloat16``/``float16``/``tf32`` -> (storage dtype, TF32 matmuls)."""
    if name == "tf32":
        return torch.float32, True
    try:
        return getattr(torch, name), False
    except AttributeError:
        raise UsageError(f"--dtype: unknown dtype {shown(name)}; use float32, bfloat16, float16 or tf32") from None


def build(shape: str | None, model: str | None, device: str, dtype: str):
    """A `LoadedModel`: a shape from configs with seeded random init, or a named model via `load`."""
    from report_builder.models.loading import from_model, load

    tdt, tf32 = parse_dtype(dtype)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    if model:
        return load(model, device=device, dtype="float32" if tdt == torch.float32 else dtype)
    if shape not in SHAPES:
        raise UsageError(f"--shape: unknown shape {shown(shape)}; choose one of {', '.join(SHAPES)}")
    family, over, _ = SHAPES[shape]
    torch.manual_seed(0)
    kw = dict(attn_implementation="eager")
    if family == "bert":
        from transformers import BertConfig, BertModel
        m = BertModel(BertConfig(**over, **kw), add_pooling_layer=False)
    elif family == "gpt2":
        from transformers import GPT2Config, GPT2Model
        m = GPT2Model(GPT2Config(**over, **kw))
    else:
        from transformers import LlamaConfig, LlamaModel
        m = LlamaModel(LlamaConfig(**over, **kw))
    m = m.to(device=device, dtype=tdt).eval()
    return from_model(m, None, name=shape)


def random_inputs(lm, seq_len: int, batch: int, seed: int = 0) -> dict:
    """``batch`` x ``seq_len`` random token ids (seeded, away from the vocabulary's first ids) and a full
    attention mask, on the model's device."""
    lm.check_length(seq_len)
    vocab = int(lm.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(min(100, vocab // 2), vocab, (batch, seq_len), generator=g)
    return {"input_ids": ids.to(lm.device), "attention_mask": torch.ones_like(ids).to(lm.device)}


def layer_dims(lm) -> dict:
    """The family, layout (``ln_position``) and sizes of the model's layers (JSON-able)."""
    lw = lm.layer_weights(0)
    return dict(family=lm.adapter.family, ln_position=lw.ln_position, d_model=lw.attn.d_model,
                heads=lw.attn.n_heads, kv_heads=lw.attn.n_kv_heads, head_dim=lw.attn.head_dim,
                d_ff=lw.ff.d_ff, gated=lw.ff.gated, activation=lw.ff.act, layers_total=lm.n_layers)


class _Enough(Exception):
    """Raised inside the forward pass once the last wanted layer is captured (never escapes)."""


def capture_layers(lm, inputs: dict, layers: list[int]) -> list:
    """The `LayerCapture` of each of ``layers`` (indices in ascending order) for ``inputs``, from one
    forward pass that stops after the last of them: no later layer runs, and no layer's attention
    probabilities are collected by the model (the capture reads them from each attention module), so a
    long sequence holds one layer's probabilities at a time (n = 4096: 0.6 GB each for 9 heads in float32)."""
    from report_builder.models.capture import capture_hooks

    got: list = []

    def keep(pos: int, cap):
        got.append(cap)
        if len(got) == len(layers):
            raise _Enough

    with torch.no_grad(), capture_hooks(lm.model, lm.adapter, layers, on_layer=keep) as cap:
        try:
            cap.run(inputs)
        except _Enough:
            pass
    return got
