"""Whether a model source is causal (decoder-only), answered without torch where possible: memoised.

`is_causal` is `loading.adapter_of(source).causal`, memoised in ``<user cache>/causal.json`` on the
sha256 of the source's config file (`sources.config_file`: a ``config.json``, or an embedded GGUF
that holds its config), the transformers version and this package's ``models`` code, so a build
whose results are all cached never imports transformers (nor torch).

Pitfall: the memo key hashes every ``models/*.py`` file, so any edit of the adapters or the loader
asks transformers once more (the memo only saves time; it never changes an answer).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from report_builder import guard
from report_builder.models.fingerprints import file_sha256, memo_put, memo_read
from report_builder.models.loading import adapter_of
from report_builder.models.sources import config_file as source_config_file


def is_causal(source: str, revision: str | None = None) -> bool:
    """``adapter_of(source, revision).causal``, memoised on the source's config file (see the module)."""
    config_file = source_config_file(source, revision)
    if config_file is None or not config_file.is_file():
        return adapter_of(source, revision).causal
    from importlib import metadata

    code = hashlib.sha256()
    for p in sorted(Path(__file__).resolve().parent.glob("*.py")):
        code.update(p.name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    key = hashlib.sha256(json.dumps([source, revision, file_sha256(config_file), metadata.version("transformers"),
                                     code.hexdigest()]).encode()).hexdigest()
    memo_path = guard.user_cache_dir() / "causal.json"
    known = memo_read(memo_path).get(key)
    if isinstance(known, bool):
        return known
    causal = bool(adapter_of(source, revision).causal)
    memo_put(memo_path, key, causal)
    return causal
