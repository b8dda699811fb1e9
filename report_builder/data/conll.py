"""CoNLL-2003 English sentences from a local CoNLL file or through ``datasets``.

Local format: one token per line with the token in the first whitespace-separated column
(``EU NNP B-NP B-ORG``), a blank line between sentences, ``-DOCSTART-`` lines skipped. ``path``
may be the file or a folder holding ``valid.txt``, ``dev.txt``, ``eng.testa`` or ``testa.txt``.
Pitfall: the sentence text is the tokens joined by single spaces, so offsets refer to that joined
text, not to the original newspaper layout.
"""

from __future__ import annotations

from report_builder.errors import DataError
from .evalset import EvalSet, TextItem, make_set
from .glue import resolve_file
from .hub import load_hub_split

CONLL_FORMAT = ("CoNLL-2003 file: one token per line (token in the first column), blank line "
                "between sentences, -DOCSTART- lines skipped")
_DEFAULT_NAMES = ("valid.txt", "dev.txt", "eng.testa", "testa.txt")


def read_conll(path: str) -> list[list[str]]:
    """Sentences (token lists) of a CoNLL file.

    Args:
        path: The file.

    Returns:
        Non-empty sentences in file order.
    """
    sentences: list[list[str]] = []
    current: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if not fields:
                if current:
                    sentences.append(current)
                current = []
                continue
            if fields[0] == "-DOCSTART-":
                continue
            current.append(fields[0])
    if current:
        sentences.append(current)
    return sentences


def build_conll2003(path: str | None = None) -> EvalSet:
    """CoNLL-2003 English validation sentences, file order.

    Args:
        path: A CoNLL file (or its folder); ``None`` loads ``eriktks/conll2003`` via ``datasets``.

    Raises:
        DataError: If the file is missing or holds no sentences.
    """
    if path is not None:
        src = resolve_file(path, _DEFAULT_NAMES, "conll2003", CONLL_FORMAT)
        sentences = read_conll(src)
        if not sentences:
            raise DataError(f"dataset 'conll2003' is empty: no sentences in {src}; "
                            f"expected {CONLL_FORMAT}")
    else:
        src = "hub: eriktks/conll2003 validation"
        ds = load_hub_split("conll2003", "eriktks/conll2003", None, "validation", CONLL_FORMAT)
        sentences = [list(t) for t in ds["tokens"] if t]
    items = [TextItem(f"conll2003-{k:05d}", " ".join(toks)) for k, toks in enumerate(sentences)]
    return make_set("conll2003", "CoNLL-2003 (dev)", items, source=src,
                    licence="Reuters Corpus terms (CoNLL-2003 annotations: research use)",
                    domain="News",
                    built="Every sentence of the CoNLL-2003 English development set in file "
                          "order, tokens joined by spaces.")
