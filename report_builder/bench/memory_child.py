"""Peak-memory child of the benchmark: ``python -m report_builder.bench.memory_child '<json args>'``,
started by `run_child` in the parent.

Builds the model in a fresh interpreter, runs one forward pass up to layer 0 with its capture (one
sequence; the later layers never run, `bench.shapes.capture_layers`), then one method (``fast_full`` or
``naive_full``) and prints one JSON line with the
process's peak RSS (model and interpreter included), the RSS just before the method and the peak
during the method (the peak is reset just before it where Linux allows) and their difference. With
``max_memory`` the chunk budget is derived from it as in the parent; with ``check`` the result
carries the reconstruction errors against the HF tensors (``errors`` per check point, ``max_error``).

Pitfall: everything the child imports counts in its peak, so it imports torch and the engine inside
`main`, and the package's ``__init__`` imports nothing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def run_child(args: dict, timeout: float = 900) -> dict:
    """Run this module in a fresh interpreter with ``args``; its last stdout line is JSON (an
    ``error`` entry when it failed or timed out)."""
    env = dict(os.environ, HF_HUB_OFFLINE=os.environ.get("HF_HUB_OFFLINE", "1"))
    cmd = [sys.executable, "-m", "report_builder.bench.memory_child", json.dumps(args)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300], "returncode": p.returncode}
    return json.loads(lines[-1])


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    import torch

    from report_builder.bench.memory import MIB, chunk_budget, reset_rss_peak, rss_now, rss_peak
    from report_builder.bench.shapes import build, capture_layers, layer_dims, random_inputs
    from report_builder.decompose.attention import is_causal
    from report_builder.decompose.chunks import ff_tiles
    from report_builder.decompose.layouts import decompose_layer
    from report_builder.schema import K21_METHODS

    if args.get("threads"):
        torch.set_num_threads(int(args["threads"]))
    mode = args.get("dtype", "float32")  # a precision mode: the model stays float32
    lm = build(args.get("shape"), args.get("model"), args.get("device", "cpu"), "float32")
    dims = layer_dims(lm)
    n = int(args["seq_len"])
    inputs = random_inputs(lm, n, 1)
    with torch.no_grad():
        cap = capture_layers(lm, inputs, [0])[0]
        lw = lm.layer_weights(0)
        x, a = cap.x[0], cap.alpha[0]
        refs = {k: t[0] for k, t in cap.refs.items()}
        del cap
        itemsize = x.element_size()
        limit = args.get("max_memory")
        causal = is_causal(a)
        budget = (chunk_budget(int(limit), n, dims["d_model"], dims["d_ff"], dims["heads"], dims["gated"], itemsize,
                               causal=causal) if limit else 512 * MIB)
        peak_before = rss_peak()
        reset = reset_rss_peak()
        before = rss_now()
        t0 = time.perf_counter()
        rule = args.get("chunk_rule", "cpu")
        rows, tile = ff_tiles(n, dims["d_model"], dims["d_ff"], budget_bytes=budget, itemsize=itemsize,
                              gated=dims["gated"]) if rule == "cpu" else (None, n)
        out = {"mode": args["mode"], "chunk_budget_bytes": budget, "chunk_rows": rows, "chunk_tile": tile,
               "causal": causal, "chunk_rule": rule, "dtype": mode}
        if args["mode"] == "naive_full":
            from report_builder.decompose.reference import reference_layer, reference_maps
            reference_maps(reference_layer(lw, x, a, ig="closed"))
        else:
            res = decompose_layer(lw, x, a, maps=lw.scopes + K21_METHODS, ratios=True, refs=refs, extras=True,
                                  budget_bytes=budget if limit or rule == "cpu" else None, chunk_rule=rule,
                                  precision=mode, causal=lm.causal)
            if args.get("check"):
                out["errors"] = dict(res.errors)
                out["max_error"] = max(res.errors.values())
        out["seconds"] = time.perf_counter() - t0
    method_peak = rss_peak()
    out.update(peak_rss_bytes=max(method_peak, peak_before), method_peak_rss_bytes=method_peak,
               rss_before_bytes=before, peak_before_bytes=peak_before, peak_reset=reset,
               delta_bytes=max(0, method_peak - before))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
