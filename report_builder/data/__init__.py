"""Evaluation sets: tokenizer-independent builders and loaders, content hashes, encoding.

Public surface:

- :func:`load_eval_set` / :data:`DATASETS` / :func:`list_datasets` — build a set by id
  (``wiki``, ``sentiment-sample``, ``news-sample`` offline; ``sst2``, ``mnli``, ``conll2003`` via
  ``datasets`` or a local file; any other id with ``path:`` or ``hub:`` is a user's own set).
- :class:`EvalSet`, :class:`TextItem` — the data, with a stable :attr:`EvalSet.hash`.
- :func:`encode`, :class:`EncodedSeq`, :func:`mean_tokens` — per-tokenizer encoding with K21
  masking and token categories.
- :func:`report_builder.data.frequency.frequency_ranks` — token frequency ranks (wordfreq); kept
  out of this namespace's import so that loading sets does not import wordfreq.

Errors are `report_builder.errors.DataError`. Pitfall: nothing here imports torch; tokenizers are duck-typed Hugging Face tokenizers.
"""

from .encode import K21_MASK_RATE, EncodedSeq, apply_mask, encode, mean_tokens
from .custom import DataSource
from .evalset import EvalSet, TextItem, items_hash
from .registry import DATASETS, OFFLINE_DATASETS, list_datasets, load_entry, load_eval_set

__all__ = [
    "DATASETS", "DataSource", "EncodedSeq", "EvalSet", "K21_MASK_RATE",
    "OFFLINE_DATASETS", "TextItem", "apply_mask", "encode", "items_hash", "list_datasets",
    "load_entry", "load_eval_set", "mean_tokens",
]
