"""The plan as text: one table (a row per task, estimates marked), a total line, the rate and the 1/N-GPU
answer."""
from __future__ import annotations

from typing import Any

from report_builder.costs.footprint import GIB, KIB, MIB
from report_builder.errors import terminal_table


def fmt_flops(f: float | None) -> str:
    if f is None:
        return "n/a"
    if f == 0:
        return "0"
    for unit, v in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if f >= v:
            return f"{f / v:.3g} {unit}"
    return f"{f:.0f} FLOP"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    if s < 60:
        return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def fmt_bytes(b: float | None) -> str:
    if b is None:
        return "n/a"
    if b >= GIB:
        return f"{b / GIB:.2f} GiB"
    if b >= MIB:
        return f"{b / MIB:.1f} MiB"
    return f"{b / KIB:.0f} KiB"


def shard_cell(row: dict) -> str:
    """The plan table's shard column: a shard's item range ``lo:hi``, ``reduce N`` for a reduce task."""
    if row.get("shard") is not None:
        return f"{row['shard'][0]}:{row['shard'][1]}"
    return f"reduce {row['reduces']}" if row.get("reduces") else "-"


def estimated_cell(row: dict) -> str:
    """The plan table's last column for a task priced from recorded facts: ``estimated: shape, items``
    (the flags of `costs.sizing.FLAGS`; the legend is a note under the table)."""
    return "estimated: " + ", ".join(row["estimated"]) if row.get("estimated") else ""


def format_plan(est: dict[str, Any]) -> str:
    """One table (a row per task), a total line, and the 1/N-GPU answer where a GPU is estimated; a task
    priced from recorded facts (not downloaded yet) says ``estimated: <flags>`` in its last column. Names in
    the table are escaped for the terminal before the columns are padded (`errors.terminal_table`)."""
    head = ("analysis", "model", "dataset", "shard", "seqs", "tokens", "FLOPs", "time", "peak mem", "disk", "")
    body = [(r["analysis"], r["model"], r["dataset"] or "-", shard_cell(r), str(r["sequences"]), str(r["tokens"]),
             fmt_flops(r["flops"]), fmt_seconds(r["seconds"]), fmt_bytes(r["peak_bytes"]), fmt_bytes(r["disk_bytes"]),
             "cached" if r["cached"] else estimated_cell(r)) for r in est["tasks"]]
    t, d = est["totals"], est["device"]
    out = terminal_table([list(head), *map(list, body)], right={4, 5, 6, 7, 8, 9})
    on = d.get("gpu") or (d.get("calibration") or {}).get("device") or d["device"]
    n_shards = sum(1 for r in est["tasks"] if r["shard"] is not None)
    out.append(f"total: {t['tasks']} tasks ({f'{n_shards} shards, ' if n_shards else ''}{t['cached']} cached, "
               f"{t['to_compute']} to compute), "
               f"{t['sequences']} sequences, {fmt_flops(t['flops'])}, "
               + (f"~{fmt_seconds(t['seconds'])} on {on}" if t["seconds"] is not None else "time n/a")
               + f", peak memory {fmt_bytes(t['peak_bytes'])}, disk {fmt_bytes(t['disk_bytes'])}"
               + (f" (+{fmt_bytes(t['disk_bytes_cached'])} cached)" if t["cached"] else "")
               + (f"; {t['estimated']} of the tasks estimated from recorded facts" if t.get("estimated") else ""))
    if t["seconds"]:
        out.append(f"  of which: decomposition on the device {fmt_seconds(t['device_seconds'])}, the analyses' "
                   f"statistics on the host CPU {fmt_seconds(t['host_seconds'])}, model loads "
                   f"{fmt_seconds(t['load_seconds'])}")
    if d.get("flops_per_s"):
        f = d.get("factors") or {}
        factors = (f"measured on {f['date']}" if f.get("source") == "measured" else
                   "estimate" if f.get("source") == "estimate" else "")
        out.append(f"rate: {d['flops_per_s'] / 1e9:.4g} GFLOP/s matmul ({d['how']}) x efficiency per kind of work "
                   + (f"({factors}) " if factors else "")
                   + ", ".join(f"{k} {v:g}" for k, v in est["efficiency"].items())
                   + "; plus per sequence and layer " + ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in est["overhead_s"].items()))
    g = est.get("gpus")
    if g:
        out.append(f"on 1 GPU: ~{fmt_seconds(g['seconds_1'])}"
                   + (f"; on {g['n']} GPUs: ~{fmt_seconds(g['seconds_n'])} (greedy balanced by task; the largest "
                      f"task alone takes {fmt_seconds(g['largest_task_seconds'])})" if g["n"] > 1 else ""))
    for n in est["notes"]:
        out.append("note: " + n)
    return "\n".join(out)
