"""What a build will cost before it runs: FLOPs, seconds, peak memory and disk of every planned task.

`estimate` prices the tasks of `analyses.planning.plan` without loading any weights: model sizes come
from the config (through the adapter's facts), token lengths from the real evaluation sets encoded
with each model's tokenizer (the sequences each task decomposes: the first ``task.size`` items of
its set — a shard task: its range — the K21 pair or the K24 examples). Seconds = FLOPs / (matmul FLOP/s x efficiency), where
the matmul rate is measured on the spot on the chosen device (`calibrate`) — or, for a GPU that is
not here, taken from a named GPU's datasheet peak (`GPUS`) or ``--gpu-flops`` — and the efficiency
of each kind of work relative to that matmul is what ``report-builder bench`` measured (`EFFICIENCY`).

Modules: `flops` (the FLOP model of each kind of work, efficiency factors; each analysis declares its
kind of work and host costs on itself, `analyses.base.Work`), `footprint` (peak memory and
disk), `devices` (calibration matmul, named GPUs), `estimate` (per task, totals, N GPUs), `sizing`
(what is not downloaded yet, from recorded facts, flagged as estimates), `text`.

Pitfall: the estimate is only as good as the efficiency factors; they were measured on one CPU
(see `EFFICIENCY`), and a GPU runs short sequences far below its matmul rate (kernel launches), so a
GPU estimate is a lower bound until ``bench --device cuda`` has measured its factors.
"""
from __future__ import annotations

from report_builder.costs.devices import (ASSUMED_GPU_MATMUL_EFFICIENCY, GPU, GPUS, calibrate, device_rate,
                                          MODEL_ITEMSIZE, precision_of)
from report_builder.costs.estimate import (LOAD_BYTES_PER_S, LOAD_S, TaskCost, balance, estimate, load_seconds, plan_costs,
                                           task_cost)
from report_builder.costs.sizing import FLAGS as ESTIMATE_FLAGS, SizedSet, Sizing
from report_builder.costs.flops import (EFFICIENCY, FLOP_COUNT_DOC, IG_POINT_FLOPS, OVERHEAD_S, Shape, attention_flops,
                                        expansion_flops, ff_flops, ff_rows, forward_flops, full_layer_flops,
                                        gram_map_flops, ig_points, pairs, shape_of, work_flops)
from report_builder.costs.footprint import (PARQUET_FILE_BYTES, ROW_BYTES, capture_bytes, chunk_bytes, disk_bytes,
                                            layer_fixed_bytes, sequence_capture_bytes, table_rows)
from report_builder.costs.text import estimated_cell, fmt_bytes, fmt_flops, fmt_seconds, format_plan, shard_cell

__all__ = ["ASSUMED_GPU_MATMUL_EFFICIENCY", "EFFICIENCY", "FLOP_COUNT_DOC", "GPU", "GPUS", "IG_POINT_FLOPS",
           "ESTIMATE_FLAGS", "LOAD_BYTES_PER_S", "LOAD_S", "OVERHEAD_S", "PARQUET_FILE_BYTES", "ROW_BYTES", "Shape", "TaskCost",
           "attention_flops", "balance", "calibrate", "capture_bytes", "chunk_bytes", "device_rate", "disk_bytes",
           "estimate", "estimated_cell", "expansion_flops", "ff_flops", "ff_rows", "fmt_bytes", "fmt_flops",
           "fmt_seconds", "format_plan", "forward_flops", "full_layer_flops", "gram_map_flops", "ig_points",
           "MODEL_ITEMSIZE", "layer_fixed_bytes", "load_seconds", "pairs", "plan_costs", "precision_of",
           "sequence_capture_bytes", "shape_of", "shard_cell", "SizedSet", "Sizing", "table_rows",
           "task_cost", "work_flops"]
