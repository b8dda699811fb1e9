"""Every task of a plan priced (FLOPs, seconds, peak memory, disk) from model configs and the real
token lengths, the totals, and the 1/N-GPU answer.

Pitfall: a task's sequences are those its analysis reads (`analyses.inputs`), a shard's its range;
a reduce writes the whole tables and computes nothing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from report_builder.costs import flops as F
from report_builder.costs.devices import MODEL_ITEMSIZE, device_rate, precision_of
from report_builder.costs.flops import (Shape, default_factors, expansion_flops, forward_flops,
                                        ig_points, shape_of, work_flops)
from report_builder.costs.footprint import (GIB, capture_bytes, chunk_bytes, disk_bytes, layer_fixed_bytes,
                                            table_rows)
from report_builder.costs.sizing import FLAGS, Sizing, SizedSet
from report_builder.errors import option
from report_builder.costs.text import fmt_bytes

if TYPE_CHECKING:  # pragma: no cover
    from report_builder.analyses.planning import Plan, Task
    from report_builder.cache import Cache


@dataclass
class TaskCost:
    """The cost of one task; ``cached`` tasks cost nothing to compute (their disk is already used)."""

    analysis: str
    model: str
    dataset: str | None
    shard: list[int] | None
    reduces: int
    sequences: int
    tokens: int
    max_tokens: int
    cached: bool
    key: str
    work: str
    flops: int
    forward_flops: int
    seconds: float | None
    device_seconds: float | None
    host_seconds: float
    load_seconds: float
    peak_bytes: int
    disk_bytes: int
    rows: dict[str, int] = field(default_factory=dict)
    estimated: list[str] = field(default_factory=list)


def balance(seconds: list[float], n: int) -> tuple[float, list[float]]:
    """Greedy balanced assignment (longest first, each to the least-loaded of ``n`` workers):
    the makespan and each worker's load. A task is never split."""
    loads = [0.0] * max(1, n)
    for s in sorted(seconds, reverse=True):
        k = min(range(len(loads)), key=loads.__getitem__)
        loads[k] += s
    return max(loads), loads


class _TokenRun:
    """The part of `analyses.base.Run` the input functions read: the subject, its set, a tokenizer and the
    model's positions (from its config: a text over them is refused here as the build refuses it)."""

    def __init__(self, subject, tokenizer, eval_set, config=None):
        self.subject, self._tok, self._set, self._config = subject, tokenizer, eval_set, config

    def lm(self):
        return self

    @property
    def tokenizer(self):
        return self._tok

    def max_positions(self) -> int:
        from report_builder.models import registry as adapters

        return int(adapters.for_config(self._config).max_positions(self._config))

    def eval_set(self):
        return self._set


class _Lengths:
    """Token lengths of the sequences each task decomposes: the real sets encoded with each model's
    tokenizer by the same `analyses.inputs` functions the analyses call (with ``sizing``: what is not
    here, estimated by `sizing.Sizing`)."""

    def __init__(self, plan: "Plan", sizing: "Sizing | None" = None):
        self.plan = plan
        self.sizing = sizing
        self._tok: dict[tuple, Any] = {}
        self._sets: dict[tuple, list[int]] = {}

    def config_and_tokenizer(self, mc):
        key = (mc.source, mc.revision)
        if key not in self._tok:
            from report_builder.models.loading import config_and_tokenizer

            self._tok[key] = (self.sizing.config_and_tokenizer(mc) if self.sizing is not None
                              else config_and_tokenizer(mc.source, mc.revision))
        return self._tok[key]

    def tokenizer_key(self, mc) -> str:
        """What identifies a tokenizer's output (models sharing a vocabulary share their lengths)."""
        import hashlib

        key = ("tokenizer", mc.source, mc.revision)
        if key not in self._tok:
            tok = self.config_and_tokenizer(mc)[1]
            backend = getattr(tok, "backend_tokenizer", None)
            text = backend.to_str() if backend is not None else repr(sorted(tok.get_vocab().items()))
            self._tok[key] = type(tok).__name__ + hashlib.sha256(text.encode()).hexdigest()[:16]
        return self._tok[key]

    def of(self, task: "Task") -> list[int]:
        from report_builder.analyses import registry

        a = registry.get(task.base)
        s = task.subject
        if a.inputs == "weights" or task.size == 0:
            return []
        return self.items(task, *(task.shard or (0, task.size)))

    def items(self, task: "Task", lo: int, hi: int) -> list[int]:
        """Lengths of items ``[lo, hi)`` of the task's input (the pair and the examples: all of them)."""
        from report_builder.analyses import inputs, registry

        a = registry.get(task.base)
        s = task.subject
        es = self.plan.sets[s.dataset.id] if s.dataset is not None else None
        config, tokenizer = self.config_and_tokenizer(s.model)
        run = _TokenRun(s, tokenizer, es, config)
        if a.inputs == "pair":
            return [len(inputs.pair(run))]
        if isinstance(es, SizedSet):  # not here: every item at the paper's mean length
            if a.inputs == "examples":
                k = min(len(es), max(0, s.cfg.k24.examples - 1))
                return [len(inputs.pair(run))] + [min(es.mean_tokens, s.dataset.max_length,
                                                      inputs.EXAMPLES_MAX_LENGTH)] * k
            return [min(es.mean_tokens, s.dataset.max_length)] * max(0, min(hi, len(es)) - lo)
        if a.inputs == "examples":
            return [len(e) for e in inputs.examples(run)[0]]
        key = (self.tokenizer_key(s.model), s.dataset.id, s.dataset.max_length, s.causal)
        if key not in self._sets:  # masking never changes a length: one encoding serves both inputs
            self._sets[key] = [len(e) for e in inputs.unmasked(run)]
        return self._sets[key][lo:hi]


def _batch_size(task: "Task") -> int:
    """Sequences per padded batch on the batched (GPU) path, as each analysis asks the engine."""
    from report_builder.analyses import registry

    # None (the default): the engine sizes batches from the device's free memory; priced as batches of 8
    return registry.get(task.base).work.batch(task.subject.cfg.batch_size) or 8


LOAD_S = 1.0
"""Seconds to load a model besides reading its weights (imports, building the module): the smoke
build's MiniLM took 2.0 s, SmolLM2 (converted copy) 0.5 s."""
LOAD_BYTES_PER_S = 1 * GIB
"""Weight bytes read per second when a model loads (an assumption: a local SSD or the page cache)."""


def load_seconds(s: Shape) -> float:
    """Seconds to load a model: charged to its first task that computes (the executor loads it then); float32
    weights in every precision mode (`devices.MODEL_ITEMSIZE`)."""
    return LOAD_S + s.params * MODEL_ITEMSIZE / LOAD_BYTES_PER_S


def task_cost(task: "Task", shape: Shape, lengths: list[int], *, cached: bool, rate: float | None, kind: str,
              workers: int, base_bytes: int, table_lengths: list[int] | None = None,
              factors: tuple[dict, dict, tuple] | None = None) -> TaskCost:
    """FLOPs, seconds, peak memory and disk of one task (a cached one computes nothing).

    ``lengths``: the sequences it decomposes (a shard: its range; a reduce: none); ``table_lengths``:
    those its tables cover when they differ (a reduce writes the whole analysis' tables).

    Seconds = device (FLOPs / (rate x efficiency) + `OVERHEAD_S` per sequence and layer) + host (the
    analysis' statistics, its declared `analyses.base.Work`); the model load is added by `estimate`.
    ``factors``: (efficiency, overhead per kind, kinds whose overhead includes their host statistics)
    measured on the GPU (`measured.Measured`); None: `flops.default_factors`.
    """
    from report_builder.analyses import registry

    cfg = task.subject.cfg
    work = registry.get(task.base).work
    pts = ig_points(shape.gated, cfg.ig.method, cfg.ig.steps)
    itemsize = MODEL_ITEMSIZE  # weights, captures and chunks: float32 in every precision mode
    causal = task.subject.causal
    fwd = sum(forward_flops(shape, n) for n in lengths) * shape.layers
    dec = sum(work_flops(work.kind, shape, n, pts) for n in lengths) * shape.layers
    if work.kind == "weights":
        dec = expansion_flops(shape)
    rows = table_rows(task.base, shape, table_lengths if table_lengths is not None else lengths, causal,
                      cfg.k24.top_k, shape.scopes)
    disk = disk_bytes(rows)
    weights = shape.params * itemsize
    budget = cfg.budget_bytes()
    n_max = max(lengths, default=0)
    if task.reduce:  # concatenates its shards' tables; loads no model
        peak = base_bytes
    elif work.kind == "none":
        peak = base_bytes + weights
    elif not lengths:
        peak = base_bytes + weights + (shape.d * shape.d * 8 if work.kind == "weights" else 0)
    elif kind == "cpu":  # deterministic path: `workers` sequences at once, each alone
        w = max(1, min(workers, len(lengths)))
        per = capture_bytes(shape, n_max, itemsize, None if w == 1 else False) + layer_fixed_bytes(
            n_max, shape.d, shape.d_ff, shape.heads, shape.gated, itemsize, shape.causal)
        if work.kind == "full":
            per += chunk_bytes(shape, n_max, max(1, budget // w), itemsize)
        peak = base_bytes + weights + w * per
    else:  # batched path: batches of sequences of similar length, padded
        b = min(_batch_size(task), len(lengths))
        per = b * (capture_bytes(shape, n_max, itemsize, False)
                   + layer_fixed_bytes(n_max, shape.d, shape.d_ff, shape.heads, shape.gated, itemsize, shape.causal))
        if work.kind == "full":
            per += chunk_bytes(shape, n_max, budget, itemsize, batch=b)
        peak = base_bytes + weights + per
    flops, fwd_out, dev_s, host_s = 0, 0, 0.0, 0.0
    if not cached:
        flops, fwd_out = fwd + dec, fwd
        pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lengths)
        eff, over, included = factors or default_factors(kind)
        host_s = (0.0 if task.shard is not None else work.task_s) + (0.0 if work.kind in included else shape.layers * (
            work.host_s * len(lengths) + work.host_pair_s * pairs))
        dev_s = None
        if rate:
            dev_s = (fwd / (rate * eff["forward"]) if fwd else 0.0) + (
                dec / (rate * eff[work.kind]) if dec else 0.0)
            dev_s += (over.get("forward", 0.0) + over.get(work.kind, 0.0)) * len(lengths) * shape.layers
    sub = task.subject
    return TaskCost(task.base, sub.model.name, sub.dataset.id if sub.dataset is not None else None,
                    list(task.shard) if task.shard is not None else None, task.shards, task.size,
                    sum(lengths), n_max, cached, task.key, work.kind, int(flops), int(fwd_out),
                    None if dev_s is None else dev_s + host_s, dev_s, host_s, 0.0, int(peak), int(disk), rows)


def plan_costs(cfg, cache: "Cache | None" = None, **kw: Any) -> dict[str, Any]:
    """`estimate` of ``cfg``'s plan, before anything is downloaded: what is not here is sized from
    recorded facts (`sizing.Sizing`) and flagged. ``kw``: `estimate`'s options."""
    from report_builder.analyses import planning

    sizing = Sizing(cfg)
    return estimate(planning.plan(cfg, cache, sizing=sizing), cache, sizing=sizing, **kw)


def estimate(plan: "Plan", cache: "Cache | None" = None, *, gpu: str | None = None, gpu_flops: float | None = None,
             gpus: int = 1, threads: int | None = None, sizing: Sizing | None = None) -> dict[str, Any]:
    """Price every task of ``plan`` and total them (see the module docstring).

    Args:
        cache: where cached tasks are looked up (a cached task costs 0 and is marked).
        gpu, gpu_flops: a named GPU or a matmul rate in TFLOP/s, for a GPU that is not here.
        gpus: also give the time on this many GPUs (tasks assigned greedily, never split).
        threads: CPU worker threads of the build (default as the build picks them).
        sizing: the `sizing.Sizing` the plan was made with: models and data that are not here are
            priced from it, and each task lists its estimate flags (``estimated``; key None when
            its key rests on something not here).
    Returns:
        ``device`` (the rate and how it was found), ``tasks`` (one dict per task, every number),
        ``totals``, ``gpus`` (1 and N GPU times where a GPU is estimated), ``notes`` and
        ``estimates`` (what was estimated and why, the flags' legend).
    """
    from report_builder.analyses import registry
    from report_builder.models.loading import adapter_of

    from report_builder.errors import UsageError

    if int(gpus) < 1:
        raise UsageError(f"{option('gpus')}: {gpus} is not a number of GPUs; give 1 or more")
    if gpu_flops is not None and not gpu_flops > 0:
        raise UsageError(f"{option('gpu_flops')}: {gpu_flops:g} TFLOP/s is not a rate; give a positive number, e.g. 50")
    cfg = plan.cfg
    kind = "cuda" if (gpu or gpu_flops is not None or str(cfg.device).startswith("cuda")) else "cpu"
    if threads is None:
        from report_builder.config import choose_threads

        threads = choose_threads(cfg.threads)
    workers = threads if kind == "cpu" else 1
    dev = device_rate(cfg.device if kind == "cpu" or not (gpu or gpu_flops) else "cuda", cfg.dtype, threads=workers,
                      gpu=gpu, gpu_flops=gpu_flops)
    rate = dev["flops_per_s"]
    measured, factors = _measured(dev, kind)
    factors = factors or default_factors(kind)
    base = _process_base_bytes() if kind == "cpu" else 0
    lengths = _Lengths(plan, sizing)
    shapes: dict[tuple, Shape] = {}
    loaded: set[tuple] = set()
    rows: list[TaskCost] = []
    for t in plan.tasks:
        mc = t.subject.model
        key = (mc.source, mc.revision)
        if key not in shapes:
            config = lengths.config_and_tokenizer(mc)[0]
            if sizing is not None and "shape" in sizing.model_flags(mc):
                from report_builder.models import registry as adapters

                adapter = adapters.for_config(config)
            else:
                adapter = adapter_of(mc.source, mc.revision).for_config(config)
            shapes[key] = shape_of(config, adapter)
        cached = bool(cache is not None and cache.path(t.analysis, t.key).is_dir())
        whole = None
        if t.reduce:  # its tables cover every item of the analysis
            whole = lengths.items(t, 0, registry.get(t.base).size(t.subject))
        elif registry.get(t.base).work.whole_set_rows and t.shard is None and t.size == 0:
            whole = lengths.items(t, 0, t.subject.n_items)
        r = task_cost(t, shapes[key], lengths.of(t), cached=cached, rate=rate, kind=kind, workers=workers,
                      base_bytes=base, table_lengths=whole, factors=factors)
        if sizing is not None:
            r.estimated = sizing.task_flags(mc, t.subject.dataset.id if t.subject.dataset is not None else None,
                                            reads_tokens=bool(r.tokens) or whole is not None)
            if {"key", "items"} & set(r.estimated):
                r.key = None
        if not cached and not t.reduce and key not in loaded:  # the executor loads a model on its first task that computes
            loaded.add(key)
            r.load_seconds = load_seconds(shapes[key])
            if r.seconds is not None:
                r.seconds += r.load_seconds
        rows.append(r)
    todo = [r for r in rows if not r.cached]
    secs = [r.seconds for r in todo] if rate else []
    total_s = sum(secs) if rate else None
    totals = {"tasks": len(rows), "cached": len(rows) - len(todo), "to_compute": len(todo),
              "sequences": sum(r.sequences for r in todo), "tokens": sum(r.tokens for r in todo),
              "flops": sum(r.flops for r in todo), "seconds": total_s,
              "device_seconds": sum(r.device_seconds for r in todo) if rate else None,
              "host_seconds": sum(r.host_seconds for r in todo), "load_seconds": sum(r.load_seconds for r in todo),
              "peak_bytes": max((r.peak_bytes for r in todo), default=0),
              "disk_bytes": sum(r.disk_bytes for r in todo), "disk_bytes_cached": sum(r.disk_bytes for r in rows if r.cached)}
    multi = None
    if kind == "cuda" and rate:
        n = max(1, int(gpus))
        span, loads = balance(secs, n)
        multi = {"n": n, "seconds_1": total_s, "seconds_n": span, "loads": loads,
                 "largest_task_seconds": max(secs, default=0.0),
                 "how": "tasks assigned longest first to the least-loaded GPU; a task is never split, so the "
                        "largest task bounds the N-GPU time"}
    notes = []
    if dev.get("note"):
        notes.append(dev["note"])
    if kind == "cuda" and rate and measured is not None:
        notes.append(f"GPU factors {measured.label()}: efficiency per kind of work and a fixed time per sequence "
                     "and layer fitted to its K24 and K21 paper passes (their statistics included); they describe "
                     "the engine of that commit")
    elif kind == "cuda" and rate:
        notes.append("GPU estimate: the efficiency factors were measured on a CPU (bench) and no GPU check has "
                     "measured this GPU (costs/measured/); short sequences run further below a GPU's matmul rate, "
                     "so treat it as a lower bound")
    mem = dev.get("memory_bytes")
    if mem and totals["peak_bytes"] > mem:
        notes.append(f"the largest task's peak memory ({fmt_bytes(totals['peak_bytes'])}) exceeds the device's "
                     f"{fmt_bytes(mem)}: lower {option('max_memory')} or batch_size")
    estimates = None
    if sizing is not None:
        estimates = {**sizing.summary(), "flags": dict(FLAGS)}
        totals["estimated"] = sum(1 for r in rows if r.estimated)
        notes.extend(_estimate_notes(estimates))
    eff, over = factors[0], factors[1]
    dev = {**dev, "factors": ({"source": "measured", "date": measured.date, "file": measured.path,
                               "device": measured.device, "commit": measured.commit} if measured is not None else
                              {"source": "estimate" if kind == "cuda" else "calibrated"})}
    return {"device": {"device": cfg.device, "dtype": cfg.dtype, "kind": kind, "workers": workers, **dev},
            "efficiency": dict(eff), "overhead_s": dict(over),
            "tasks": [asdict(r) for r in rows], "totals": totals, "gpus": multi, "notes": notes,
            "flop_model": F.__doc__.split("The FLOP model", 1)[1].strip(), "estimates": estimates}


def _measured(dev: dict[str, Any], kind: str):
    """The GPU check behind a CUDA plan's factors (`measured.find`: the named GPU, or the calibrated one),
    and its (efficiency, overhead, kinds with their host statistics included) for the plan's precision;
    (None, None) when this GPU or precision was not measured."""
    if kind != "cuda" or not dev.get("flops_per_s"):
        return None, None
    from report_builder.costs.devices import GPUS
    from report_builder.costs.measured import find

    name = dev.get("gpu") or (dev.get("calibration") or {}).get("device")
    m = find(name, known=tuple(GPUS))
    got = m.factors(dev.get("precision") or precision_of((dev.get("calibration") or {}).get("dtype", "float32"),
                                                          bool((dev.get("calibration") or {}).get("tf32")))) \
        if m is not None else None
    if got is None:
        return None, None
    eff, over = got
    return m, ({**default_factors(kind)[0], **eff}, {"forward": 0.0, **over}, tuple(over))


def _estimate_notes(est: dict[str, Any]) -> list[str]:
    """The plan's notes on what it estimated: the models and data not here, the flags' legend."""
    if not est["models"] and not est["datasets"]:
        return []
    out = []
    groups: dict[tuple, list[str]] = {}
    for name, v in est["models"].items():
        groups.setdefault((tuple(v["flags"]), v["why"]), []).append(name)
    for (flags, why), names in groups.items():
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        out.append(f"estimated ({', '.join(flags)}): models {shown}" + (f": {why}" if why else ""))
    if est["datasets"]:
        sets = ", ".join(f"{k}" + (f" ({v['why']})" if v["why"] else "") for k, v in est["datasets"].items())
        out.append(f"estimated (items, lengths): datasets {sets} are not here; {option('data_dir', 'DIR')} reads them from there")
    out.append("estimated = " + "; ".join(f"{k}: {v}" for k, v in est["flags"].items()))
    return out


def _process_base_bytes() -> int:
    """This process's resident memory now (interpreter, torch, transformers imported): the floor of
    any build's peak on the CPU."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # pragma: no cover
        import os

        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
