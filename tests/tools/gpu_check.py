"""The GPU check of issue #29 in one go (`tests/tools/gpu_check.sh`, `make gpu-check`): every number of the
issue's table and a pass/fail per "Done when" target, in ONE JSON file, with the log beside it.

    python3 -m tests.tools.gpu_check [--dry-run] [--out FILE] [--budget SECONDS] [--steps a,b] [--strict]

This parent process imports no torch: it runs the steps of `gpu_steps.STEPS` in a worker process
(``--worker``), hands them over one at a time and gives each a time limit from the run's budget
(`schedule`: every later step keeps its minimum). A step that fails records its error; one that runs
out of time is stopped (the worker is killed and a new one takes the next step) and records its last
progress; either way the run goes on. The JSON is rewritten after every step, so a run stopped from
outside still leaves what it measured. Output: ``--out FILE``, else ``$OUT/gpu-check.json`` when
``$OUT`` is set, else ``./gpu-check.json``; the log is the same name with ``.log``.

A run on a GPU leaves out the steps of `gpu_steps.ON_REQUEST` (``compile``: `torch.compile` of four layer
steps, whose compile alone can take minutes) unless ``--steps`` names them:
``gpu_check.sh --steps compile --budget 300`` as a second call.

``--dry-run``: the same steps (all of them) on the CPU with tiny sizes (the suite runs it: tests/tools/test_gpu_check.py).
Exit code 0 once the JSON is written (failed steps and missed targets are in it); ``--strict``: 1 when
a step failed; 2: no CUDA device (without ``--dry-run``; said by the shell script).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from report_builder.costs.measured import SCHEMA  # the schema the plan's reader accepts (imports no torch)

BUDGET_S = 290
"""The whole check's budget on a GPU (the issue asks for <= 5 minutes on one H200)."""
ROOT = Path(__file__).resolve().parents[2]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# ----------------------------------------------------------------------------------------------- worker

def worker(ctx_path: str, results_path: str) -> int:
    """Run the steps named on stdin, one line each, appending JSON lines to ``results_path``:
    ``{"step", "event": "start"|"progress"|"done", ...}``."""
    from tests.tools import gpu_steps

    ctx = json.loads(Path(ctx_path).read_text())
    fh = open(results_path, "a", encoding="utf-8")
    flags = _tf32_flags()

    def emit(**rec) -> None:
        fh.write(json.dumps(rec, default=str) + "\n")
        fh.flush()

    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        fn = gpu_steps.STEPS[name][0]
        emit(step=name, event="start")
        ctx["progress"] = lambda **kw: emit(step=name, event="progress", **kw)
        print(f"--- step {name} ({_now()})", flush=True)
        t0 = time.perf_counter()
        try:
            res = fn(ctx)
            ctx["results"][name] = res
            emit(step=name, event="done", ok=True, seconds=time.perf_counter() - t0, result=res)
        except BaseException as e:  # noqa: BLE001 - every failure is recorded, the run goes on
            traceback.print_exc()
            emit(step=name, event="done", ok=False, seconds=time.perf_counter() - t0,
                 error=f"{type(e).__name__}: {str(e)[:2000]}")
            if isinstance(e, KeyboardInterrupt) or "CUDA error" in str(e) or "illegal memory" in str(e):
                return 3  # the CUDA context may be broken: a fresh worker takes the next step
        finally:
            ctx.pop("progress", None)
            _tf32_flags(flags)  # a TF32 step leaves the next one as it found it
            _release()
    return 0


def _tf32_flags(restore: tuple | None = None) -> tuple:
    """torch's TF32 switches (matmul, cuDNN), set back to ``restore`` when given."""
    import torch

    if restore is not None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = restore
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def _release() -> None:
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


# ----------------------------------------------------------------------------------------------- parent

def schedule(name: str, pending: list[str], left: float, steps: dict) -> float:
    """Seconds step ``name`` may take: at most its maximum, at least its minimum unless less is left,
    and never so much that a later pending step loses its minimum."""
    _, lo, hi = steps[name]
    reserve = sum(steps[s][1] for s in pending if s != name)
    return max(0.0, min(left, hi, max(lo, left - reserve)))


def run_steps(names: list[str], ctx: dict, log, budget: float, python: str, on_step) -> dict:
    """Run ``names`` in worker processes (see the module docstring); returns step -> record."""
    from tests.tools.gpu_steps import STEPS

    records: dict[str, dict] = {}
    pending = list(names)
    deadline = time.monotonic() + budget
    tmp = Path(ctx["tmp"])
    while pending:
        ctx_file, res_file = tmp / "ctx.json", tmp / f"results-{len(records)}.jsonl"
        ctx_file.write_text(json.dumps({**ctx, "results": {k: r.get("result") for k, r in records.items()}},
                                       default=str))
        res_file.write_text("")
        log.flush()
        path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        proc = subprocess.Popen([python, "-m", "tests.tools.gpu_check", "--worker", "--ctx", str(ctx_file),
                                 "--results", str(res_file)], stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                text=True, cwd=os.getcwd(), start_new_session=True, env={**os.environ, "PYTHONPATH": path})
        pos, current, started, limit = 0, None, 0.0, 0.0
        killed = False

        def send_next() -> bool:
            nonlocal current, started, limit
            while pending:
                name = pending[0]
                limit = schedule(name, pending, deadline - time.monotonic(), STEPS)
                if limit < 1.0:
                    records[name] = {"ok": False, "skipped": True, "error": "skipped: the check's time budget is spent"}
                    pending.pop(0)
                    on_step(name, records[name])
                    continue
                try:
                    proc.stdin.write(name + "\n")
                    proc.stdin.flush()
                except OSError:  # the worker is gone: a new one takes this step
                    return False
                current, started = name, time.monotonic()
                return True
            try:
                proc.stdin.close()
            except OSError:
                pass
            return False

        if not send_next():
            try:
                proc.stdin.close()
            except OSError:
                pass
            proc.wait()
            if pending:  # the worker was gone before it took a step: that step fails, the run goes on
                name = pending.pop(0)
                records[name] = {"ok": False, "error": f"the worker exited with code {proc.returncode} before this "
                                                       "step started (see the log)"}
                on_step(name, records[name])
                continue
            break
        while True:
            with open(res_file, "rb") as fh:
                fh.seek(pos)
                lines = fh.readlines()
            for raw in lines:
                if not raw.endswith(b"\n"):  # a line still being written: read it next time
                    break
                pos += len(raw)
                rec = json.loads(raw.decode("utf-8"))
                name = rec.pop("step")
                event = rec.pop("event")
                if event == "progress":
                    records.setdefault(name, {})["progress"] = rec
                elif event == "done":
                    progress = records.get(name, {}).get("progress")
                    records[name] = {**rec, "limit_s": round(limit, 1), **({"progress": progress} if progress else {})}
                    pending.remove(name)
                    on_step(name, records[name])
                    current = None
                    if proc.poll() is None and not send_next():
                        break
            if current is None and not pending:
                break
            code = proc.poll()
            if code is not None:
                break
            if current is not None and time.monotonic() - started > limit:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.2)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if current is not None and current in pending:  # stopped for its time, or the worker died in it
            progress = records.get(current, {}).get("progress")
            why = (f"timeout: stopped after {limit:.0f} s (its share of the budget)" if killed
                   else f"the worker exited with code {proc.returncode} during this step")
            records[current] = {"ok": False, "error": why, "seconds": round(time.monotonic() - started, 1),
                                "limit_s": round(limit, 1), **({"progress": progress} if progress else {})}
            pending.remove(current)
            on_step(current, records[current])
    return records


# ----------------------------------------------------------------------------------------------- report

def _get(d, path: str, default=None):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def _res(records: dict, step: str) -> dict:
    r = records.get(step) or {}
    return r.get("result") or {}


def _bench_numbers(b: dict) -> dict:
    """What the table takes from one `bench --json`."""
    if not b:
        return {}
    spl = b.get("seconds_per_layer") or {}
    cfg = b.get("config") or {}
    prec = b.get("precision") if isinstance(b.get("precision"), dict) else {}
    ops = {"ff_ops_per_layer": _get(b, "ops.fast_ff.ops_per_layer"),  # the bench's own counts (profiled apart)
           "ff_kernels_per_layer": _get(b, "ops.fast_ff.kernels_per_layer"),
           "ff_gpu_busy_ms_per_layer": _get(b, "ops.fast_ff.gpu_busy_ms_per_layer"),
           "full_kernels_per_layer": _get(b, "ops.fast_full.kernels_per_layer"),
           "ratios_kernels_per_layer": _get(b, "ops.fast_ratios.kernels_per_layer"),
           "ratios_gpu_busy_ms_per_layer": _get(b, "ops.fast_ratios.gpu_busy_ms_per_layer"),
           "precision_refused": prec.get("refused"), "speedup_vs_float32": prec.get("speedup_vs_float32"),
           "precision_bound": prec.get("bound"), "short": b.get("short")}
    return {"ff_roofline": _get(b, "roofline.fraction"), "ff_roofline_done": _get(b, "roofline.fraction_done"),
            "ff_gflops": _get(b, "roofline.ff_gflops"), "matmul_gflops": _get(b, "roofline.matmul_gflops"),
            "ff_s_per_layer": spl.get("fast_ff"), "full_s_per_layer": spl.get("fast_full"),
            "full_vs_naive": _get(b, "speedup.full_layer"), "k21_ratios_vs_naive": _get(b, "speedup.k21_ratios"),
            "k21_maps_vs_naive": _get(b, "speedup.k21_maps"), "max_rel_error": _get(b, "errors.max_rel_error"),
            "error_bound": _get(b, "errors.bound"), "efficiency": b.get("efficiency"),
            "chunk_rows": cfg.get("chunk_rows"), "chunk_tile": cfg.get("chunk_tile"),
            "chunk_blocks": _get(b, "chunks.blocks"), "chunk_groups": _get(b, "chunks.groups"),
            "ff_terms_bytes": _terms_bytes(cfg),
            "chunk_budget_bytes": cfg.get("chunk_budget_bytes"), "chunk_rule": cfg.get("chunk_rule"),
            "peak_bytes": _get(b, "memory.fast_full.peak_bytes"), "dtype": cfg.get("dtype"), **ops}


def _terms_bytes(cfg: dict) -> int | None:
    """Bytes of a bench batch's FF terms over every pair (what a chunk budget has to cut), float32."""
    try:
        k = 2 if cfg["gated"] else 1
        return int(cfg["batch"] * cfg["seq_len"] ** 2 * (k * cfg["d_ff"] + 2 * cfg["d_model"]) * 4)
    except (KeyError, TypeError):
        return None


def _cut(n: dict) -> tuple:
    return tuple(json.dumps(n.get(k), sort_keys=True) for k in ("chunk_rows", "chunk_tile", "chunk_blocks", "chunk_groups"))


BENCHES = {"bench_base": "base_n128_b8", "bench_base_long": "base_n512_b2", "bench_causal": "smollm2_n128_b8",
           "bench_causal_4096": "smollm2_n4096"}


def table(records: dict, meta: dict) -> dict:
    """Every number of the issue's table, by name (None where its step did not give it)."""
    b = {label: _bench_numbers(_res(records, step)) for step, label in BENCHES.items()}
    prec = {"float32": _bench_numbers(_res(records, "bench_base")), "tf32": _bench_numbers(_res(records, "bench_tf32")),
            "bfloat16": _bench_numbers(_res(records, "bench_bf16"))}
    for mode, step in (("tf32", "bench_tf32"), ("bfloat16", "bench_bf16")):
        err = (records.get(step) or {}).get("error") or ""
        prec[mode]["refused"] = prec[mode].get("precision_refused") or (
            err if ("refuse" in err.lower() or "UsageError" in err) else None)
    prof = _res(records, "profile")
    k24, k24t, k21 = _res(records, "k24_pass"), _res(records, "k24_pass_tf32"), _res(records, "k21_pass")
    mm = {"default": _bench_numbers(_res(records, "bench_base")), "32GiB": _bench_numbers(_res(records, "bench_max_memory"))}
    follows, why = None, None
    if mm["default"] and mm["32GiB"]:
        follows = _cut(mm["default"]) != _cut(mm["32GiB"])
        need = mm["default"].get("ff_terms_bytes")
        budgets = [mm[k].get("chunk_budget_bytes") for k in ("default", "32GiB")]
        if not follows and need and all(b and b >= need for b in budgets):
            follows, why = None, (f"both budgets ({', '.join(f'{b / 2**30:.1f} GiB' for b in budgets)}) hold the batch's "
                                  f"FF terms ({need / 2**30:.2f} GiB): the same cut is right")
    n4096 = b["smollm2_n4096"]
    return {
        **meta,
        "check_max_error": {r: _get(_res(records, f"check_{r}"), "max_rel_error") for r in ("encoder", "decoder")},
        "check_models": {r: _get(_res(records, "stand_ins"), f"{r}.shape") for r in ("encoder", "decoder")},
        "ff_kernels_per_layer": _get(prof, "ff.kernels"), "ff_torch_ops_per_layer": _get(prof, "ff.torch_ops"),
        "ff_gpu_busy_ms": _get(prof, "ff.busy_ms"),
        "bench_ff_kernels_per_layer": b["base_n128_b8"].get("ff_kernels_per_layer"),
        "bench_ff_ops_per_layer": b["base_n128_b8"].get("ff_ops_per_layer"),
        "bench_ff_gpu_busy_ms_per_layer": b["base_n128_b8"].get("ff_gpu_busy_ms_per_layer"),
        "short_inputs": b["base_n128_b8"].get("short"),
        "ff_wall_ms": _get(prof, "ff.wall_ms"), "ff_host_syncs": _get(prof, "ff.host_syncs"),
        "engine_k24_kernels_two_layers": _get(prof, "engine_k24_two_layers.kernels"),
        "engine_k24_host_syncs_two_layers": _get(prof, "engine_k24_two_layers.host_syncs"),
        "ff_roofline": {k: v.get("ff_roofline") for k, v in b.items()},
        "full_vs_naive": {k: v.get("full_vs_naive") for k, v in b.items()},
        "k21_ratios_vs_naive": {k: v.get("k21_ratios_vs_naive") for k, v in b.items()},
        "k21_maps_vs_naive": {k: v.get("k21_maps_vs_naive") for k, v in b.items()},
        "bench": b,
        "precision": prec,
        "matmul_tflops": {m: (prec[m].get("matmul_gflops") or 0) / 1e3 or None for m in prec},
        "efficiency": prec["float32"].get("efficiency"),
        "max_memory": {**mm, "follows_budget": follows, "note": why},
        "k24_pass_s": k24.get("seconds"), "k24_pass_tf32_s": k24t.get("seconds"), "k24_pass": k24 or None,
        "k24_pass_tf32": k24t or None, "k21_pass_s": k21.get("seconds"), "k21_pass": k21 or None,
        "n4096": {"full_s": n4096.get("full_s_per_layer"), "ff_s": n4096.get("ff_s_per_layer"),
                  "peak_bytes": n4096.get("peak_bytes"), "ff_roofline": n4096.get("ff_roofline")},
        "device_map": _res(records, "device_map") or None,
        "cuda_graphs": {k: {m: _get(_res(records, "graphs"), f"{k}.{m}") for m in
                            ("eager_ms", "graph_ms", "graph_vs_eager", "graph_vs_naive", "graph_max_abs_diff", "graph")}
                        for k in ("k21_ratios", "causal_ff")},
        "torch_compile": {k: {m: _get(_res(records, "compile"), f"{k}.{m}") for m in
                              ("graphs", "graph_breaks", "break_reasons", "graphs_compiled", "backend", "compile_s",
                               "eager_ms", "compiled_ms", "compiled_vs_eager", "compiled_max_abs_diff", "compiled")}
                          for k in ("k21_ratios", "causal_ff", "encoder_ff", "full_layer")},
    }


def _t(name: str, value, target, unit: str, ok) -> dict:
    return {"name": name, "value": value, "target": target, "unit": unit, "ok": ok}


def _ge(v, thr):
    return None if v is None else bool(v >= thr)


def _le(v, thr):
    return None if v is None else bool(v <= thr)


def targets(t: dict) -> list[dict]:
    """The issue's "Done when" targets on one H200, float32, each with its value and ok (None: not measured)."""
    out = []
    for k, label in (("base_n128_b8", "BERT-base n = 128 batch 8"), ("base_n512_b2", "BERT-base n = 512 batch 2")):
        out.append(_t(f"FF decomposition >= 70% of the fp32 matmul roofline, {label}", t["ff_roofline"][k], 0.7, "fraction",
                      _ge(t["ff_roofline"][k], 0.7)))
    for k, label in (("smollm2_n128_b8", "SmolLM2 shape n = 128 batch 8"), ("smollm2_n4096", "SmolLM2 shape n = 4096")):
        out.append(_t(f"causal FF >= 60% of the roofline on the minimal pair count, {label}", t["ff_roofline"][k], 0.6,
                      "fraction", _ge(t["ff_roofline"][k], 0.6)))
    for k in ("base_n128_b8", "base_n512_b2"):
        out.append(_t(f"fast full layer >= 3x faster than the naive formulas ({k})", t["full_vs_naive"][k], 3.0, "x",
                      _ge(t["full_vs_naive"][k], 3.0)))
        out.append(_t(f"K21 ratios >= 10x faster than naive ({k})", t["k21_ratios_vs_naive"][k], 10.0, "x",
                      _ge(t["k21_ratios_vs_naive"][k], 10.0)))
    kernels = t["ff_kernels_per_layer"] if t["ff_kernels_per_layer"] is not None else t.get("ff_torch_ops_per_layer")
    out.append(_t("<= 100 kernels per layer, FF decomposition of a BERT-base batch 8 x 128"
                  + ("" if t["ff_kernels_per_layer"] is not None else " (torch ops: no profile)"), kernels,
                  100, "kernels", _le(kernels, 100)))
    out.append(_t("K24 pass 992 x 128 <= 40 s per BERT-base model, float32, statistics included", t["k24_pass_s"], 40.0,
                  "s", _le(t["k24_pass_s"], 40.0)))
    out.append(_t("K21 pass 992 x 86 <= 5 s", t["k21_pass_s"], 5.0, "s", _le(t["k21_pass_s"], 5.0)))
    out.append(_t("SmolLM2 n = 4096, one layer (every scope) <= 1 s", t["n4096"]["full_s"], 1.0, "s",
                  _le(t["n4096"]["full_s"], 1.0)))
    f32 = t["precision"]["float32"].get("ff_s_per_layer")
    for mode in ("tf32", "bfloat16"):
        p = t["precision"][mode]
        if p.get("refused"):
            out.append(_t(f"{mode}: faster than float32 with its error shown, or refused", "refused", None, "", True))
            continue
        v = p.get("ff_s_per_layer")
        if p.get("speedup_vs_float32") is not None:  # the bench's own float32 FF step, same run
            sp = p["speedup_vs_float32"]
            out.append(_t(f"{mode}: faster than float32 (same-run FF step) with its error shown "
                          f"({p.get('max_rel_error')})", sp, 1.0, "x",
                          bool(sp > 1.0 and p.get("max_rel_error") is not None)))
            continue
        ok = None if v is None or f32 is None else bool(v < f32 and p.get("max_rel_error") is not None)
        out.append(_t(f"{mode}: faster than float32 (FF s/layer vs {f32}) with its error shown ({p.get('max_rel_error')})",
                      v, f32, "s", ok))
    for r, e in t["check_max_error"].items():
        out.append(_t(f"check ({t['check_models'][r]} stand-in on the device): every scope <= 1e-4", e, 1e-4, "error",
                      _le(e, 1e-4)))
    mm = t["max_memory"]
    out.append(_t("--max-memory 32GiB vs the default: the FF chunks follow the budget" + (
        f" ({mm['note']})" if mm.get("note") else ""), mm["follows_budget"], True, "", mm["follows_budget"]))
    dm = t["device_map"] or {}
    out.append(_t("device map over GPU, CPU memory and disk decomposes like one device", dm.get("max_abs_diff"), 1e-5,
                  "abs", dm.get("ok")))
    return out


def _commit() -> str | None:
    """The checkout's commit: ``$GPU_CHECK_COMMIT`` when set (a copied tree has no .git), else read from
    .git without git."""
    if os.environ.get("GPU_CHECK_COMMIT"):
        return os.environ["GPU_CHECK_COMMIT"].strip()[:64]
    try:
        dot = ROOT / ".git"
        head = (dot if dot.is_file() else dot / "HEAD").read_text().strip()
        if head.startswith("gitdir:"):  # a worktree
            gd = Path(head.split(":", 1)[1].strip())
            head = (gd / "HEAD").read_text().strip()
            common = gd / ((gd / "commondir").read_text().strip() if (gd / "commondir").exists() else ".")
        else:
            gd = common = ROOT / ".git"
        if head.startswith("ref:"):
            ref = head.split(":", 1)[1].strip()
            for base in (gd, common):
                if (base / ref).exists():
                    return (base / ref).read_text().strip()
            packed = common / "packed-refs"
            if packed.exists():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
            return None
        return head
    except OSError:
        return None


def _write(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _mark(ok) -> str:
    return {True: "✓", False: "✗", None: "-"}[ok]


def step_names(steps: str | None, dry: bool) -> list[str]:
    """The steps a run takes: those ``--steps`` names, else every step but, on a GPU, those taken on request
    (`gpu_steps.ON_REQUEST`)."""
    from tests.tools.gpu_steps import ON_REQUEST, STEPS

    if steps:
        return [s.strip() for s in steps.split(",") if s.strip()]
    return [s for s in STEPS if dry or s not in ON_REQUEST]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="the same steps on the CPU with tiny sizes")
    ap.add_argument("--out", help="the JSON file (default $OUT/gpu-check.json, else ./gpu-check.json)")
    ap.add_argument("--budget", type=float, default=None, help=f"seconds for every step (default {BUDGET_S})")
    ap.add_argument("--steps", help="only these steps, comma-separated (default: all but compile on a GPU)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a step failed")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ctx", help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.ctx, args.results)
    from tests.tools.gpu_steps import STEPS

    names = step_names(args.steps, args.dry_run)
    unknown = [s for s in names if s not in STEPS]
    if unknown:
        print(f"gpu_check: unknown steps {', '.join(unknown)}; known: {', '.join(STEPS)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(os.environ["OUT"]) / "gpu-check.json" if os.environ.get("OUT") \
        else Path("gpu-check.json")
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.with_suffix(".log")
    budget = args.budget if args.budget is not None else BUDGET_S
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp, open(log_path, "w", encoding="utf-8") as log:
        env_home = Path(tmp) / "user-cache"  # the tool's user cache (causality memos): nothing outside tmp
        os.environ.setdefault("REPORT_BUILDER_CACHE", str(env_home))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        ctx = {"dry": args.dry_run, "device": "cpu" if args.dry_run else "cuda", "tmp": tmp}
        meta = {"schema": SCHEMA, "date": _now(), "mode": "dry-run" if args.dry_run else "gpu",
                "commit": _commit(), "budget_s": budget, "out": str(out), "log": str(log_path)}

        def say(line: str) -> None:
            print(line, flush=True)
            log.write(f"[gpu_check] {line}\n")
            log.flush()

        doc: dict = {**meta, "steps": {}}

        def on_step(name: str, rec: dict) -> None:
            doc["steps"][name] = rec
            env = (doc["steps"].get("env") or {}).get("result") or {}
            doc["table"] = table(doc["steps"], {"device": env.get("gpu") or env.get("device"), "torch": env.get("torch"),
                                                "transformers": env.get("transformers"), "date": meta["date"]})
            doc["targets"] = targets(doc["table"])
            doc["wall_s"] = round(time.monotonic() - t0, 1)
            _write(out, doc)
            say(f"{_mark(rec.get('ok'))} {name}: {rec.get('seconds', 0):.1f} s"
                + (f" ({rec['error']})" if rec.get("error") else ""))

        say(f"{meta['mode']} check, budget {budget:.0f} s, {len(names)} steps -> {out}")
        run_steps(names, ctx, log, budget, sys.executable, on_step)
        doc["wall_s"] = round(time.monotonic() - t0, 1)
        doc["done"] = True
        _write(out, doc)
        for t in doc.get("targets", []):
            say(f"  {_mark(t['ok'])} {t['name']}: {t['value']}")
        failed = [k for k, r in doc["steps"].items() if not r.get("ok")]
        say(f"done in {doc['wall_s']:.0f} s; {len(doc['steps']) - len(failed)} of {len(names)} steps ran"
            + (f"; failed: {', '.join(failed)}" if failed else "") + f"; JSON {out}, log {log_path}")
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
