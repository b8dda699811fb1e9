"""Optional loading through the ``datasets`` library (imported lazily).

Pitfall: ``datasets`` is not a dependency (the [hub] extra) and the hub is often unreachable: both its
absence (the message names the extra, as `extras.message` does everywhere) and a split that cannot be
loaded are `errors.DataNotHere` (a set not on this machine, which `plan` may estimate past); both name
the two fixes (the library with hub access, or a local file passed as ``path``).
"""

from __future__ import annotations

from typing import Any

from report_builder.errors import DataNotHere, DatasetsLibraryMissing, shown
from report_builder.extras import message

from .layout import data_dir_hint


def load_hub_split(set_id: str, repo: str, config: str | None, split: str, local_hint: str) -> Any:
    """Load one split of a hub dataset.

    Args:
        set_id: Our dataset id (for messages).
        repo: Hub dataset id, e.g. ``"nyu-mll/glue"``.
        config: Dataset configuration, e.g. ``"sst2"``.
        split: Split name, e.g. ``"validation"``.
        local_hint: What to pass as ``path`` instead (format description).

    Returns:
        The ``datasets.Dataset``.

    Raises:
        DatasetsLibraryMissing: ``datasets`` (the [hub] extra) is not installed.
        DataNotHere: the split cannot be loaded (not cached, hub unreachable).
    """
    where = data_dir_hint(set_id)
    also = f", or {where}" if where else ""
    try:
        import datasets  # noqa: PLC0415 - optional, heavy
    except ImportError as exc:
        raise DatasetsLibraryMissing(f"{message('datasets', f'dataset {shown(set_id)}')}; or give a local file instead: "
                                     f"pass path=<{local_hint}>{also}") from exc
    # never a dataset's loading script: `datasets` 4 has none; 3.x runs one only when asked (and
    # HF_DATASETS_TRUST_REMOTE_CODE can ask), so it is told not to
    no_code = {"trust_remote_code": False} if str(getattr(datasets, "__version__", "")).split(".")[0] in ("2", "3") else {}
    try:
        return datasets.load_dataset(repo, config, split=split, **no_code)
    except Exception as exc:  # noqa: BLE001 - offline hub, missing config, ...
        raise DataNotHere(
            f"could not load {repo}{'/' + config if config else ''} split {shown(split)} for "
            f"{shown(set_id)} through `datasets` ({type(exc).__name__}: {exc}); without hub access "
            f"pass path=<{local_hint}>{also}"
        ) from exc
