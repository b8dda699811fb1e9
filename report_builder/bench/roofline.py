"""The benchmark's roofline: the FF step's FLOP rate against a plain matmul of the GEMM shape the
decomposition actually issues, measured in the same run, and each kind of work's efficiency against it.

The GEMM the FF step issues: by the CPU rule a chunk's ``(batch x tile x rows, d') @ (d', d)``, by the GPU
rule a buffer's ``(pairs, d') @ (d', d)`` (`decompose.chunks.FFPlan`), in the precision mode's arithmetic
(`decompose.precision.pair_mm`: TF32, bfloat16 or float16 inputs with float32 output). Pitfall: the
matmul is capped in rows and calls (`MATMUL_ROWS`, `MATMUL_FLOPS_CAP`) so a long sequence's bench does not
double its time; the report names the shape it measured.
"""
from __future__ import annotations

from report_builder import schema
from report_builder.costs import FLOP_COUNT_DOC, ff_flops
from report_builder.decompose.chunks import pair_count

MATMUL_FLOPS_CAP = 1e12
"""The roofline matmul makes as many calls as the FF step makes GEMMs, up to this many FLOPs (a long
sequence's FF step would otherwise double the bench's time)."""
MATMUL_ROWS = {"cpu": 16384, "cuda": 1 << 18}
"""At most this many rows in one roofline call: the rate is flat beyond (a GPU's GEMM is saturated long before
262144 rows), and the operands are drawn on the device."""


def gemm_shape(rule: str, plan, batch: int, n: int, causal: bool, chunk: int, tile: int, device: str,
               layers: int) -> tuple[int, int]:
    """``(rows, calls)`` of the roofline matmul: the FF step's GEMM rows (capped) and as many calls as its
    GEMMs over ``layers`` layers make (the same FLOPs)."""
    cap = MATMUL_ROWS["cuda" if device.startswith("cuda") else "cpu"]
    if rule == "gpu":
        rows = max(plan.group_pairs(g) for g in range(len(plan.groups)))
        total = plan.pairs
    else:
        rows = batch * tile * chunk
        total = batch * pair_count(n, causal, chunk)
    rows = max(1, min(rows, cap))
    return rows, layers * max(1, -(-total // rows))


def efficiency(dims: dict, n: int, batch: int, per_layer: dict[str, float], matmul_flops: float) -> dict[str, float]:
    """Each kind of work's FLOP/s (`costs` FLOP model) as a fraction of the matmul measured in the same
    run: ``forward`` (HF forward), ``ratios`` (fast_ratios), ``maps`` (fast_k21_maps), ``full``
    (fast_full); the numbers `costs.EFFICIENCY` was set from."""
    from report_builder import costs

    s = costs.Shape(dims["d_model"], dims["layers_total"], dims["heads"], dims["kv_heads"], dims["head_dim"],
                    dims["d_ff"], dims["gated"], schema.layout(dims["ln_position"]) is schema.POST_LN, 0,
                    causal=dims.get("causal", False))
    pts = costs.ig_points(s.gated)
    flops = {"forward": costs.forward_flops(s, n), "ratios": costs.work_flops("ratios", s, n),
             "maps": costs.work_flops("maps", s, n), "full": costs.work_flops("full", s, n, pts)}
    timed = {"forward": "forward", "ratios": "fast_ratios", "maps": "fast_k21_maps", "full": "fast_full"}
    return {k: batch * flops[k] / per_layer[m] / matmul_flops for k, m in timed.items() if per_layer.get(m)}


def roofline(n: int, d: int, dff: int, H: int, gated: bool, batch: int, causal: bool, done_pairs: int,
             per_layer: dict[str, float], mm: dict) -> dict:
    """The FF step's FLOP rate against the matmul of the same run: counted on the minimal pairs (n^2, or
    the pairs j <= i of a causal model: the headline ``fraction``) and on the pairs the chunks or blocks
    actually cover (``done_pairs`` per sequence: ``fraction_done``); for a causal model also the
    every-pair step (``square``) and its ratio."""
    p_min = pair_count(n, causal)
    f_min, f_done = ff_flops(n, d, dff, H, gated, p_min) * batch, ff_flops(n, d, dff, H, gated, done_pairs) * batch
    t = per_layer["fast_ff"]
    rate = mm["gflops"] * 1e9
    roof = {"ff_flops_per_layer": f_min, "ff_flops_done_per_layer": f_done, "ff_seconds_per_layer": t,
            "ff_gflops": f_min / t / 1e9, "matmul": mm, "matmul_gflops": mm["gflops"], "fraction": f_min / t / rate,
            "fraction_done": f_done / t / rate, "causal": causal, "pairs": {"minimal": p_min, "done": done_pairs,
                                                                            "square": n * n},
            "flop_count": FLOP_COUNT_DOC,
            "ff_time_includes": "decompose_batch with the FF scope's map only: attention step, FF terms, their sums "
                                "and map (the CPU rule also sums the residual terms pair by pair; the GPU rule adds "
                                "their known total)"}
    if "fast_ff_square" in per_layer:
        t_sq = per_layer["fast_ff_square"]
        f_sq = ff_flops(n, d, dff, H, gated) * batch
        roof["square"] = {"seconds_per_layer": t_sq, "flops_per_layer": f_sq, "fraction": f_sq / t_sq / rate,
                          "fraction_of_minimal": f_min / t_sq / rate, "speedup": t_sq / t,
                          "what": "the same step over every pair (causal=False): the work before causal pairs"}
    return roof
