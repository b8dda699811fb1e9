"""The build log's headline lines: the K21 and K24 numbers of a build, one line per model, and their memo.

`summary_lines` formats the numbers `headlines` computes (the same numbers as the site's pages);
`summary_memo` reuses them from ``<cache>/summary_lines.json`` while the tables they read are
unchanged, so a build from the cache needs no scipy. Pitfall: the memo's key must cover everything
the lines depend on — the tables they read (recorded while they are computed: contents and dtypes),
the models, the primary dataset and the code (`figure_cache.code_digest`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from report_builder.atomic import write_text
from report_builder.cache import frame_hash
from report_builder import atomic
from report_builder.errors import UnsafeOutput
from report_builder.schema import LAYOUTS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from report_builder.config import Config

MEMO = "summary_lines.json"


def summary_lines(tables: "dict[str, pd.DataFrame]", cfg: "Config") -> list[str]:
    """The K21 and K24 headline numbers of a build, one line per model (printed in the build log);
    the numbers come from `report_builder.stats.headlines`, as on the site's pages."""
    from report_builder.stats import headlines

    lines = []
    prim = cfg.datasets[0].id
    names = [mc.name for mc in cfg.models]
    lines.append(f"K21 summary on {prim}:")
    lines.append(f"  {'model':<16} {'ATTNRESLN-N mean %':>18} {'ATTN-N mean %':>14} {'rho(freq) ATTNRESLN-N':>22} {'expansion mean':>15}")
    for s in headlines.k21_summary(tables, names, prim):
        lines.append(f"  {s.model:<16} {s.attnresln_mean:>18.2f} {s.attn_mean:>14.2f} {s.rho_freq:>22.3f} {s.expansion_mean:>15.3f}")
    ctx = tables.get("k24_ctx")
    if ctx is not None and len(ctx):
        lines.append("K24 summary (layer-mean contextualization change 1-rho, over datasets):")
        for name in names:
            c = headlines.cancellation(tables, name)
            ff, whole = (c.ff, c.whole) if c is not None else (float("nan"), float("nan"))
            lay = c.layout if c is not None else LAYOUTS[0]
            lines.append(f"  {name:<16} through FF {ff:.3f}   through {'+'.join(lay.components)} "  # the model's own
                         f"(whole layer from ATB) {whole:.3f}")  # blocks: post-LN FF+RES+LN, parallel FF alone
    return lines


def summary_memo(cfg: "Config", tables: "dict[str, pd.DataFrame]", hashes: dict[str, str]) -> list[str]:
    """`summary_lines`, reused from ``<cache>/summary_lines.json`` while the tables they read (recorded
    as they are computed: contents and dtypes), the models, the primary dataset and the package's
    code are unchanged (a build from the cache then needs no scipy).

    Args:
        hashes: `cache.frame_hash` of the tables already known (the build record's); others are hashed here.
    """
    from report_builder.site.figure_cache import ALL, ReadTracker, code_digest

    path = Path(cfg.cache_dir) / MEMO

    def key(reads) -> str:
        names = sorted(tables) if reads == ALL else list(reads)
        parts = [code_digest(), cfg.datasets[0].id, [mc.name for mc in cfg.models], reads == ALL,
                 {n: [hashes.get(n) or (frame_hash(tables[n]) if n in tables else None),
                      [repr(t) for t in tables[n].dtypes] if n in tables else None] for n in names}]
        return hashlib.sha256(json.dumps(parts, default=repr).encode("utf-8")).hexdigest()

    try:
        base = Path(path).parent.resolve()  # read back from the cache: no link, no FIFO
        memo = json.loads(atomic.read_inside(base, base / Path(path).name, 1 << 24))
        if memo.get("key") == key(memo["reads"]) and all(isinstance(x, str) for x in memo["lines"]):
            return list(memo["lines"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, UnsafeOutput):
        pass
    tracker = ReadTracker(tables)
    lines = summary_lines(tracker, cfg)
    reads = tracker.reads()
    try:
        write_text(path, json.dumps({"key": key(reads), "reads": reads, "lines": lines}))
    except OSError:  # a memo that cannot be written only costs time
        pass
    return lines
