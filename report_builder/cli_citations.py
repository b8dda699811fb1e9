"""The citation commands of the command line: ``reproduce``, ``diff`` and ``cite`` (argument parsing and
printing only, over `report_builder.api`; `cli` adds them to its parser and dispatches to them).

Exit codes (`errors.EXIT_CODES`): ``reproduce`` 0 identical or equal within the published precision, 6
differs, 7 the folder or its recipe altered, 4 a model, 3 a dataset; ``cite`` 2 for an unknown id or
version; ``diff`` 0 (what differs is printed, and a site's figures that cannot be compared, with why), 2 for
two versions of different figures or a version that cannot be read. Pitfall: every value printed may come from a downloaded
folder: results go through `errors.for_terminal`.
"""
from __future__ import annotations

import json
from typing import Callable

from report_builder import api
from report_builder.errors import for_terminal
from report_builder.logsetup import log
from report_builder.schema import CHUNK_RULES


def _say(text: object) -> None:
    print(for_terminal(text, newlines=True))


def add_commands(sub, common, make: Callable) -> None:
    """Add ``reproduce``, ``diff`` and ``cite`` to the subcommands ``sub`` (``make``: `cli._sub`)."""
    p = make(sub, "reproduce", "verify a figure version folder, rebuild it from its provenance and compare",
             "PATH is a version folder (figures/<id>/<hash>/) or its provenance.json, from a site or downloaded. "
             "The folder's own files are checked first against the recipe that names them; then the models "
             "(checked by weights fingerprint) and datasets (checked by hash) the recipe names are used and only "
             "the analyses the figure needs run. Exit 0 identical or equal within the published precision's "
             "tolerance (what differs is named), 6 differs (what and where), 7 the folder or its recipe was "
             "altered (it is not the figure its recipe names), 4 a model is missing or has other weights, 3 a "
             "dataset is missing or differs.", common)
    p.add_argument("path", metavar="PATH", help="a figure version folder or its provenance.json")
    p.add_argument("--cache", dest="cache_dir", metavar="DIR",
                   help="results cache to compute into (default: <user cache>/reproduce)")
    p.add_argument("--model", action="append", metavar="NAME=SOURCE",
                   help="where the recipe's model NAME is here (a local folder, embedded name or hub id); "
                        "its weights fingerprint is checked; repeatable")
    p.add_argument("--data", action="append", metavar="ID=PATH",
                   help="where the recipe's dataset ID is here (a user's own file); its hash is checked; repeatable")
    p.add_argument("--device", help="run on this device instead of the recorded one (cpu, cuda)")
    p.add_argument("--chunk-rule", dest="chunk_rule", choices=CHUNK_RULES,
                   help="run with this FF chunk rule instead of the recorded one (a figure of another device "
                        "class reproduces within the published precision)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="one JSON object with every field instead of one line")
    p = make(sub, "diff", "what changed between two figure versions, two provenance files or two sites",
             "The inputs that differ (weights, data, parameters, code, libraries, device) and the numeric change "
             "of the data: the largest absolute and relative difference and where; identical only when the "
             "files themselves give the same content hash. Two sites: a figure that cannot be read on one side is "
             "named as not comparable, with why, and the others are compared (exit 0). Exit 2 for two versions of "
             "different figures or a version that cannot be read.", common)
    p.add_argument("old", metavar="OLD", help="a version folder, a provenance.json or a built site")
    p.add_argument("new", metavar="NEW", help="the same kind of path as OLD")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p = make(sub, "cite", "print the BibTeX of a figure version",
             "From a built site (--dir): the figure's current version, or the version HASH; its url is the "
             "version's absolute address whenever the site has a site_url. A damaged figures/versions.json is "
             "recovered from as a build does (the version folders that verify; one warning line). Exit 2 for an "
             "unknown id (with the closest ids), a version the site does not hold, or one whose files were "
             "changed after it was published.", common)
    p.add_argument("id", metavar="ID", help="a figure id (`report-builder list figures`)")
    p.add_argument("hash", metavar="HASH", nargs="?", help="a version's content hash (default: the current version)")
    p.add_argument("--dir", default="site", help="the built site folder (default site)")
    p.add_argument("--json", action="store_true", help="one JSON object (figure, hash, current, url, bibtex)")


def dispatch(args) -> int | None:
    """Run ``reproduce``, ``diff`` or ``cite`` and return the exit code; None for any other command."""
    if args.cmd == "reproduce":
        quiet = getattr(args, "quiet", False)
        res = api.reproduce(args.path, cache_dir=args.cache_dir, models=args.model, data=args.data,
                            device=args.device, chunk_rule=args.chunk_rule, log=log.info,
                            progress=not (args.no_progress or quiet))
        if args.json:
            print(json.dumps(res.to_dict(), indent=1, default=str))
        elif res.status in ("identical", "within", "different"):
            _say(res.line())
        if res.status not in ("identical", "within", "different"):
            log.error(res.line())
        return res.exit_code
    if args.cmd == "cite":
        c = api.cite(args.id, args.hash, site_dir=args.dir)
        _say(json.dumps(c.to_dict(), indent=1) if args.json else c.bibtex.rstrip("\n"))
        return 0
    if args.cmd == "diff":
        res = api.diff(args.old, args.new)
        _say(json.dumps(res, indent=1, default=str) if args.json else api.format_diff(res))
        return 0
    return None
