"""What the benchmark runs on: synthetic shapes with seeded random weights (or a named model), random
token ids, and the dimensions of a model's layers.

Shapes are HF configs with overrides (HF defaults otherwise), built with eager attention so the
forward pass returns the probabilities the decomposition reads. Pitfall: ``tf32`` is float32 storage
with TF32 matmuls, switched on globally in torch for CUDA when a model is built.
"""
from __future__ import annotations

import torch

from report_builder.errors import UsageError, option, shown

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
}


def stand_in_config(e) -> tuple[str, dict]:
    """An embedded model's family and config values (`models.embedded.Embedded.config`), without the
    entries that name a class (so they build the family's base model)."""
    over = {k: v for k, v in e.config.items() if k not in ("model_type", "architectures")}
    return e.config["model_type"], over


def _embedded_shapes() -> None:
    """A shape per embedded model with a recorded architecture (``--shape minilm``, ``--shape smollm2``:
    its sizes, random weights), and ``llama-small``, the Llama one's earlier name."""
    from report_builder.models.embedded import EMBEDDED

    for e in EMBEDDED.values():
        if e.config:
            family, over = stand_in_config(e)
            SHAPES[e.name] = (family, over, f"{e.name} architecture: {e.description.split(' from ')[0]}")
            if family == "llama" and "llama-small" not in SHAPES:
                SHAPES["llama-small"] = (family, over, f"Llama shape ({e.description.split(' from ')[0]}: GQA "
                                                       f"{over['num_attention_heads']}/{over['num_key_value_heads']}, "
                                                       "SwiGLU)")


_embedded_shapes()


def parse_dtype(name: str) -> tuple[torch.dtype, bool]:
    """``float32``/``bfloat16``/``float16``/``tf32`` -> (storage dtype, TF32 matmuls)."""
    if name == "tf32":
        return torch.float32, True
    try:
        return getattr(torch, name), False
    except AttributeError:
        raise UsageError(f"{option('dtype')}: unknown dtype {shown(name)}; use float32, bfloat16, float16 or tf32") from None


def build(shape: str | None, model: str | None, device: str, dtype: str):
    """A `LoadedModel`: a shape from configs with seeded random init, or a named model via `load`."""
    from report_builder.models.device_plan import require_device
    from report_builder.models.loading import from_model, load

    require_device(device)
    tdt, tf32 = parse_dtype(dtype)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    if model:
        return load(model, device=device, dtype="float32" if tdt == torch.float32 else dtype)
    if shape not in SHAPES:
        raise UsageError(f"{option('shape')}: unknown shape {shown(shape)}; choose one of {', '.join(SHAPES)}")
    family, over, _ = SHAPES[shape]
    m = random_model(family, over).to(device=device, dtype=tdt).eval()
    return from_model(m, None, name=shape)


def build_for_pass(shape: str | None, model: str | None, device: str, dtype: str):
    """A timed pass's model (`k24_pass`, `k21_pass`): where the engine has precision modes
    (`models.loading.LoadedModel.precision`), the weights stay float32 and ``dtype`` is the pair GEMMs'
    mode, with its own error bound."""
    lm = build(shape, model, device, "float32")
    lm.precision = dtype
    return lm


def random_model(family: str, over: dict, seed: int = 0):
    """A base model of ``family`` (bert, gpt2, llama) with config values ``over``, eager attention and
    seeded random weights, on the CPU in float32."""
    torch.manual_seed(seed)
    kw = dict(attn_implementation="eager")
    if family == "bert":
        from transformers import BertConfig, BertModel
        return BertModel(BertConfig(**over, **kw), add_pooling_layer=False)
    if family == "gpt2":
        from transformers import GPT2Config, GPT2Model
        return GPT2Model(GPT2Config(**over, **kw))
    from transformers import LlamaConfig, LlamaModel
    return LlamaModel(LlamaConfig(**over, **kw))


def save_stand_in(shape: str, path, *, positions: int | None = None, layers: int | None = None, seed: int = 0):
    """A model folder for ``shape`` (`SHAPES`; an embedded model's name gives its architecture) with random
    weights and a tokenizer that needs no wheel nor download: WordPiece over letters, digits and
    punctuation for the BERT family, byte-level BPE without merges (one token per byte) for the others;
    ``positions``/``layers`` override the config's. `models.loading.load` reads it like a checkpoint
    (``check --model DIR``, ``bench --model DIR``). Returns the folder."""
    import string
    from pathlib import Path

    if shape not in SHAPES:
        raise UsageError(f"unknown shape {shown(shape)}; choose one of {', '.join(SHAPES)}")
    family, over, _ = SHAPES[shape]
    over = dict(over)
    if positions is not None:
        over["max_position_embeddings" if family != "gpt2" else "n_positions"] = positions
    if layers is not None:
        over["num_hidden_layers" if family != "gpt2" else "n_layer"] = layers
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    random_model(family, over, seed).save_pretrained(path)
    if family == "bert":
        from transformers import BertTokenizer

        chars = string.ascii_lowercase + string.digits + string.punctuation
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars)]
        BertTokenizer(vocab={w: i for i, w in enumerate(words)}, do_lower_case=True).save_pretrained(str(path))
    else:
        from transformers import GPT2Tokenizer

        from report_builder.tokens import _byte_alphabet

        special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        symbol = {b: c for c, b in _byte_alphabet().items()}  # GPT-2's byte -> printable character table
        vocab = {t: i for i, t in enumerate(special + [symbol[b] for b in range(256)])}
        GPT2Tokenizer(vocab=vocab, merges=[], unk_token=special[0], bos_token=special[1], eos_token=special[2],
                      pad_token=special[2]).save_pretrained(str(path))
    return path


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
