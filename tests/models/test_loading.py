"""`models.loading.load` refuses weights that are not the model transformers builds, and names a
missing tokenizer, before anything is decomposed (exit 4, one line)."""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from report_builder.errors import EXIT_CODES, ModelError, UnsupportedArchitecture, exit_code
from report_builder.models.loading import load
from tests.tiny_models import save_tiny


def _edit_weights(folder, edit) -> None:
    f = folder / "model.safetensors"
    sd = load_file(f)
    edit(sd)
    save_file(sd, f, metadata={"format": "pt"})


def test_a_checkpoint_missing_a_layer_weight_is_refused_not_filled_at_random(tmp_path):
    """transformers filled the missing tensor with random values and only logged it: `check` said exit 0
    and the report decomposed a partly random model."""
    d = save_tiny("bert", tmp_path / "m")
    _edit_weights(d, lambda sd: sd.pop("encoder.layer.1.attention.output.dense.weight"))
    with pytest.raises(ModelError) as e:
        load(str(d))
    assert exit_code(e.value) == EXIT_CODES["model"] == 4
    assert "encoder.layer.1.attention.output.dense.weight" in str(e.value) and "random" in str(e.value)


def test_weights_inside_a_layer_that_transformers_does_not_use_are_refused(tmp_path):
    """A BERT with ``position_embedding_type: relative_key`` (dropped in transformers 5): its distance
    embeddings were ignored and the layers decomposed as absolute-position ones."""
    d = save_tiny("bert", tmp_path / "m")
    _edit_weights(d, lambda sd: sd.__setitem__("encoder.layer.0.attention.self.distance_embedding.weight",
                                               torch.zeros(255, 8)))
    with pytest.raises(UnsupportedArchitecture) as e:
        load(str(d))
    assert exit_code(e.value) == 4 and "distance_embedding" in str(e.value)


def test_unused_weights_inside_a_layer_of_a_task_checkpoint_are_refused(tmp_path):
    """A masked-LM checkpoint (names ``bert.encoder.layer...``) with relative_key distance embeddings loaded and was
    decomposed as an absolute-position BERT: its unused tensors were matched against the base model's names only."""
    from report_builder.models.loading import adapter_of

    d = save_tiny("bert", tmp_path / "m")

    def as_mlm(sd):
        old = dict(sd)
        sd.clear()
        sd.update({f"bert.{k}": v for k, v in old.items()})
        sd["bert.encoder.layer.0.attention.self.distance_embedding.weight"] = torch.zeros(255, 8)

    _edit_weights(d, as_mlm)
    for ask in (load, adapter_of):  # a build or a check, and a plan
        with pytest.raises(UnsupportedArchitecture) as e:
            ask(str(d))
        assert exit_code(e.value) == 4 and "encoder.layer.0.attention.self.distance_embedding" in str(e.value)


def test_a_head_and_a_missing_pooler_are_expected(tmp_path):
    """A task checkpoint (masked-LM head, no pooler) loads as its base model."""
    d = save_tiny("bert", tmp_path / "m")

    def as_mlm(sd):
        sd.pop("pooler.dense.weight"), sd.pop("pooler.dense.bias")
        sd["cls.predictions.bias"] = torch.zeros(30522)

    _edit_weights(d, as_mlm)
    assert load(str(d)).adapter.family == "bert"


def test_a_folder_without_tokenizer_files_says_so(tmp_path):
    """A causal model's folder with no tokenizer files was reported as 'its tokenizer files may be damaged'."""
    d = save_tiny("llama", tmp_path / "m")
    for f in d.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            f.unlink()
    with pytest.raises(ModelError) as e:
        load(str(d))
    assert "no tokenizer files" in str(e.value) and "save_pretrained" in str(e.value)


def test_an_activation_without_an_attribution_is_refused_before_the_weights(tmp_path):
    """``hidden_act: quick_gelu`` was an internal error (exit 1) raised from the decomposition, after loading."""
    import json

    d = save_tiny("bert", tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "hidden_act": "quick_gelu"}))
    (d / "model.safetensors").unlink()  # refused from the config alone
    with pytest.raises(UnsupportedArchitecture) as e:
        load(str(d))
    assert exit_code(e.value) == 4 and "quick_gelu" in str(e.value) and "gelu_new" in str(e.value)


def test_attention_of_another_direction_than_the_familys_is_refused_before_the_weights(tmp_path):
    """A BERT with ``is_decoder`` (causal attention) was decomposed as an encoder; a Gemma-3 with
    ``use_bidirectional_attention`` (EmbeddingGemma) was an internal error ("probabilities are not causal")."""
    import json

    import transformers as tr

    from report_builder.models.loading import from_model
    from tests.tiny_models import TINY

    d = save_tiny("bert", tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "is_decoder": True}))
    (d / "model.safetensors").unlink()
    with pytest.raises(UnsupportedArchitecture, match="is_decoder"):
        load(str(d))
    t = TINY["gemma3"]
    m = tr.Gemma3TextModel(tr.Gemma3TextConfig(**t.kwargs, use_bidirectional_attention=True,
                                               attn_implementation="eager"))
    with pytest.raises(UnsupportedArchitecture, match="use_bidirectional_attention"):
        from_model(m, None, name="bidi")


def test_a_config_saved_with_flash_attention_loads_with_eager_attention(tmp_path):
    """A config.json carrying ``"_attn_implementation": "flash_attention_2"`` (as some fine-tunes are saved) made
    transformers ask for flash-attn, and the load failed as 'the weight file may be truncated or damaged'."""
    import json

    d = save_tiny("llama", tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "_attn_implementation": "flash_attention_2"}))
    assert load(str(d)).model.config._attn_implementation == "eager"


def test_a_plan_refuses_the_config_too(tmp_path):
    """`adapter_of` (what a plan and a build ask before their first task) refused only the model type: a build
    swapping in a BERT with ``hidden_act: quick_gelu`` computed every other model's results, then failed."""
    import json

    from report_builder.models.loading import adapter_of

    d = save_tiny("bert", tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "hidden_act": "quick_gelu"}))
    with pytest.raises(UnsupportedArchitecture, match="quick_gelu"):
        adapter_of(str(d))


def test_legacy_buffers_inside_a_layer_still_load(tmp_path):
    """An old GPT-2 checkpoint keeps each layer's ``attn.masked_bias`` buffer (transformers reports it unused):
    a buffer, not a weight of the layers, so it is not refused; a bias the config does not declare is."""
    import shutil

    import transformers as tr

    from tests.tiny_models import TINY, _tokenizer_dir

    d = tmp_path / "gpt2"
    tr.GPT2Model(tr.GPT2Config(**TINY["gpt2"].kwargs)).save_pretrained(d)
    for f in _tokenizer_dir("gpt2").iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            shutil.copy(f, d / f.name)
    _edit_weights(d, lambda sd: sd.__setitem__("h.0.attn.masked_bias", torch.tensor(-1e4)))
    assert load(str(d)).adapter.family == "gpt2"
    _edit_weights(d, lambda sd: sd.__setitem__("h.1.ln_1.extra", torch.zeros(32)))  # a leaf module's foreign tensor
    with pytest.raises(UnsupportedArchitecture, match="h.1.ln_1.extra"):
        load(str(d))


def test_a_plan_finds_a_missing_layer_weight_in_the_safetensors_header(tmp_path):
    """A checkpoint lacking a layer weight passed `plan` (`adapter_of`) and was found only when a build loaded it,
    after the other models' results were computed; the header names every tensor without reading one."""
    from report_builder.models.loading import adapter_of

    d = save_tiny("bert", tmp_path / "m")
    _edit_weights(d, lambda sd: sd.pop("encoder.layer.1.attention.output.dense.weight"))
    with pytest.raises(ModelError) as e:
        adapter_of(str(d))
    assert exit_code(e.value) == 4 and "encoder.layer.1.attention.output.dense.weight" in str(e.value)
    d = save_tiny("bert", tmp_path / "u")
    _edit_weights(d, lambda sd: sd.__setitem__("encoder.layer.0.attention.self.distance_embedding.weight",
                                               torch.zeros(255, 8)))
    with pytest.raises(UnsupportedArchitecture, match="distance_embedding"):
        adapter_of(str(d))


def test_a_plan_reads_a_sharded_checkpoint_through_its_index(tmp_path):
    import json

    from report_builder.models.loading import adapter_of

    d = save_tiny("llama", tmp_path / "m")
    m = load(str(d)).model
    m.save_pretrained(d, max_shard_size="1MB")  # shards and model.safetensors.index.json
    (d / "model.safetensors").unlink(missing_ok=True)
    index = json.loads((d / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    assert adapter_of(str(d)).family == "llama"
    gone = "layers.1.mlp.up_proj.weight"
    _edit_shard = d / index["weight_map"].pop(gone)
    sd = load_file(_edit_shard)
    sd.pop(gone)
    save_file(sd, _edit_shard, metadata={"format": "pt"})
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelError, match=gone):
        adapter_of(str(d))


def test_a_plan_matches_names_as_the_loader_renames_them(tmp_path):
    """A task checkpoint (``bert.`` prefix, a head) with legacy ``gamma``/``beta`` norm names is complete: the plan
    renames as transformers does and passes it."""
    from report_builder.models.loading import adapter_of

    d = save_tiny("bert", tmp_path / "m")

    def legacy(sd):
        old = dict(sd)
        sd.clear()
        sd.update({"bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                   for k, v in old.items()})
        sd["cls.predictions.bias"] = torch.zeros(30522)

    _edit_weights(d, legacy)
    assert adapter_of(str(d)).family == "bert"
    assert load(str(d)).adapter.family == "bert"
