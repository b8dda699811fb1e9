"""Analysis ``k21_frequency``: layer-averaged mixing ratios per token occurrence with its frequency rank.

Runs on **unmasked** inputs. When the mixing pass was unmasked already (causal models: mask rate 0)
it reuses that pass's ``k21_tokens`` instead of decomposing the set again (and is then one task).
Sharded by sequence ranges: each token occurrence's row depends on its own sequence only.
"""
from __future__ import annotations

import pandas as pd

from report_builder.analyses import inputs, k21_compute
from report_builder.analyses.base import Analysis, Run, Shard, Subject, Work


def _params(s: Subject) -> dict:
    return s.data_params()


def _reads_mixing(s: Subject) -> bool:
    """Whether the mixing pass was unmasked already (causal models: mask rate 0), so this analysis
    reuses its ``k21_tokens`` instead of decomposing the set again; only then does it read (and wait
    for) ``k21_mixing``."""
    return inputs.mask_rate(s) == 0


def _size(s: Subject) -> int:
    return 0 if _reads_mixing(s) else s.n_items


def _map(run: Run, lo: int, hi: int) -> dict[str, pd.DataFrame]:
    from report_builder.data.frequency import frequency_ranks

    s = run.subject
    lm = run.lm()
    enc = inputs.unmasked(run, hi)[lo:hi]
    if _reads_mixing(s):  # the mixing pass is this pass
        toks = run.result("k21_mixing")["k21_tokens"]
        if (lo, hi) != (0, s.n_items):
            toks = toks[(toks["seq"] >= lo) & (toks["seq"] < hi)]
    else:
        with run.progress("K21 frequency", len(enc)) as bar:
            toks = k21_compute.mixing_ratios(lm, enc, model=s.model.name, dataset=s.dataset.id,
                                             batch_size=ANALYSIS.work.batch(s.cfg.batch_size), budget_bytes=s.cfg.budget_bytes(),
                                             on_batch=bar)["k21_tokens"]
    ranks = frequency_ranks(lm.tokenizer)
    return {"k21_freq": k21_compute.frequency_table(toks, enc, ranks)}


def _reduce(s: Subject, partials: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    parts = sorted((p["k21_freq"] for p in partials), key=lambda f: int(f["seq"].min()))  # in sequence order
    return {"k21_freq": parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)}


SHARD = Shard(items=lambda s: s.n_items, map=_map, reduce=_reduce)


ANALYSIS = Analysis(id="k21_frequency", version=2, scope="dataset", inputs="unmasked", params=_params,
                    size=_size, compute=SHARD.whole, tables=("k21_freq",), needs=("k21_mixing",), shard=SHARD,
                    needs_if=_reads_mixing, work=Work("ratios", 4e-5, task_s=0.2, whole_set_rows=True,
                                                    rows=lambda t: {"k21_freq": t.tokens}, batch_divisor=1))
"""Host cost: the k21_tokens rows of its own pass and the layer-averaged k21_freq table, ~0.04 ms per
sequence and layer (``bench --k21-pass``; was 0.3 ms); the rank table per task (``task_s``)."""
