"""The text report of `bench.run.run_bench`'s result: a fixed-width table, the roofline, memory, errors
and each target marked ✓/✗.

Pitfall: a method can be missing from the result (naive baselines skipped when their tensors would not
fit); every line reads what is there and says "skipped" or "n/a" for the rest.
"""
from __future__ import annotations

from report_builder.bench.memory import fmt_bytes
from report_builder.errors import option


def _f(v, spec: str, none: str = "n/a") -> str:
    return none if v is None else format(v, spec)


def _mode(result: dict) -> str:
    mode = result["config"]["dtype"]
    return mode if mode == "float32" else f"{mode} pair GEMMs (model and checks in float32)"


def _chunks_line(result: dict) -> str:
    """How the FF step was cut: the CPU rule's chunks and tiles, or the GPU rule's blocks and buffers."""
    c, ch = result["config"], result.get("chunks") or {}
    if ch.get("rule") == "gpu":
        rows = ch.get("gemm_rows") or []
        return (f"chunk rule gpu: budget {fmt_bytes(ch['budget_bytes'])} -> {len(ch['blocks'])} row block(s) in "
                f"{len(ch['groups'])} buffer(s), largest {c['chunk_rows']} rows; the FF GEMM "
                f"({max(rows) if rows else 0} pairs) x {c['d_ff']} @ {c['d_ff']} x {c['d_model']} per buffer")
    return (f"chunk rule cpu: budget {fmt_bytes(c['chunk_budget_bytes'])} -> {c['chunk_rows']} query rows per FF chunk"
            + (f" in tiles of {c['chunk_tile']} sources" if c.get("chunk_tile", c["seq_len"]) < c["seq_len"] else ""))


def _ops_lines(result: dict) -> list[str]:
    """Ops (CPU) or kernels (CUDA) per layer, and the GPU's busy time."""
    out = []
    for key, what in (("fast_ratios", "K21 ratios"), ("fast_ff", "FF decomposition"), ("fast_full", "full layer")):
        o = (result.get("ops") or {}).get(key)
        if not o:
            continue
        if "kernels_per_layer" in o:
            out.append(f"{what}: {o['kernels_per_layer']:.0f} CUDA kernels per layer ({o['ops_per_layer']:.0f} torch "
                       f"ops), GPU busy {o['gpu_busy_ms_per_layer']:.2f} ms per layer (profiler)")
        else:
            top = ", ".join(f"{k.replace('aten::', '')} {v:g}" for k, v in list(o["by_name"].items())[:4])
            out.append(f"{what}: {o['ops_per_layer']:.0f} torch ops per layer (profiler; a kernel each on a GPU: "
                       f"{top}, ...)")
    return out


def format_bench(result: dict) -> str:
    """A fixed-width text report of `run_bench`'s result, with each target marked ✓/✗."""
    c = result["config"]
    pl, tps, cost, sp = result["seconds_per_layer"], result["tokens_per_s"], result["cost_vs_forward"], result["speedup"]
    head = (f"{c['description']} ({c['family']}, {c['ln_position']}-LN, d {c['d_model']}, {c['heads']} heads"
            + (f" / {c['kv_heads']} kv" if c["kv_heads"] != c["heads"] else "")
            + f", FF {c['d_ff']}{' gated' if c['gated'] else ''} {c['activation']}, {c['layers_total']} layers)")
    lines = [
        "report-builder bench: " + head,
        f"n = {c['seq_len']}, batch {c['batch']}, {c['device']}"
        + (f" ({c['gpu_name']})" if c.get("gpu_name") else "")
        + f", {_mode(result)}, {c['threads']} threads, {c['repeats']} repeats; {c['cpu']}; torch {c['torch']}",
        f"load average at start {c['loadavg_start'][0]:.2f}, at end {c['loadavg_end'][0]:.2f}",
        f"decomposed layers: {c['layers_timed']} of {c['layers_total']} (per-layer medians; tokens/s model-equivalent "
        f"= batch x n / (s/layer x {c['layers_total']}))",
        _chunks_line(result)
        + f"; forward batch for this budget: {c['recommended_batch']}"
        + (f"; {option('max_memory', fmt_bytes(c['max_memory_bytes']))}" if c["max_memory_bytes"] else ""),
        "",
        f"{'method':<44}{'s/layer':>10}{'tokens/s':>11}{'x fwd':>8}{'vs naive':>10}",
    ]
    rows = [("forward", "HF forward (eager, attention probabilities)", None),
            ("naive_k21_ratios", "naive K21 ratios (H,n,n,d tensors)", None),
            ("naive_k21_maps", "naive K21 maps (H,n,n,d tensors)", None),
            ("naive_full", "naive full layer (reference_layer + norms)", None),
            ("fast_ratios", "fast (a) K21 ratios only", "k21_ratios"),
            ("fast_k21_maps", "fast (b) K21 maps ATTN/ATTNRES/ATTNRESLN-N", "k21_maps"),
            ("fast_full", "fast (c) full layer, every scope + check", "full_layer"),
            ("fast_ff", "fast FF decomposition (maps to FF scope)", None),
            ("fast_ff_float32", "  the same in float32", None),
            ("fast_ff_square", "  the same over every pair (before causal)", None)]
    for key, label, spk in rows:
        if key not in pl:
            if key not in ("fast_ff_square", "fast_ff_float32") or (key == "fast_ff_square" and c.get("causal")):
                lines.append(f"{label:<44}{'skipped':>10}")
            continue
        x = "1.00" if key == "forward" else _f(cost.get(key), ".2f")
        s = (_f(sp.get(spk), ".1f") + "x") if spk and sp.get(spk) is not None else ""
        lines.append(f"{label:<44}{pl[key]:>10.4f}{tps[key]:>11.1f}{x:>8}{s:>10}")
    r = result["roofline"]
    mm = r["matmul"]
    lines += [
        "",
        f"FF decomposition: {r['ff_flops_per_layer'] / 1e9:.2f} GFLOP per layer"
        + (" (minimal: pairs j <= i)" if r.get("causal") else "")
        + f" in {r['ff_seconds_per_layer']:.4f} s = {r['ff_gflops']:.1f} GFLOP/s; plain matmul {mm['shape'][0]}x"
        f"{mm['shape'][1]} @ {mm['shape'][1]}x{mm['shape'][2]} (x{mm['calls']}, interleaved): "
        f"{r['matmul_gflops']:.1f} GFLOP/s -> {100 * r['fraction']:.0f}% of roofline",
    ]
    if r.get("causal"):
        p = r["pairs"]
        lines.append(f"  causal pairs: {p['minimal']} minimal (j <= i), {p['done']} computed in the chunks "
                     f"({r['ff_flops_done_per_layer'] / 1e9:.2f} GFLOP done -> {100 * r['fraction_done']:.0f}%), "
                     f"{p['square']} in the square")
        sq = r.get("square")
        if sq:
            lines.append(f"  every pair (before causal pairs): {sq['flops_per_layer'] / 1e9:.2f} GFLOP in "
                         f"{sq['seconds_per_layer']:.4f} s ({100 * sq['fraction']:.0f}% of roofline on its own count, "
                         f"{100 * sq['fraction_of_minimal']:.0f}% on the minimal one) -> causal pairs "
                         f"{sq['speedup']:.2f}x faster, same run")
    lines.append(f"  ({r['flop_count']})")
    lines += _ops_lines(result)
    if result.get("efficiency"):
        lines.append("efficiency vs that matmul (costs FLOP model; `report-builder plan` uses such factors): "
                     + ", ".join(f"{k} {v:.2f}" for k, v in result["efficiency"].items()))
    mem = result["memory"]
    if mem.get("method"):
        parts = []
        for k in ("fast_full", "naive_full"):
            m = mem.get(k) or {}
            if "peak_rss_bytes" in m:
                parts.append(f"{k} {fmt_bytes(m['peak_rss_bytes'])} (+{fmt_bytes(m['delta_bytes'])} over the "
                             f"{fmt_bytes(m['rss_before_bytes'])} before it)")
            elif "peak_bytes" in m:
                parts.append(f"{k} {fmt_bytes(m['peak_bytes'])} (+{fmt_bytes(m['delta_bytes'])})")
            elif m:
                parts.append(f"{k} {m.get('skipped') or 'error: ' + str(m.get('error'))}")
        lines.append(f"peak memory, one sequence and layer ({mem['method']}): " + "; ".join(parts))
    e = result["errors"]
    lines.append(f"max reconstruction error, fast full layer vs HF tensors ({e['dtype']}): "
                 f"{_f(e['max_rel_error'], '.2e')} (the {e['dtype']} bound {e['bound']:.1e}); fast vs naive maps: "
                 f"{_f(e['fast_vs_naive_max_map_diff'], '.2e')}")
    p = result.get("precision") or {}
    if p.get("speedup_vs_float32") is not None:
        lines.append(f"precision {p['mode']} ({p['label']}): FF step {p['speedup_vs_float32']:.2f}x the float32 "
                     f"step's speed, same run; unit roundoff {p['unit_roundoff']:.1e}, bound {p['bound']:.1e}")
    if result.get("short"):
        from report_builder.bench.short import format_short

        lines += format_short(result["short"])
    bc = result["budget_check"]
    if "peak_rss_bytes" in bc:
        lines.append(f"budget check: BERT-base shape, n = {bc['seq_len']}, full layer with the chunk budget from "
                     f"{fmt_bytes(bc['limit_bytes'])}: peak RSS {fmt_bytes(bc['peak_rss_bytes'])} (model "
                     f"{fmt_bytes(bc.get('rss_before_bytes'))} before the layer), {bc['chunk_rows']} rows per chunk, "
                     f"{bc['seconds']:.1f} s, max error {bc['max_error']:.1e}")
    elif "error" in bc:
        lines.append(f"budget check failed to run: {bc['error']}")
    where = result.get("targets_defined_for", "the BERT-base shape, n = 128, float32, CPU")
    lines += ["", "targets" + ("" if result["targets_setting"] else
                               f" (defined for {where}; same thresholds here)") + ":"]
    for t in result["targets"]:
        mark = {True: "✓", False: "✗", None: "-"}[t["ok"]]
        if t["value"] is None:
            val = "not measured" + (f" ({bc['skipped']})" if t["unit"] == "bytes" and "skipped" in bc else "")
        elif t["unit"] == "x":
            val = f"{t['value']:.1f}x"
        elif t["unit"] == "%":
            val = f"{100 * t['value']:.0f}%"
        elif t["unit"] == "error":
            val = f"{t['value']:.1e}"
        else:
            val = f"{fmt_bytes(t['value'])} peak"
        lines.append(f"  {mark} {t['name']:<46} {val}")
    lines.append("GPU: " + ("run on " + c["device"] if result["gpu"]["run"] else "not run (no GPU in this session)"))
    for note in result["notes"]:
        lines.append("note: " + note)
    return "\n".join(lines)
