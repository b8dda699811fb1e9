"""The K24 statistics on the device (`analyses.k24_device`), run here on CPU tensors, against the host
statistics (`stats.host_stats.HostStats`): the same ranks bit for bit, the same rows and pairs, the
numbers within float rounding; through `scope_partials` and `scope_analyses` end to end."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from report_builder.analyses import k24_compute
from report_builder.analyses.k24_device import DeviceStats, centred_ranks
from report_builder.decompose.layer import LayerResult
from report_builder.engine import Batch, BatchOut
from report_builder.stats.ctx_change import _rank
from report_builder.stats.host_stats import HostStats
from tests.analyses.test_k24 import _seqs
from tests.tiny_models import tiny


def test_centred_ranks_are_the_host_ranks_bit_for_bit():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, (6, 40)).astype(np.float64)  # large tie groups
    x[1, [3, 17, 30]] = np.nan  # NaNs: after every number, each alone, in index order
    x[2] = rng.random(40)  # no ties
    valid = rng.random((6, 40)) < 0.7
    valid[3] = False
    valid[4, :1] = True
    valid[4, 1:] = False
    c, ss, count = centred_ranks(torch.from_numpy(x), torch.from_numpy(valid))
    for r in range(6):
        v = x[r][valid[r]]
        assert int(count[r]) == v.size
        if not v.size:
            assert float(ss[r]) == 0.0
            continue
        ref = _rank(v)
        ref = ref - ref.mean()
        got = c[r].numpy()[valid[r]]
        assert np.array_equal(got, ref) and float(ss[r]) == (ref * ref).sum()
        assert not c[r].numpy()[~valid[r]].any()


def _feed_both(lm, enc, include_special: bool, top_k: int = 5):
    """The deterministic path's results, fed once to `HostStats` and once, as one padded batch, to
    `DeviceStats.reduce` + `add`: the two statistics of the same maps."""
    from report_builder.engine import Tokens, decompose_sequences

    lay = lm.adapter.layout
    host = HostStats(lay, lm.causal, top_k=top_k, include_special=include_special, n_layers=lm.n_layers)
    dev = DeviceStats(lay, lm.causal, enc, top_k=top_k, include_special=include_special, n_layers=lm.n_layers)
    per_layer: dict[int, list[LayerResult]] = {}
    for k, layer, r in decompose_sequences(lm, [Tokens(e.input_ids, e.token_type_ids) for e in enc], maps=lay.scopes,
                                           extras=True, batched=False):
        host.add(enc[k], layer, {s: r.maps[s].numpy() for s in lay.scopes})
        per_layer.setdefault(layer, []).append(r)
    batch = Batch(list(range(len(enc))), [len(e) for e in enc], max(len(e) for e in enc))
    layers = {layer: dev.reduce(batch, layer, rs) for layer, rs in per_layer.items()}
    dev.add(BatchOut(batch, layers, [{} for _ in enc]))
    return host.tables(), dev.tables()


@pytest.mark.parametrize("family", ["bert", "llama"])
@pytest.mark.parametrize("include_special", [True, False])
def test_device_statistics_of_the_same_maps_equal_the_host_ones(family, include_special):
    lm = tiny(family)
    enc = _seqs(lm)
    host, dev = _feed_both(lm, enc, include_special)
    h, d = host["ctx_rows"].sort_values("seq", kind="mergesort", ignore_index=True), dev["ctx_rows"]
    pd.testing.assert_frame_equal(h, d)  # ranks exact: the changes bit for bit, nan where undefined
    pd.testing.assert_frame_equal(host["base_counts"], dev["base_counts"])
    ht, dt = host["top_pairs"], dev["top_pairs"]
    key = ["layer", "seq", "i", "j", "token_i", "token_j", "category", "context"]
    pd.testing.assert_frame_equal(ht[key], dt[key])
    for c in ("amp", "before", "after"):
        np.testing.assert_allclose(dt[c], ht[c], rtol=0, atol=1e-12)


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_scope_analyses_with_device_statistics_agree_with_the_host_tables(family):
    """End to end on the batched path (padded batches of 3): the k24 tables within 1e-6 of the CPU build's."""
    lm = tiny(family)
    enc = _seqs(lm)
    a = k24_compute.scope_analyses(lm, enc, model="m", dataset="d", top_k=5)
    b = k24_compute.scope_analyses(lm, enc, model="m", dataset="d", top_k=5, device_stats=True, batch_size=3)
    assert a.keys() == b.keys()
    for name in a:
        x, y = a[name], b[name]
        assert list(x.columns) == list(y.columns) and len(x) == len(y), name
        for c in x.columns:
            if x[c].dtype.kind == "f":
                np.testing.assert_allclose(y[c].to_numpy(), x[c].to_numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{name}.{c}")
            else:
                assert x[c].tolist() == y[c].tolist(), (name, c)
