"""Command line: a thin layer over `report_builder.api` (argument parsing and printing only).

Conventions: results and tables go to stdout (``--json`` for machine-readable ones); the build log,
progress bars, warnings and errors go to stderr through ``logging`` (``-q`` only warnings and errors,
``-v`` also debug messages; the libraries underneath follow: `logsetup`). ``--set KEY=VALUE``
overrides any configuration key. A command has only the options it uses; `_inapplicable` refuses those
that depend on another. A failure is one ``error:`` line with its exit code (`_describe`).
"""
from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys

from report_builder import __version__, api, cli_citations
from report_builder.caches import default_dir
from report_builder.config import DEVICE_MAPS, DTYPES
from report_builder.errors import (EXIT_CODES, ReportBuilderError, UsageError, clip, cli_vocabulary, exit_code,
                                    for_terminal, terminal_table)
from report_builder.logsetup import library_noise, log, setup_logging  # noqa: F401 - cli.setup_logging
from report_builder.schema import CHUNK_RULES, PRECISIONS

EPILOG = "Results go to stdout, the build log to stderr. Docs: README.md; every config key: docs/examples/config.yaml."


def _say(text: object) -> None:
    """Print a result to stdout with terminal control characters escaped (names, ids and paths in
    tables, plans and summaries come from the user's configuration and data)."""
    print(for_terminal(text, newlines=True))


def _config(args):
    changes = {k: getattr(args, k) for k in ("device", "dtype", "cache_dir", "max_memory", "threads", "data_dir",
                                          "shard_size", "device_map", "device_memory", "chunk_rule")
               if getattr(args, k, None) is not None}
    if getattr(args, "out", None) is not None:  # `--out ""` is refused by the config's path check, not `site`
        changes["out_dir"] = args.out
    if args.cmd == "render":  # the cache's recorded configuration, or a given one that must agree with it
        from report_builder.last_build import render_config

        given = api.configure(args.config, preset=args.preset) if (args.config or args.preset) else None
        cfg = render_config(given, overrides=args.set or [], **changes)
    else:
        cfg = api.configure(args.config, preset=args.preset, models=getattr(args, "model", None) or (), **changes)
        cfg = api.with_overrides(cfg, getattr(args, "set", None) or [])
    if args.config and (args.cmd == "render" or args.cmd == "build" and not args.plan):  # the swap would delete it
        from report_builder.guard import check_input_outside

        check_input_outside(cfg.out_dir, args.config, "--config")
    if log.isEnabledFor(logging.DEBUG):
        import yaml

        log.debug("resolved configuration:\n" + yaml.safe_dump(cfg.to_dict(), sort_keys=False).rstrip())
    return cfg


def _common() -> argparse.ArgumentParser:
    """-v/-q, accepted before or after the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="more log on stderr (debug messages, the resolved configuration)")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="only warnings and errors on stderr; no progress bars")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the full traceback of an error (otherwise one `error:` line)")
    return p


def _add_config_args(p, *, models: bool = True, out: bool = True, cache: bool = True, data: bool = True) -> None:
    """The configuration options; a command gets only those it uses (an option it would ignore is refused)."""
    g = p.add_argument_group("configuration")
    g.add_argument("--preset", metavar="{default,smoke,paper}",
                   help="a named configuration: default (offline: 7 min from an empty cache on an idle 2-core CPU), "
                        "smoke (a few sequences: 52 s), "
                        "paper (the papers' models; needs the hub and a GPU); default: default")
    g.add_argument("--config", metavar="FILE", help="a YAML configuration file (see docs/examples/config.yaml)")
    g.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any configuration key, e.g. --set k24.top_k=5 --set datasets.0.n=16; repeatable")
    if models:
        g.add_argument("--model", action="append", metavar="NAME=SOURCE",
                       help="swap the source of the configured model NAME (embedded name, local dir or hub id): "
                            "it keeps its name, role and figures, so only its results recompute and the Changes "
                            "page compares its numbers; repeatable. A bare SOURCE instead replaces every "
                            "configured model: a report of only the given models, named by their source")
        g.add_argument("--device", help="cpu or cuda (default: the configuration's, cpu)")
        g.add_argument("--dtype", choices=DTYPES,
                       help="precision of the pair GEMMs on a GPU (the model stays float32; each mode's error "
                            "bound is enforced: float32 1e-4)")
        g.add_argument("--chunk-rule", dest="chunk_rule", choices=CHUNK_RULES,
                       help="how the feed-forward step is cut: auto (default: the device's), cpu or gpu")
        g.add_argument("--max-memory", dest="max_memory", metavar="SIZE",
                       help="memory budget for the feed-forward chunks, e.g. 2GiB")
        g.add_argument("--device-map", dest="device_map", metavar="MODE",
                       choices=DEVICE_MAPS,
                       help="spread a model larger than one GPU over the node's GPUs (accelerate): auto, balanced, "
                            "balanced_low_0, sequential; none (default) keeps it on --device")
        g.add_argument("--device-memory", dest="device_memory", metavar="SIZE",
                       help="with --device-map: the weights budget of each GPU, e.g. 40GiB (default: its free "
                            "memory less --max-memory); what does not fit stays in CPU memory, then on disk")
        g.add_argument("--threads", type=int, metavar="N",
                       help="CPU worker threads across sequences (default: all cores, 1 on a busy machine); results are identical for any count")
        g.add_argument("--shard-size", dest="shard_size", type=int, metavar="N",
                       help="split each analysis over more than N sequences into shards of N (cached one by one, "
                            "reduced exactly: tables identical to an unsharded build; a resumed build reuses "
                            "every finished shard)")
    if data:
        g.add_argument("--data-dir", dest="data_dir", metavar="DIR",
                       help="local datasets: DIR/SST-2/dev.tsv, DIR/MNLI/dev_matched.tsv, DIR/conll2003/valid.txt "
                            "(fills the path of every such dataset entry that has none)")
    if cache:
        g.add_argument("--cache", dest="cache_dir", metavar="DIR",
                       help="results cache directory (default: the user cache's, the same from any directory: "
                            f"{default_dir()})")
    if out:
        g.add_argument("--out", metavar="DIR", help="site output directory (default site)")


def _add_plan_args(p) -> None:
    g = p.add_argument_group("cost estimate")
    g.add_argument("--gpu", metavar="NAME",
                   help="price a GPU that is not here by its datasheet peak: A100, H100 or H200")
    g.add_argument("--gpu-flops", dest="gpu_flops", type=float, metavar="TFLOPS",
                   help="price a GPU that is not here by the TFLOP/s a large matmul reaches on it")
    g.add_argument("--gpus", type=int, metavar="N",
                   help="also estimate the time on N GPUs (tasks balanced greedily; default 1)")


def _add_executor_args(p) -> None:
    from report_builder import executors

    executors.add_arguments(p)  # --executor and each executor's own options


def _executor(args, quiet: bool):
    from report_builder import executors

    return api.executor(args.executor or executors.DEFAULT, log=log.info, progress=not (args.no_progress or quiet),
                        **executors.options_of(args))


def _print_table(rows: list[dict], as_json: bool = False) -> None:
    if as_json:
        print(json.dumps(rows, indent=1, default=str))
        return
    if not rows:
        print("(none)")
        return
    cols = list(rows[0])
    for line in terminal_table([cols, *([r.get(c, "") for c in cols] for r in rows)]):
        print(line)


def _sub(sub, name: str, summary: str, description: str, common) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}. {description}",
                          parents=[common], epilog=EPILOG)


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors print through `for_terminal` (its "unrecognized arguments"
    line quotes them raw; its subcommands' parsers are of this class too)."""

    def error(self, message: str):
        super().error(for_terminal(message))


def build_parser() -> argparse.ArgumentParser:
    """The ``report-builder`` argument parser (every command and option documented)."""
    common = _common()
    ap = _Parser(
        prog="report-builder", parents=[common], epilog=EPILOG,
        description="Exact token-to-token decomposition of Transformer layers, rendered as a citable "
                    "static report reproducing Kobayashi et al. (EMNLP 2021, ICLR 2024).")
    ap.add_argument("--version", action="version", version=f"report_builder {__version__}",
                    help="print the version and exit")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p = _sub(sub, "build", "run the analyses (cached) and render the site",
             "Results already in the cache are reused; the headline numbers go to stdout.", common)
    _add_config_args(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_executor_args(p)
    p.add_argument("--plan", action="store_true",
                   help="print the tasks the build would run and what they cost (as `report-builder plan`) and stop")
    p.add_argument("--json", action="store_true", help="with --plan: one JSON object (tasks, totals, device)")
    _add_plan_args(p)  # with --plan only
    p = _sub(sub, "plan", "list the tasks a build would run, what each costs, and which results are cached",
             "Loads no weights: analysis x model x dataset, sequences, FLOPs, estimated time on the device "
             "(from a calibration matmul run now), peak memory and disk.", common)
    _add_config_args(p, out=False)
    p.add_argument("--json", action="store_true", help="one JSON object (tasks, totals, device) instead of a table")
    _add_plan_args(p)
    p = _sub(sub, "analyze", "run the analyses only (results go to the cache)",
             "Prints how many analyses were computed and reused; `render` turns them into the site.", common)
    _add_config_args(p, out=False)
    _add_executor_args(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p = _sub(sub, "render", "render the site from the cached results of the last build",
             "Needs no torch and no data files: the cache records the build's configuration and data, so "
             "`render --cache DIR` rebuilds the same site from any directory (a machine with the [render] "
             "extra suffices). A --config/--preset/--set must agree with the recorded build on every key that "
             "changes results (out_dir, site_url and figures may differ).", common)
    _add_config_args(p, models=False, data=False)
    p = _sub(sub, "list", "list figures, models or datasets",
             "figures: every figure id (with a configuration: those it builds); models: the configured and "
             "embedded models; datasets: the offline sets with their content hashes (with a configuration: "
             "its own datasets first, as its build reads them).", common)
    p.add_argument("what", choices=["figures", "models", "datasets"], help="what to list")
    p.add_argument("--json", action="store_true", help="one JSON array of rows instead of a table")
    _add_config_args(p, models=False, out=False, cache=False)
    p = _sub(sub, "check", "print per layer and check point the reconstruction error against the HF forward",
             "Exits non-zero when a float32 error exceeds 1e-4.", common)
    p.add_argument("--model", required=True, metavar="SOURCE",
                   help="embedded name (minilm, smollm2, gemma3-270m), local dir or hub id")
    p.add_argument("--text", action="append", help="a sentence to decompose (repeatable; default: two examples)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--dtype", default="float32", choices=DTYPES,
                   help="precision mode of the pair GEMMs (default float32; the model stays float32)")
    p.add_argument("--chunk-rule", dest="chunk_rule", default="auto", choices=CHUNK_RULES,
                   help="how the feed-forward step is cut: auto (default: the device's), cpu or gpu")
    p.add_argument("--json", action="store_true", help="one JSON object (rows, worst error, bound, ok)")
    p = _sub(sub, "env", "show versions, the torch device, the embedded models and the caches",
             "Paste its output into a bug report.", common)
    _add_config_args(p, models=False, data=False)
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p = _sub(sub, "clean", "remove the results cache (the default one serves every directory's builds) and the "
                           "generated site",
             "Only what report_builder made is removed (directories carrying its marker file).", common)
    _add_config_args(p, models=False, data=False)
    p.add_argument("--all", action="store_true", dest="all",
                   help="also remove, in the user cache, the converted models, the fetched model wheels, the "
                        "cached evaluation sets and reproduce's default cache, and stale temporary folders")
    p.add_argument("--versions-older-than", dest="versions_older_than", metavar="DATE|Nd",
                   help="also remove the published figure versions created before DATE (2025-06-01) or N days "
                        "ago (30d), except each figure's current one (all: every version, and the site folder); "
                        "without it `clean` keeps every version and the report history")
    p = _sub(sub, "serve", "preview the built site over HTTP",
             "A static file server (no rebuild on change); Ctrl+C stops it.", common)
    p.add_argument("--dir", default="site", help="the built site folder (default site)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; 0.0.0.0 serves the whole network)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p = _sub(sub, "bench", "side-by-side speed and memory benchmark",
             "The plain HF forward pass, the naive reference and the fast engine, measured in one run.", common)
    p.add_argument("--shape", default=None, help="a synthetic shape: tiny, tiny-llama, base, large, gpt2-base or "
                                                 "llama-small (default base)")
    p.add_argument("--model", default=None, metavar="SOURCE", help="bench a real model instead of a shape "
                                                                    "(not with --shape)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--batch", type=int, default=None,
                   help="sequences per batch (default 1; --k24-pass/--k21-pass on CUDA: at most this many, default "
                        "as many as the GPU's free memory holds)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--dtype", default="float32", help="float32, tf32, bfloat16 or float16: the pair GEMMs' "
                                                      "precision mode (default float32)")
    p.add_argument("--chunk-rule", dest="chunk_rule", default=None, choices=CHUNK_RULES,
                   help="how the feed-forward step is cut: auto (default: the device's), cpu or gpu")
    p.add_argument("--max-memory", default=None, metavar="SIZE", help="feed-forward chunk budget, e.g. 2GiB")
    p.add_argument("--repeats", type=int, help="timed repeats per method (default 3; not with --k24-pass or --k21-pass)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 is fastest on a busy machine)")
    p.add_argument("--layers", type=int, default=None, metavar="N", help="layers to decompose (default 2; all for tiny)")
    p.add_argument("--skip-naive", action="store_true", help="skip the naive baselines (e.g. for long sequences)")
    p.add_argument("--k24-pass", type=int, default=None, metavar="N",
                   help="instead: time a full K24 pass over N random sequences of --seq-len tokens "
                        "(paper size: 992 x 128 on --shape base); --batch sequences at once on CUDA")
    p.add_argument("--k21-pass", type=int, default=None, metavar="N",
                   help="instead: time a K21 pass (ratios, k21_tokens, k21_freq) over N random sequences of "
                        "--seq-len tokens, and the K21 host statistics apart (paper size: 992 x 86 on --shape base)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the text report")
    cli_citations.add_commands(sub, common, _sub)
    return ap


def _inapplicable(args) -> str | None:
    """The first option given that ``args.cmd`` would ignore, as a usage message (None: all apply).
    Options a command never uses are not on its parser at all; these are the ones that depend on another."""
    def given(*dests: str) -> bool:
        return any(getattr(args, d, None) not in (None, False) for d in dests)

    if given("verbose") and given("quiet"):
        return "-v and -q contradict each other; give one"
    if args.cmd == "build" and not args.plan:
        for flag, dest in (("--json", "json"), ("--gpu", "gpu"), ("--gpu-flops", "gpu_flops"), ("--gpus", "gpus")):
            if given(dest):
                return f"{flag} applies to `build --plan` only (or use `report-builder plan`)"
    if args.cmd == "build" and args.plan:
        from report_builder import executors

        if given("no_progress", "executor", *executors.options_of(args)):
            return "--no-progress, --executor and the executors' options apply to a build, not to --plan"
    if args.cmd == "bench" and args.shape and args.model:
        return "--shape and --model exclude each other: bench a synthetic shape or a real model"
    if args.cmd == "bench" and (args.k24_pass or getattr(args, "k21_pass", None)) and given("repeats"):
        return "--repeats applies to the side-by-side benchmark, not to --k24-pass or --k21-pass"
    if args.cmd == "bench" and (args.k24_pass or getattr(args, "k21_pass", None)) and given("chunk_rule"):
        return "--chunk-rule applies to the side-by-side benchmark (a pass uses the device's rule)"
    if args.cmd == "bench" and args.k24_pass and getattr(args, "k21_pass", None):
        return "--k24-pass and --k21-pass exclude each other: time one pass at a time"
    if args.cmd == "list" and args.what != "datasets" and given("data_dir"):
        return "--data-dir applies to `list datasets` only"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    wrong = _inapplicable(args)
    if wrong:
        _subparsers(parser)[args.cmd].error(wrong)  # exit 2, like any other usage error
    setup_logging(getattr(args, "verbose", 0) or 0, getattr(args, "quiet", False),
                  progress=not getattr(args, "no_progress", False))

    from report_builder.guard import install_sigterm

    install_sigterm()  # SIGTERM cleans up like Ctrl-C: no temp dirs left behind
    debug = getattr(args, "debug", False)
    with cli_vocabulary():  # messages name the options typed here (`errors.option`), not the API's keywords
        return _run(args, debug)


def _run(args, debug: bool) -> int:
    """Run the parsed command: its exit code; a failure is one `error:` line (`_describe`)."""
    try:
        _check_preset(getattr(args, "preset", None))
        return _dispatch(args)
    except BrokenPipeError:  # `report-builder list figures | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt as e:
        from report_builder.guard import Terminated

        print(f"\n{'terminated' if isinstance(e, Terminated) else 'interrupted'}: finished cache entries are "
              "kept; no partial entry, temporary folder or half-written site remains", file=sys.stderr)
        return EXIT_CODES["terminated" if isinstance(e, Terminated) else "interrupted"]
    except Exception as e:  # noqa: BLE001 - every failure is one `error:` line; --debug shows the traceback
        if debug:
            raise
        msg, code = _describe(e, args.cmd)
        log.error(msg)
        return code


def _check_preset(name: str | None) -> None:
    """A bad ``--preset`` is one line (exit 2), not the whole usage: "did you mean" and the presets."""
    from report_builder.config import PRESETS, did_you_mean
    from report_builder.errors import shown

    if name is not None and name not in PRESETS:
        guess = did_you_mean(name, list(PRESETS))
        raise UsageError(f"--preset {shown(name)}: no such preset{f'; did you mean {guess}?' if guess else ''} "
                         f"(presets: {', '.join(PRESETS)})")


def _subparsers(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _describe(e: Exception, cmd: str | None = None) -> tuple[str, int]:
    """The one-line message and exit code of a failure; "internal error" only for what a user cannot cause
    (a bug). The codes: docs/guide/configuration.md "Sizes, configuration checks and exit codes"."""

    from report_builder import extras

    if isinstance(e, ReportBuilderError):
        return str(e), exit_code(e)
    cause: BaseException | None = e
    while cause is not None:  # a missing optional module, however deep: the extra that installs it
        missing = extras.from_import_error(cause, f"`report-builder {cmd}`" if cmd else None)
        if missing is not None:
            return str(missing), exit_code(missing)
        cause = cause.__cause__ or cause.__context__
    disk = e  # a full or read-only disk under a stage's wrapper ("figure X: could not write its files")
    while disk is not None and not (isinstance(disk, OSError) and disk.errno in _DISK_ERRORS):
        disk = disk.__cause__
    e = disk if disk is not None else e
    if isinstance(e, OSError) and e.errno in _DISK_FULL:
        written = e.filename2 or e.filename  # a copy (shutil) names its source first, the file written second
        where = f" writing {written}" if written else ""
        return (f"the disk is full{where}; free some space or choose another --out/--cache "
                f"(finished cache entries are kept, no partial one)", EXIT_CODES["config"])
    if isinstance(e, OSError) and e.errno in _DENIED:
        where = f" {e.filename}" if e.filename else ""
        return (f"permission denied{where} ({e.strerror}); choose another --out/--cache or fix the permissions",
                EXIT_CODES["config"])
    if isinstance(e, FileNotFoundError):
        return f"{e.strerror or e}: {e.filename}" if e.filename else str(e), EXIT_CODES["config"]
    return (f"internal error: {type(e).__name__}: {clip(str(e), 500)} (rerun with --debug for the traceback and "
            "report it)", 1)


_DISK_FULL = frozenset((errno.ENOSPC, errno.EDQUOT))
_DENIED = frozenset((errno.EACCES, errno.EPERM, errno.EROFS))
_DISK_ERRORS = _DISK_FULL | _DENIED
"""The errors of a full or read-only disk, or a denied write (`_describe`: one line, exit 3)."""


def _dispatch(args) -> int:
    quiet = getattr(args, "quiet", False)
    done = cli_citations.dispatch(args)
    if done is not None:
        return done
    if args.cmd == "check":
        rows = api.check(args.model, args.text, device=args.device, dtype=args.dtype, chunk_rule=args.chunk_rule)
        worst = max(r["max_rel_error"] for r in rows)
        bound = PRECISIONS[args.dtype].bound
        if args.json:
            print(json.dumps({"model": args.model, "dtype": args.dtype, "rows": rows, "max_rel_error": worst,
                              "bound": None if bound == float("inf") else bound, "ok": worst <= bound}, indent=1))
        else:
            print(f"{'layer':>5}  {'scope':<12} max relative error")
            for r in rows:
                print(f"{r['layer']:>5}  {r['scope']:<12} {r['max_rel_error']:.3e}")
            print(f"max relative reconstruction error: {worst:.3e}")
        if worst > bound:
            log.error(f"the reconstruction error {worst:.3e} exceeds the bound {bound:g}")
            return EXIT_CODES["reconstruction"]
        return 0
    if args.cmd == "bench":  # counts: 0 or less is a typo, not "the default" (--k24-pass 0 ran the other bench)
        for flag, dest in (("--seq-len", "seq_len"), ("--batch", "batch"), ("--repeats", "repeats"),
                           ("--threads", "threads"), ("--k24-pass", "k24_pass"), ("--k21-pass", "k21_pass")):
            if getattr(args, dest, None) is not None and getattr(args, dest) < 1:
                raise UsageError(f"{flag}: expected a positive number, got {getattr(args, dest)}")
    if args.cmd == "bench" and (args.k24_pass or getattr(args, "k21_pass", None)):  # one of them (checked above)
        from report_builder import bench

        run, fmt = ((bench.run_k24_pass, bench.format_k24_pass) if args.k24_pass
                    else (bench.run_k21_pass, bench.format_k21_pass))
        res = run(shape=args.shape or (None if args.model else "base"), model=args.model,
                  n_seqs=args.k24_pass or args.k21_pass, seq_len=args.seq_len,
                  batch=args.batch,
                  device=args.device, dtype=args.dtype, max_memory=args.max_memory, threads=args.threads)
        _say(json.dumps(res, indent=1, default=str) if args.json else fmt(res))
        return 0
    if args.cmd == "bench":
        res = api.bench(shape=args.shape or (None if args.model else "base"), model=args.model, seq_len=args.seq_len,
                        batch=1 if args.batch is None else args.batch, device=args.device, dtype=args.dtype, max_memory=args.max_memory,
                        repeats=3 if args.repeats is None else args.repeats, threads=args.threads, layers=args.layers,
                        naive=False if args.skip_naive else None, chunk_rule=args.chunk_rule or "auto")
        _say(json.dumps(res, indent=1, default=str) if args.json else api.format_bench(res))
        return 0
    if args.cmd == "serve":
        api.serve(args.dir, args.port, host=args.host)
        return 0
    if args.cmd == "list" and args.what != "models" and not (args.config or args.preset or args.set or
                                                              getattr(args, "data_dir", None)):
        _print_table(api.list_figures() if args.what == "figures" else api.list_datasets(), args.json)
        return 0
    cfg = _config(args)
    if args.cmd == "list" and args.what == "models" and not args.json:  # two tables: the build's, the embedded
        rows = api.list_models(cfg)
        print("configured models (this configuration's; --model NAME=SOURCE swaps one's source):")
        _print_table([{k: r[k] for k in ("name", "source", "role")} for r in rows if r["configured"] == "yes"])
        print("\nembedded models (offline sources a configuration or --model may name):")
        _print_table([{k: r[k] for k in ("source", "description")} for r in rows if r["configured"] == "no"])
    elif args.cmd == "list":
        rows = {"figures": api.list_figures, "models": api.list_models, "datasets": api.list_datasets}[args.what](cfg)
        _print_table(rows, args.json)
    elif args.cmd == "env":
        info = api.environment(cfg)
        _say(json.dumps(info, indent=1, default=str) if args.json else api.format_environment(info))
    elif args.cmd == "clean":
        _say(api.clean(cfg, all=args.all, versions_older_than=args.versions_older_than))
    elif args.cmd == "render":
        api.render(cfg, log=log.info)
    elif args.cmd == "analyze":
        rep = api.analyze(cfg, log=log.info, progress=not (args.no_progress or quiet),
                          executor=_executor(args, quiet))
        print(f"analyses: {len(rep.computed)} computed, {len(rep.reused)} reused ({rep.seconds:.1f}s)")
    elif args.cmd == "plan" or (args.cmd == "build" and args.plan):
        est = api.plan(cfg, gpu=args.gpu, gpu_flops=args.gpu_flops, gpus=1 if args.gpus is None else args.gpus)
        placed = api.placements(cfg)
        if placed:
            est = {**est, "device_map": placed}
        text = api.format_plan(est) + "".join(f"\ndevice map of {m} ({p['mode']}): {p['layers']}"
                                              for m, p in placed.items())
        _say(json.dumps(est, indent=1, default=str) if args.json else text)
    elif args.cmd == "build":
        api.build(cfg, log=log.info, progress=not (args.no_progress or quiet), out=_say,
                  executor=_executor(args, quiet))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
