"""SST-2 and MNLI (GLUE dev sets) from local GLUE TSV files or through ``datasets``.

Local format: the GLUE distribution's tab-separated files with a header row. SST-2 ``dev.tsv``
has columns ``sentence`` and ``label``; MNLI ``dev_matched.tsv`` has (among others) ``sentence1``
and ``sentence2``. ``path`` may be the file or the task folder holding it. Pitfall: GLUE TSVs
contain unbalanced quote characters, so they are read with quoting disabled (``csv.QUOTE_NONE``);
pandas' default quoting silently merges rows.
"""

from __future__ import annotations

import csv
import os

from report_builder.errors import DataError, shown
from .evalset import EvalSet, TextItem, make_set
from .hub import load_hub_split

SST2_FORMAT = "GLUE SST-2 dev.tsv: tab-separated, header row with columns 'sentence' and 'label'"
MNLI_FORMAT = ("GLUE MNLI dev_matched.tsv: tab-separated, header row with columns 'sentence1' "
               "and 'sentence2'")


def resolve_file(path: str, default_names: tuple[str, ...], set_id: str, fmt: str) -> str:
    """The data file a user pointed at (a file, or a folder holding one of ``default_names``).

    Raises:
        DataError: If nothing usable exists at ``path``.
    """
    if os.path.isdir(path):
        for name in default_names:
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return candidate
        raise DataError(f"no {' / '.join(default_names)} in folder {path} for {shown(set_id)}; "
                        f"expected {fmt}")
    if not os.path.isfile(path):
        raise DataError(f"data file for {shown(set_id)} not found: {path}; expected {fmt}")
    return path


def read_tsv(path: str, columns: tuple[str, ...], set_id: str, fmt: str) -> list[tuple[str, ...]]:
    """Rows of the named columns of a headed TSV file.

    Args:
        path: The file.
        columns: Column names to return, in this order.
        set_id: Dataset id (for messages).
        fmt: Format description (for messages).

    Returns:
        One tuple per data row (rows with missing or empty fields are skipped).

    Raises:
        DataError: If a column is missing or there are no rows.
    """
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None:
            raise DataError(f"dataset {shown(set_id)} is empty: {path} has no header or rows; "
                            f"expected {fmt}")
        header = [h.strip() for h in header]
        missing = [c for c in columns if c not in header]
        if missing:
            raise DataError(f"{path} lacks column(s) {missing} (header: {header}); expected {fmt}")
        idx = [header.index(c) for c in columns]
        rows = []
        for row in reader:
            if len(row) <= max(idx):
                continue
            values = tuple(row[i].strip() for i in idx)
            if all(values):
                rows.append(values)
    if not rows:
        raise DataError(f"dataset {shown(set_id)} is empty: {path} has a header but no rows; "
                        f"expected {fmt}")
    return rows


def build_sst2(path: str | None = None) -> EvalSet:
    """SST-2 dev sentences (single texts), file order.

    Args:
        path: GLUE ``SST-2/dev.tsv`` (or its folder); ``None`` loads ``nyu-mll/glue`` via
            ``datasets``.
    """
    if path is not None:
        src = resolve_file(path, ("dev.tsv",), "sst2", SST2_FORMAT)
        texts = [r[0] for r in read_tsv(src, ("sentence",), "sst2", SST2_FORMAT)]
    else:
        src = "hub: nyu-mll/glue sst2 validation"
        ds = load_hub_split("sst2", "nyu-mll/glue", "sst2", "validation", SST2_FORMAT)
        texts = [s.strip() for s in ds["sentence"] if s and s.strip()]
    items = [TextItem(f"sst2-{k:05d}", t) for k, t in enumerate(texts)]
    return make_set("sst2", "SST-2 (dev)", items, source=src,
                    licence="see GLUE / Stanford Sentiment Treebank terms", domain="Movie reviews",
                    built="Every sentence of the SST-2 development set in file order.")


def build_mnli(path: str | None = None) -> EvalSet:
    """MNLI matched dev premise/hypothesis pairs, file order.

    Args:
        path: GLUE ``MNLI/dev_matched.tsv`` (or its folder); ``None`` loads ``nyu-mll/glue`` via
            ``datasets``.
    """
    if path is not None:
        src = resolve_file(path, ("dev_matched.tsv",), "mnli", MNLI_FORMAT)
        pairs = read_tsv(src, ("sentence1", "sentence2"), "mnli", MNLI_FORMAT)
    else:
        src = "hub: nyu-mll/glue mnli validation_matched"
        ds = load_hub_split("mnli", "nyu-mll/glue", "mnli", "validation_matched", MNLI_FORMAT)
        pairs = [(a.strip(), b.strip()) for a, b in zip(ds["premise"], ds["hypothesis"])
                 if a and b and a.strip() and b.strip()]
    items = [TextItem(f"mnli-{k:05d}", a, b) for k, (a, b) in enumerate(pairs)]
    return make_set("mnli", "MNLI (dev matched)", items, source=src,
                    licence="mixed (OANC, CC BY-SA 3.0 Wikipedia-derived genres; see MultiNLI)",
                    domain="Mixed genres (NLI pairs)",
                    built="Every premise/hypothesis pair of the MNLI matched development set "
                          "in file order, encoded as a sequence pair.")
