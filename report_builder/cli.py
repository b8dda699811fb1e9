"""Command line: a thin layer over `report_builder.api` (argument parsing and printing only)."""
from __future__ import annotations

import argparse
import json
import sys

from report_builder import __version__, api
from report_builder.errors import ReportBuilderError


def _config(args):
    changes = {k: getattr(args, k) for k in ("device", "dtype", "cache_dir", "max_memory", "threads")
               if getattr(args, k, None) is not None}
    if getattr(args, "out", None):
        changes["out_dir"] = args.out
    return api.configure(args.config, preset=args.preset, models=getattr(args, "model", None) or (), **changes)


def _add_config_args(p, *, models=True):
    p.add_argument("--preset", choices=["default", "smoke", "paper"], help="a named configuration (default: default)")
    p.add_argument("--config", help="a YAML configuration file (see examples/config.yaml)")
    if models:
        p.add_argument("--model", action="append", metavar="SOURCE",
                       help="analyse this model instead (embedded name, local dir or hub id); repeatable")
        p.add_argument("--device", help="cpu or cuda")
        p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"])
        p.add_argument("--max-memory", dest="max_memory", help="memory budget for the FF chunks, e.g. 2GiB")
        p.add_argument("--threads", type=int, help="torch CPU threads (default: all cores, 1 on a busy machine)")
    p.add_argument("--cache", dest="cache_dir", help="results cache directory (default .cache/report_builder)")
    p.add_argument("--out", help="site output directory (default site)")


def _print_table(rows: list[dict]) -> None:
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    w = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.ljust(w[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(w[c]) for c in cols))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="report-builder", description=__doc__)
    ap.add_argument("--version", action="version", version=f"report_builder {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, help_ in (("build", "run the analyses (cached) and render the site"),
                        ("analyze", "run the analyses only (results go to the cache)")):
        p = sub.add_parser(name, help=help_)
        _add_config_args(p)
        p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p = sub.add_parser("render", help="render the site from the cached results of the last build (no torch needed)")
    _add_config_args(p, models=False)
    p = sub.add_parser("list", help="list figures, models or datasets")
    p.add_argument("what", choices=["figures", "models", "datasets"])
    _add_config_args(p, models=False)
    p = sub.add_parser("clean", help="remove the results cache and the generated site")
    _add_config_args(p, models=False)
    p = sub.add_parser("serve", help="preview the built site over HTTP")
    p.add_argument("--dir", default="site")
    p.add_argument("--port", type=int, default=8000)
    p = sub.add_parser("check", help="print per layer and scope the reconstruction error against the HF forward")
    p.add_argument("--model", required=True, help="embedded name (minilm, smollm2), local dir or hub id")
    p.add_argument("--text", action="append", help="a sentence to decompose (repeatable)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p = sub.add_parser("bench", help="side-by-side speed and memory benchmark")
    p.add_argument("--shape", default=None, help="tiny, base, large, gpt2-base or llama-small")
    p.add_argument("--model", default=None, help="bench a real model instead of a shape")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--max-memory", default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 is fastest on a busy machine)")
    p.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    try:
        return _dispatch(args)
    except (ReportBuilderError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished cache entries are kept; no partial entry or half-written site remains",
              file=sys.stderr)
        return 130


def _dispatch(args) -> int:
    if args.cmd == "check":
        rows = api.check(args.model, args.text, device=args.device, dtype=args.dtype)
        print(f"{'layer':>5}  {'scope':<12} max relative error")
        for r in rows:
            print(f"{r['layer']:>5}  {r['scope']:<12} {r['max_rel_error']:.3e}")
        worst = max(r["max_rel_error"] for r in rows)
        print(f"max relative reconstruction error: {worst:.3e}")
        bound = api.ERROR_BOUND if args.dtype == "float32" else float("inf")
        if worst > bound:
            print(f"error: exceeds the bound {bound:g}", file=sys.stderr)
            return 1
        return 0
    if args.cmd == "bench":
        res = api.bench(shape=args.shape or (None if args.model else "base"), model=args.model, seq_len=args.seq_len,
                        batch=args.batch, device=args.device, dtype=args.dtype, max_memory=args.max_memory,
                        repeats=args.repeats, threads=args.threads)
        print(json.dumps(res, indent=1, default=str) if args.json else api.format_bench(res))
        return 0
    if args.cmd == "serve":
        api.serve(args.dir, args.port)
        return 0
    if args.cmd == "list" and args.what == "figures":
        _print_table(api.list_figures())
        return 0
    if args.cmd == "list" and args.what == "datasets":
        _print_table(api.list_datasets())
        return 0
    cfg = _config(args)
    if args.cmd == "list":
        _print_table(api.list_models(cfg))
    elif args.cmd == "clean":
        print(api.clean(cfg))
    elif args.cmd == "render":
        api.render(cfg)
    elif args.cmd == "analyze":
        rep = api.analyze(cfg, progress=not args.no_progress)
        print(f"analyses: {len(rep.computed)} computed, {len(rep.reused)} reused ({rep.seconds:.1f}s)")
    elif args.cmd == "build":
        api.build(cfg, progress=not args.no_progress)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
