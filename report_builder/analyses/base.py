"""What an analysis is: a declaration (id, version, cache-key parameters, inputs, size, compute).

Each module of `report_builder.analyses` (``architecture``, ``k21_mixing``, ...) defines one
``ANALYSIS = Analysis(...)``; `analyses.registry` lists them, `analyses.planning` plans them and
`executors` run them. A `Subject` names what one task is about (one configured model and, for
per-dataset analyses, one dataset) with plain, picklable data only, so a task can travel to another
process.

Pitfall: ``params`` is the cache key. It must name every configuration value that changes the
analysis' tables (and nothing that does not), and it must never change for an unchanged result,
or every existing cache entry is silently recomputed.

Cost model: each analysis declares what it costs as a `Work` (``work=``): its kind of work (which
`costs.flops` formula prices its decomposition) and the seconds its own statistics take on the
host. `report_builder.costs` reads it from the declaration; nothing else lists the analyses.

Shards: an analysis that aggregates over sequences may declare a `Shard` — ``map`` computes
sufficient statistics for a contiguous range ``[lo, hi)`` of its items in their canonical order
(item index = ``EncodedSeq.seq``), ``reduce`` turns the partials of consecutive ranges into its
tables. Its ``compute`` is ``reduce([map(all items)])`` (`Shard.whole`), so a sharded build and an
unsharded one run the same code and give the same bytes (`analyses.planning` plans the
shards). Pitfall: a reduce must not depend on where the boundaries fall — counts are
summed, maxima taken, top-k merged under a total order, per-sequence rows concatenated in sequence
order, and float sums folded over per-sequence values in sequence order (never over shard subtotals).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from report_builder.config import Config, DatasetConfig, ModelConfig

def tf32_enabled(kind: str) -> bool:
    """Whether float32 matrix products on ``kind`` run in TF32 (changes results on a GPU)."""
    if kind != "cuda":
        return False
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32)


SCOPES = ("model", "dataset", "first_dataset")
"""How often an analysis runs: once per model, per (model, dataset), or for a model's first dataset."""

INPUTS = ("weights", "pair", "masked", "unmasked", "examples")
"""What an analysis reads: the weights alone, the K21 example pair, the K21-masked dataset (encoders),
the unmasked dataset, or a few example sequences (the pair, then the dataset's first items)."""


@dataclass(frozen=True)
class Subject:
    """One configured model and (per-dataset analyses) one dataset, as plain data.

    Attributes:
        cfg: the whole build configuration.
        model: the model's configuration entry. fingerprint: hash of its weights.
        causal: its adapter's causality (decoder-only: pairs ``j <= i``, never masked).
        dataset: the dataset's configuration entry, or None. dataset_hash: its content hash.
        n_items: the number of items the evaluation set holds.
        first: whether this is the first configured dataset.
    """

    cfg: "Config"
    model: "ModelConfig"
    fingerprint: str
    causal: bool
    dataset: "DatasetConfig | None" = None
    dataset_hash: str | None = None
    n_items: int = 0
    first: bool = False

    def base_params(self) -> dict[str, Any]:
        """Cache-key parameters every analysis of this model shares.

        Off the CPU, also the device kind and the TF32 flag: a GPU's results differ from the CPU's in
        the last bits. Only there, so every CPU key stays what it was; the GPU index and a device map
        spreading the layers over several GPUs change no result and are not in the key. The chunk rule
        (`decompose.chunks`) only when it is not the device's own class (results differ in the last
        bits), and a reduced precision mode's error bound (`schema.PRECISIONS`), so a default key stays
        what it was.
        """
        from report_builder.decompose.chunks import default_class
        from report_builder.schema import precision

        p = {"model": self.model.name, "fingerprint": self.fingerprint, "dtype": self.cfg.dtype}
        kind = str(self.cfg.device).split(":")[0]
        if kind != "cpu":
            p.update(device=kind, tf32=tf32_enabled(kind))
        rule = getattr(self.cfg, "chunk_rule", "auto")
        if rule not in ("auto", default_class(kind)):
            p["chunk_rule"] = rule
        if self.cfg.dtype != "float32":
            p["precision_bound"] = precision(self.cfg.dtype).bound
        return p

    def data_params(self) -> dict[str, Any]:
        """`base_params` plus what identifies the dataset as this analysis reads it."""
        d = self.dataset
        return {**self.base_params(), "dataset": d.id, "dataset_hash": self.dataset_hash, "max_length": d.max_length}

    @property
    def label(self) -> str:
        """How the build log names this subject (``model`` or ``model · dataset``)."""
        return self.model.name if self.dataset is None else f"{self.model.name} · {self.dataset.id}"


SUBJECT_KEYS = ("model", "fingerprint", "dtype", "device", "tf32", "chunk_rule", "precision_bound", "dataset",
                "dataset_hash")
"""Keys of `Subject.base_params`/`data_params` that name a task's subject — its model and weights, its
dataset and data, its device —, which a figure's provenance records as such (``models``, ``datasets``,
``device``, ``dtype``); every other cache-key parameter is a parameter of the analysis (`input_params`)."""


def input_params(params: dict[str, Any]) -> dict[str, Any]:
    """An analysis task's cache-key ``params`` without the `SUBJECT_KEYS`: the parameters its tables depend
    on besides the weights, the data and the device (``max_length``, ``mask_rate``, ``top_k``, ...). A
    figure's recipe records these for the analyses whose tables it reads (`citations.recipe`), so a figure
    diff names a parameter only when it can change the figure."""
    return {k: v for k, v in params.items() if k not in SUBJECT_KEYS}


WORKS = ("none", "weights", "ratios", "maps", "full")
"""Kinds of work: nothing to compute, weights only, K21 ratios (attention step), K21 maps (attention
step + two Gram maps), every scope's map (the full layer); `costs.flops.work_flops` prices each."""


@dataclass(frozen=True)
class TableSize:
    """What the rows of an analysis' tables depend on, for the plan's disk estimate (`Work.rows`).

    Attributes:
        layers, d: the model's layers and hidden size.
        lengths: token count of each sequence the task decomposes.
        causal: pairs ``j <= i`` only.
        top_k, n_scopes: the K24 top-pairs count and the layout's number of scopes.
    """

    layers: int
    d: int
    lengths: tuple[int, ...]
    causal: bool
    top_k: int
    n_scopes: int

    @property
    def tokens(self) -> int:
        return sum(self.lengths)

    @property
    def pairs(self) -> int:
        """Token pairs of all sequences (``j <= i`` for a causal model)."""
        return sum(n * (n + 1) // 2 if self.causal else n * n for n in self.lengths)


@dataclass(frozen=True)
class Work:
    """What one analysis costs besides its FLOPs (its cost model, read by `report_builder.costs`).

    Attributes:
        kind: one of `WORKS`.
        host_s, host_pair_s: seconds per (sequence, layer), fixed and per token pair, of the
            analysis' own statistics and tables on the host CPU (numpy/pandas; also on GPU builds).
        task_s: fixed host seconds per task (k21_frequency maps the word frequencies to the vocabulary).
        whole_set_rows: its tables have a row per token of the whole set even when it decomposes
            nothing (k21_frequency of a causal model reuses k21_mixing's pass).
        rows: table name -> the rows the analysis writes for a task of this `TableSize` (estimates
            where the count depends on the data; the plan's disk estimate).
        batch_divisor: on the batched (GPU) path the engine decomposes ``batch_size // batch_divisor``
            sequences per padded batch (None: batches of 8, for analyses that decompose few sequences).

    Host costs are measured, not derived: the K24 pass's statistics by ``report-builder bench
    --k24-pass`` (`stats.host_stats.HostStats` on random float32 maps, see `k24_scopes`), the K21
    tables by ``report-builder bench --k21-pass`` (`stats.k21_tables` on random ratios, see
    `k21_mixing`, `k21_frequency`), the example maps' tables (one row
    per pair, scope and layer) and k21_frequency's rank table (0.1-0.3 s per task, also for causal
    models, which decompose nothing for it) from the smoke build's task times.
    """

    kind: str
    host_s: float = 0.0
    host_pair_s: float = 0.0
    task_s: float = 0.0
    whole_set_rows: bool = False
    rows: Callable[[TableSize], dict[str, int]] = lambda t: {}
    batch_divisor: int | None = None

    def batch(self, batch_size: int | None) -> int | None:
        """Sequences per padded batch on the batched path, from the configured ``batch_size`` (None: the
        engine's rule, as many as the device's free memory holds)."""
        if self.batch_divisor is None:
            return 8
        return None if batch_size is None else max(1, batch_size // self.batch_divisor)

    def __post_init__(self) -> None:
        if self.kind not in WORKS:
            raise ValueError(f"work kind {self.kind!r} is not one of {WORKS}")


SHARD_SUFFIX = ".shard"
"""Cache directory (and task analysis id) of an analysis' shards: ``<analysis id>.shard``."""


def shard_id(analysis: str) -> str:
    """The analysis id under which the shards (partial results) of ``analysis`` are cached."""
    return analysis + SHARD_SUFFIX


def base_id(analysis: str) -> str:
    """The registered analysis id of a task's analysis id (a shard's parent, else itself)."""
    return analysis[: -len(SHARD_SUFFIX)] if analysis.endswith(SHARD_SUFFIX) else analysis


@dataclass(frozen=True)
class Shard:
    """How an analysis splits, exactly, over contiguous ranges of its items (sequence shards).

    Attributes:
        items: Subject -> how many items the analysis reads, in canonical order (ranges cover
            ``[0, items)``).
        map: ``(run, lo, hi)`` -> partial tables: sufficient statistics of items ``[lo, hi)``.
        reduce: ``(subject, partials)`` -> the analysis' tables, from the partials of consecutive
            ranges covering every item, in range order. Exact: the same bytes for any split.
    """

    items: Callable[[Subject], int]
    map: Callable[["Run", int, int], "dict[str, pd.DataFrame]"]
    reduce: Callable[[Subject, "list[dict[str, pd.DataFrame]]"], "dict[str, pd.DataFrame]"]

    def whole(self, run: "Run") -> "dict[str, pd.DataFrame]":
        """The unsharded compute: the reduce of one partial over every item."""
        return self.reduce(run.subject, [self.map(run, 0, self.items(run.subject))])


@dataclass(frozen=True)
class Analysis:
    """One analysis, declared as data.

    Attributes:
        id: permanent id (cache directory, provenance). version: bump when its results change.
        scope: one of `SCOPES`. inputs: one of `INPUTS`.
        params: Subject -> the cache-key parameters (see the module pitfall).
        size: Subject -> sequences this analysis decomposes (0 for weights-only); used for planning.
        compute: `Run` -> result tables (name -> tidy DataFrame, columns in `schema.TABLES`).
        needs: ids of analyses of the same subject whose tables ``compute`` may read
            (through `Run.result`); the runner plans them first.
        needs_if: Subject -> whether this subject's task reads its ``needs`` at all (None: always).
            Where it is false the task waits for none of them (an executor may run it, its shards
            included, beside them); ``compute`` must then not call `Run.result`.
        tables: names of the tables it returns.
        work: its cost model (`Work`): kind of work and host-side statistics cost.
        shard: how it splits over sequence shards (`Shard`), or None (always one task). When set,
            ``compute`` must be ``shard.whole``.
    """

    id: str
    version: int
    scope: str
    inputs: str
    params: Callable[[Subject], dict[str, Any]]
    size: Callable[[Subject], int]
    compute: Callable[["Run"], "dict[str, pd.DataFrame]"]
    tables: tuple[str, ...]
    work: Work
    needs: tuple[str, ...] = ()
    shard: Shard | None = None
    needs_if: Callable[[Subject], bool] | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"analysis {self.id}: scope {self.scope!r} is not one of {SCOPES}")
        if self.inputs not in INPUTS:
            raise ValueError(f"analysis {self.id}: inputs {self.inputs!r} is not one of {INPUTS}")
        if self.id.endswith(SHARD_SUFFIX):
            raise ValueError(f"analysis {self.id}: an id may not end in {SHARD_SUFFIX!r} (its shards' id)")


class Run:
    """What an analysis' ``compute`` may use; provided by an executor (`executors.base.TaskRun`).

    Attributes:
        subject: the `Subject`.
    """

    subject: Subject

    def lm(self):
        """The loaded model (loaded on first use, shared by the subject's tasks)."""
        raise NotImplementedError

    def eval_set(self):
        """The subject's `EvalSet` (per-dataset analyses only)."""
        raise NotImplementedError

    def progress(self, what: str, total: int):
        """A progress-bar context manager; calling it with ``k`` advances ``k`` sequences."""
        raise NotImplementedError

    def result(self, analysis: str) -> "dict[str, pd.DataFrame]":
        """The tables of analysis ``analysis`` (one of ``needs``) for the same subject."""
        raise NotImplementedError

    def results(self, analysis: str) -> "list[dict[str, pd.DataFrame]]":
        """The tables of every need of this task named ``analysis`` (e.g. its sequence shards), in order."""
        raise NotImplementedError
