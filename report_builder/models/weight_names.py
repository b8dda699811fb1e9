"""The tensor names a model folder's weight files hold, without reading a tensor: a safetensors file
begins with an 8-byte length and a JSON header naming every tensor (`safetensors_names`), and a sharded
checkpoint's index maps every name to its shard (`checkpoint_names`). `compare` matches those names with
the model transformers builds from the config (a weightless meta copy), through transformers' own key
renaming (a task model's prefix, legacy names, its conversion mapping), and gives what the layers lack
and what inside them the model does not use: `loading.adapter_of` refuses both, so a plan says what a
load would find (`loading._check_weights`, after reading the weights).

Pitfalls: a header is untrusted input (bounded, validated, any damage means "not known": the load then
reports it); a pickled checkpoint (``pytorch_model.bin``) names its tensors only when unpickled, so it
is not read here; and where transformers' renaming API is not there, nothing is said (the load still
refuses). Links are followed (a hub snapshot's files are links to its blobs); only regular files are read.
"""
from __future__ import annotations

import json
import os
import re
import stat
import struct
from pathlib import Path

HEADER_MAX = 100 << 20
"""The largest safetensors header read (the safetensors library's own limit)."""
INDEX_MAX = 64 << 20
"""The largest sharded-checkpoint index read."""


def _regular_size(path: Path) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def safetensors_names(path: Path) -> set[str] | None:
    """The tensor names in a safetensors file's header, or None when the file is not a readable one."""
    size = _regular_size(path)
    if size is None or size < 8:
        return None
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > HEADER_MAX or n > size - 8:
                return None
            header = json.loads(f.read(n).decode("utf-8"))
    except (OSError, ValueError, RecursionError, struct.error):
        return None
    if not isinstance(header, dict):
        return None
    return {k for k in header if isinstance(k, str) and k != "__metadata__"}


def checkpoint_names(folder: Path) -> set[str] | None:
    """Every tensor name of a folder's safetensors checkpoint (one file, or shards through their index),
    or None when that is not known without loading (no safetensors, a damaged header or index)."""
    index = folder / "model.safetensors.index.json"
    if _regular_size(index) is not None:
        if _regular_size(index) > INDEX_MAX:
            return None
        try:
            wmap = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        except (OSError, ValueError, RecursionError, AttributeError):
            return None
        if not isinstance(wmap, dict) or not all(isinstance(k, str) for k in wmap):
            return None
        return set(wmap)
    single = folder / "model.safetensors"
    return safetensors_names(single) if _regular_size(single) is not None else None


def compare(meta, names: set[str]) -> tuple[list[str], list[str]] | None:
    """(missing, unexpected) checkpoint keys of the base model ``meta`` (built on the meta device) against the
    checkpoint ``names``, renamed as `from_pretrained` renames them; None where this transformers has no
    renaming API to ask. Missing: parameters (not buffers) the checkpoint lacks, tied and ignored ones
    aside; unexpected: names that map to nothing in the model, ignored patterns aside."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key
    except ImportError:
        return None
    try:
        mapping = get_model_conversion_mapping(meta)
        renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
        converters = [m for m in mapping if isinstance(m, WeightConverter)]
        state = meta.state_dict()
        prefix = meta.base_model_prefix
        found, unexpected = set(), []
        for key in sorted(names):
            renamed, _ = rename_source_key(key, renamings, converters, prefix, state)
            if renamed not in state and key in state:  # as from_pretrained: only the prefix, then
                renamed, _ = rename_source_key(key, [], [], base_model_prefix=prefix, meta_state_dict=state)
            (found.add if renamed in state else unexpected.append)(renamed)
    except Exception:  # noqa: BLE001 - transformers' internals changed shape: say nothing, the load still checks
        return None
    tied = set(getattr(meta, "all_tied_weights_keys", None) or ())
    missing = [k for k, _ in meta.named_parameters() if k not in found and k not in tied]
    return _kept(missing, meta._keys_to_ignore_on_load_missing), _kept(unexpected, _unexpected_patterns(meta))


def _unexpected_patterns(meta) -> set[str]:
    pats = set(meta._keys_to_ignore_on_load_unexpected or ())
    buffers = [b for b, _ in meta.named_buffers()]
    if any(b.endswith("rotary_emb.inv_freq") for b in buffers):
        pats.add(r"rotary_emb\.inv_freq")
    if any(b.endswith("position_ids") for b in buffers):
        pats.add(r"(^|\.)position_ids$")
    return pats


def _kept(keys: list[str], patterns) -> list[str]:
    if not patterns:
        return sorted(keys)
    rx = re.compile("|".join(f"({p})" for p in patterns))
    return sorted(k for k in keys if rx.search(k) is None)
