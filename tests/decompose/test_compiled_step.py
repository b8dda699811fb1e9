"""No host synchronisation inside a layer (issue #29): each layer step the engine runs by the GPU rule (forced on
the CPU) traces as ONE graph with `torch.compile(..., backend="eager", fullgraph=True)` — fullgraph fails on any
graph break, and a host read (``.item()``, ``bool(tensor)``, ``.tolist()``, a branch on a tensor's value, a read
of the free memory) is one — and the traced step gives the eager step's numbers.

The steps: the K21 ratios, the FF decomposition of an encoder (post-LN) and of a causal model (pre-LN, gated:
row blocks over source prefixes), and the full layer (every scope's map, the K21 maps and ratios, the extras,
and the reconstruction check, whose errors stay on the device until `DeviceCheck.read`), on equal-length and
ragged batches; also the full layer of a parallel-attention model (GPT-NeoX) and of a sandwich-norm model with
a GeGLU (Gemma-3), whose layouts run one sequence at a time (their sequences' checks gathered, not read one by
one; the GeGLU's quadrature constants made in the graph). The budget is sized once, outside the step (`gpu_budget`), as the engine does.
"""
from __future__ import annotations

import pytest
import torch

from report_builder.bench.shapes import capture_layers
from report_builder.decompose.layouts import batch_step, gpu_budget
from report_builder.decompose.layouts.common import read_checks
from report_builder.schema import K21_METHODS
from tests.tiny_models import tiny

STEPS = {  # name -> (tiny family, what the step computes)
    "k21_ratios": ("bert", "ratios"),
    "encoder_ff": ("bert", "ff"),
    "causal_ff": ("llama", "ff"),
    "full_layer": ("bert", "full"),
    "causal_full_layer": ("llama", "full"),
    "parallel_full_layer": ("neox", "full"),  # layouts without a batched path: one sequence at a time
    "sandwich_full_layer": ("gemma3", "full"),  # and a GeGLU: the gated integrals' quadrature ladder
}


def _capture(lm, lengths: list[int]):
    n = max(lengths)
    ids = torch.tensor([[5 + (3 * b + k) % 90 for k in range(n)] for b in range(len(lengths))])
    mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).long()
    return capture_layers(lm, {"input_ids": ids, "attention_mask": mask}, [1])[0]


def _flat(out) -> list[torch.Tensor]:
    results, _ = out
    return [getattr(r, part)[k] for r in results for part in ("maps", "ratios", "sums", "bias", "extras")
            for k in sorted(getattr(r, part))]


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")  # per-shape memos, traced
@pytest.mark.parametrize("step, lengths", [(s, [12, 12]) for s in STEPS] + [  # ragged: blocks per sequence
    (s, [12, 7]) for s in ("causal_ff", "full_layer", "parallel_full_layer")])
def test_the_layer_step_traces_as_one_graph_and_gives_the_eager_numbers(step, lengths):
    family, what = STEPS[step]
    lm = tiny(family)
    lw = lm.layer_weights(1)
    cap = _capture(lm, lengths)
    opts = {"ratios": dict(ratios=True), "ff": dict(maps=(lw.layout.ff_after,)),
            "full": dict(maps=lw.scopes + K21_METHODS, ratios=True, extras=True, refs=cap.refs)}[what]
    budget = gpu_budget(cap.x.device, 64 << 20)  # sized once, outside the step

    def layer():
        return batch_step(lw, cap.x, cap.alpha, lengths, causal=lm.causal, chunk_rule="gpu", budget_bytes=budget,
                          **opts)

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            eager = layer()
            traced = torch.compile(layer, backend="eager", fullgraph=True)()  # raises on any graph break
    finally:
        torch._dynamo.reset()
    want, got = _flat(eager), _flat(traced)
    assert len(want) == len(got) and len(got) > 0
    for a, b in zip(want, got):  # (a parallel layout's FF-scope maps are NaN by design: NaN where eager is)
        a, b = a.float(), b.float()
        assert a.shape == b.shape and torch.equal(a.isnan(), b.isnan())
        a, b = a.nan_to_num(), b.nan_to_num()
        assert float((a - b).abs().max()) <= 1e-6 * max(1.0, float(a.abs().max()))
    if what == "full":  # the check: on the device inside the step, read once afterwards
        assert all(not r.errors for r in traced[0])
        read_checks([eager, traced])
        for r, e in zip(traced[0], eager[0]):
            assert set(r.errors) == set(lw.checks) and r.errors == e.errors and max(r.errors.values()) <= 1e-5
