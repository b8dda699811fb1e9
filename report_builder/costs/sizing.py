"""Plan before download: what a plan reads of models and data that are not here, estimated from
recorded facts, and which numbers are estimates.

`Sizing` answers the planner's and the estimate's questions about each model and dataset: from the
model's files and the data when they are here (exactly as a build reads them), otherwise

- a model whose config is not cached: its architecture recorded in `papers.PAPER_SHAPES` (an HF
  config built from it; no download) — flag ``shape``;
- a model whose weights are not cached: no fingerprint, so no cache key (nothing can be cached) —
  flag ``key``;
- a model whose tokenizer is not cached: token lengths from the embedded MiniLM's tokenizer
  (bert-base-uncased's WordPiece vocabulary: exact for the BERT family, near for BPE models) — flag
  ``lengths``;
- a paper dataset that is not here: its item count from the split size recorded in
  `papers.PRESET_DATASETS` (capped by the configured ``n``) and every item at the paper's mean length
  in BERT tokens (K21 Table 1, ``resources/k21_reported.yaml``), capped at ``max_length`` — flags
  ``items`` and ``lengths``.

A model or dataset with neither its files nor a record is an error, as before (one line); so is a file
the configuration names that is missing or unreadable (only `errors.DataNotHere`, a set read through
``datasets`` that is not on this machine, is estimated past). Nothing is
ever downloaded: a hub id not in the local HF cache is "not here" whether or not the hub is
reachable. Pitfall: every item of a missing set at the mean length underestimates the n² terms
(their mean exceeds the square of the mean length); the flag says so.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from report_builder import papers
from report_builder.errors import DataNotHere, ReportBuilderError
from report_builder.models.embedded import PROXY_TOKENIZER

FLAGS: dict[str, str] = {
    "shape": "model size from the architecture recorded in papers.py (its config is not cached)",
    "key": "no cache key (its weights are not cached, so nothing can be cached)",
    "items": "item count from the split size recorded in papers.py (the data is not here)",
    "lengths": "token lengths estimated: the embedded MiniLM tokenizer (the model's is not cached) or, for "
               "data that is not here, every item at the paper's mean length (K21 Table 1; the n^2 terms "
               "then come out low)",
}
"""Each estimate flag and what it means (the plan's legend)."""

UNKNOWN = "unknown"
"""The fingerprint / dataset hash of what is not here (cache keys built on it match nothing)."""


@dataclass(frozen=True)
class SizedSet:
    """A paper dataset that is not here: its id, estimated item count and mean length in BERT tokens.
    Quacks like an `EvalSet` for the planner (``items``, ``hash``, ``head``)."""

    id: str
    n_items: int
    mean_tokens: int
    why: str

    @property
    def items(self) -> tuple:
        return (None,) * self.n_items

    @property
    def hash(self) -> str:  # noqa: A003 - as EvalSet
        return f"{UNKNOWN}:{self.id}"

    def head(self, n: int | None) -> "SizedSet":
        return self if n is None or n >= self.n_items else dataclasses.replace(self, n_items=n)

    def __len__(self) -> int:
        return self.n_items


def paper_mean_tokens() -> dict[str, int]:
    """Dataset id -> the paper's mean length in BERT tokens (K21 Table 1, packaged YAML)."""
    from importlib import resources

    import yaml

    text = resources.files("report_builder").joinpath("resources/k21_reported.yaml").read_text("utf-8")
    table = yaml.safe_load(text).get("table1_datasets", {})
    out = {k: int(v[1]) for k, v in table.items()}
    if "wikipedia" in out:
        out.setdefault("wiki", out["wikipedia"])
    return out


class Sizing:
    """The planner's and the estimate's view of a configuration's models and data (module docstring).

    Attributes:
        flags: ``("model", source)`` or ``("dataset", id)`` -> the estimate flags (`FLAGS`) raised
            for it, with the reason in ``why``.
    """

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.flags: dict[tuple[str, str], set[str]] = {}
        self.why: dict[tuple[str, str], str] = {}
        self.errors: dict[str, str] = {}
        self._configs: dict[tuple, tuple[Any, Any]] = {}
        self._means: dict[str, int] | None = None

    def _flag(self, kind: str, name: str, *flags: str, why: str = "") -> None:
        self.flags.setdefault((kind, name), set()).update(flags)
        if why:
            self.why.setdefault((kind, name), why)

    def model_flags(self, mc) -> set[str]:
        return self.flags.get(("model", mc.source), set())

    def dataset_flags(self, dataset_id: str | None) -> set[str]:
        return self.flags.get(("dataset", dataset_id), set()) if dataset_id is not None else set()

    # ---------------------------------------------------------------- data
    def eval_set(self, dc) -> Any:
        """The configured set, or a `SizedSet` for a paper dataset that is not here."""
        from report_builder.data import load_entry

        try:
            return load_entry(dc, self.cfg.data_dir)
        except DataNotHere as e:  # only "not on this machine": a bad or missing file the user gave fails
            rec = {d.id: d for d in papers.PRESET_DATASETS}.get(dc.id)
            means = self.means()
            if rec is None or not rec.split_size or dc.id not in means:
                raise
            from report_builder.data.layout import DATA_DIR_LAYOUT

            n = min(dc.n, rec.split_size) if dc.n else rec.split_size
            where = DATA_DIR_LAYOUT.get(dc.id)
            self._flag("dataset", dc.id, "items", "lengths", why=f"DIR/{where[0]}/{where[1]}" if where else "")
            self.errors[dc.id] = str(e)
            return SizedSet(dc.id, n, means[dc.id], str(e))

    def means(self) -> dict[str, int]:
        if self._means is None:
            self._means = paper_mean_tokens()
        return self._means

    # ---------------------------------------------------------------- models
    def _snapshot(self, mc):
        """(hub id not here?, its cached snapshot folder or None)."""
        from report_builder.models.sources import hub_snapshot_dir, is_hub_id

        if not is_hub_id(mc.source):
            return False, None
        snap = hub_snapshot_dir(mc.source, mc.revision)
        return snap is None, snap

    def fingerprint(self, mc) -> str:
        """The weights' fingerprint, or `UNKNOWN` (flag ``key``) for a hub model whose weights are not cached."""
        from report_builder.models import loading
        from report_builder.models.fingerprints import WEIGHT_SUFFIXES

        missing, snap = self._snapshot(mc)
        if missing or (snap is not None and not any(p.suffix in WEIGHT_SUFFIXES for p in snap.iterdir())):
            self.config_and_tokenizer(mc)  # an unknown model without a record fails here, in one line
            self._flag("model", mc.source, "key", why="weights not in the local Hugging Face cache")
            return f"{UNKNOWN}:{mc.source}"
        return loading.fingerprint(mc.source, mc.revision)

    def causal(self, mc) -> bool:
        from report_builder.models import causality, registry

        if self._snapshot(mc)[0]:
            return bool(registry.for_config(self.config_and_tokenizer(mc)[0]).causal)
        return causality.is_causal(mc.source, mc.revision)

    def config_and_tokenizer(self, mc) -> tuple[Any, Any]:
        """The model's HF config and tokenizer: cached files, else the recorded architecture (flag
        ``shape``) and the proxy tokenizer (flag ``lengths``)."""
        key = (mc.source, mc.revision)
        if key in self._configs:
            return self._configs[key]
        from report_builder.models.loading import config_and_tokenizer

        missing, snap = self._snapshot(mc)
        if missing:
            shape = papers.PAPER_SHAPES.get(mc.source)
            if shape is None:
                config_and_tokenizer(mc.source, mc.revision)  # raises the usual one-line error
            from transformers import AutoConfig

            config = AutoConfig.for_model(shape.model_type, **shape.config_kwargs())
            self._flag("model", mc.source, "shape", "lengths", why="not in the local Hugging Face cache")
            out = (config, self.proxy_tokenizer())
        else:
            try:
                out = config_and_tokenizer(mc.source, mc.revision)
            except ReportBuilderError:  # the model's own one-line error (custom code, a bad config, ...)
                raise
            except (OSError, ValueError, TypeError) as e:
                if snap is None or (isinstance(e, OSError) and e.errno is not None):  # the disk, not the files
                    raise
                from transformers import AutoConfig  # config cached, tokenizer files not

                self._flag("model", mc.source, "lengths", why="tokenizer files not in the local Hugging Face cache")
                out = (AutoConfig.from_pretrained(str(snap), trust_remote_code=False), self.proxy_tokenizer())
        self._configs[key] = out
        return out

    def proxy_tokenizer(self):
        if ("proxy",) not in self._configs:
            from report_builder.models.loading import config_and_tokenizer

            self._configs[("proxy",)] = config_and_tokenizer(PROXY_TOKENIZER)
        return self._configs[("proxy",)][1]

    # ---------------------------------------------------------------- what a task's numbers rest on
    def task_flags(self, mc, dataset_id: str | None, reads_tokens: bool) -> list[str]:
        """The estimate flags of one task, in `FLAGS` order (``lengths`` only for a task that reads tokens)."""
        got = self.model_flags(mc) | self.dataset_flags(dataset_id)
        if not reads_tokens:
            got = got - {"lengths"}
        return [f for f in FLAGS if f in got]

    def summary(self) -> dict[str, Any]:
        """What was estimated: ``{"models": {source: {"flags", "why"}}, "datasets": {id: {"flags", "why"
        (where --data-dir DIR reads it), "error" (the loader's message)}}}``."""
        out: dict[str, Any] = {"models": {}, "datasets": {}}
        for (kind, name), flags in sorted(self.flags.items()):
            row = {"flags": [f for f in FLAGS if f in flags], "why": self.why.get((kind, name), "")}
            if kind == "dataset":
                row["error"] = self.errors.get(name, "")
            out[kind + "s"][name] = row
        return out
