"""Models no adapter serves are refused in one line that says what is unsupported and what is, from the config
alone (`models.refusals`), by a plan (`adapter_of`) and by a load (`check`, a build) alike: exit 4."""
from __future__ import annotations

import pytest
import transformers as tr

from report_builder.errors import UnsupportedArchitecture, exit_code
from report_builder.models import registry
from report_builder.models.loading import adapter_of, from_model, load

_SMALL = dict(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)

CASES = {
    "t5": (lambda: tr.T5Config(vocab_size=100, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
           ["'t5'", "encoder-decoder", "residual inside"]),
    "bart": (lambda: tr.BartConfig(vocab_size=100, d_model=16, encoder_layers=1, decoder_layers=1,
                                   encoder_attention_heads=2, decoder_attention_heads=2),
             ["'bart'", "encoder-decoder", "cross-attention", "encoder-only and decoder-only models are supported"]),
    "mixtral": (lambda: tr.MixtralConfig(**_SMALL, num_local_experts=4, num_experts_per_tok=2),
                ["'mixtral'", "mixture-of-experts model (4 experts, 2 per token)", "dense relative mistral"]),
    "qwen2_moe": (lambda: tr.Qwen2MoeConfig(**_SMALL, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=8),
                  ["'qwen2_moe'", "mixture-of-experts model (6 experts, 3 per token)", "dense relative qwen2"]),
    "gemma3": (lambda: tr.Gemma3Config(text_config=dict(**_SMALL, head_dim=8)),
               ["'gemma3'", "multimodal", "'gemma3_text', is supported"]),
}


def _check_line(e: UnsupportedArchitecture, wants: list[str]) -> None:
    text = str(e)
    assert exit_code(e) == 4 and "\n" not in text
    assert "has no adapter" not in text and "supported model types: bert" in text
    for w in wants:
        assert w in text, (w, text)


@pytest.mark.parametrize("kind", CASES)
def test_an_unsupported_architecture_is_refused_by_name_from_its_config(kind, tmp_path):
    """A T5 or a Mixtral got 'model type ... has no adapter' and the list of supported types: nothing said
    that the encoder-decoder or the experts were the reason, nor which relative would do."""
    make, wants = CASES[kind]
    make().save_pretrained(tmp_path)  # a config alone: refused before any weight is looked for
    for ask in (adapter_of, load):  # a plan, and a check or a build
        with pytest.raises(UnsupportedArchitecture) as e:
            ask(str(tmp_path))
        _check_line(e.value, wants)


def test_an_instantiated_mixture_of_experts_model_is_refused_by_name():
    m = tr.MixtralModel(tr.MixtralConfig(**_SMALL, num_local_experts=4, num_experts_per_tok=2))
    with pytest.raises(UnsupportedArchitecture) as e:
        from_model(m, None, name="moe")
    _check_line(e.value, ["mixture-of-experts model (4 experts, 2 per token)"])


def test_an_unknown_model_type_still_lists_the_supported_classes():
    with pytest.raises(UnsupportedArchitecture, match="no-such-type' has no adapter.*BertModel"):
        registry.for_model_type("no-such-type")
