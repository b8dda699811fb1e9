"""Where ``--data-dir DIR`` (config key ``data_dir``) holds the sets that are not shipped offline.

``DIR/SST-2/dev.tsv``, ``DIR/MNLI/dev_matched.tsv``, ``DIR/conll2003/valid.txt``: the GLUE and CoNLL
distributions' own folder and file names, so an unpacked download works as it is. Pitfall: a folder
that is missing under ``DIR`` is not an error here; the set then comes from the ``datasets`` cache,
and only when that fails too does the loader say what is missing (naming both ways).
"""

from __future__ import annotations

import os

from report_builder.errors import option, speaking_cli

DATA_DIR_LAYOUT: dict[str, tuple[str, str]] = {
    "sst2": ("SST-2", "dev.tsv"),
    "mnli": ("MNLI", "dev_matched.tsv"),
    "conll2003": ("conll2003", "valid.txt"),
}
"""Dataset id -> (folder under ``data_dir``, the file in it the loader reads)."""


def data_dir_hint(set_id: str) -> str:
    """``--data-dir DIR (config key data_dir) with DIR/SST-2/dev.tsv`` for messages, through the API
    ``data_dir=DIR with DIR/SST-2/dev.tsv`` (`errors.option`); "" for sets not read from a data dir."""
    if set_id not in DATA_DIR_LAYOUT:
        return ""
    folder, name = DATA_DIR_LAYOUT[set_id]
    key = " (config key data_dir)" if speaking_cli() else ""  # the CLI's option, or a config file's key
    return f"{option('data_dir', 'DIR')}{key} with DIR/{folder}/{name}"


def data_dir_path(set_id: str, data_dir: str | None) -> str | None:
    """The folder of ``set_id`` under ``data_dir`` when it exists there, else ``None``."""
    if not data_dir or set_id not in DATA_DIR_LAYOUT:
        return None
    path = os.path.join(os.path.expanduser(data_dir), DATA_DIR_LAYOUT[set_id][0])
    return path if os.path.isdir(path) else None
