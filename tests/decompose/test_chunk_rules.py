"""The device-class chunk rules (`decompose.chunks`): the GPU rule forced on CPU agrees with the CPU rule for
every layout and scope, issues few ops per layer whatever n and the batch, reads nothing on the host
mid-layer, and its plan covers every pair once within the budget."""
from __future__ import annotations

import pytest
import torch

from report_builder.bench.ops import count_ops
from report_builder.bench.shapes import capture_layers
from report_builder.decompose import chunks
from report_builder.decompose.feedforward import _gated_closed, _gated_ladder, activation, IGOptions
from report_builder.decompose.layouts import decompose_batch, decompose_layer
from report_builder.schema import K21_METHODS
from tests.tiny_models import TINY, tiny

FAMILIES = tuple(TINY)


def _captures(lm, lengths: list[int]):
    """Both layers' captures of a right-padded batch of ``lengths``."""
    n = max(lengths)
    ids = torch.tensor([[5 + (3 * b + k) % 90 for k in range(n)] for b in range(len(lengths))])
    mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).long()
    return capture_layers(lm, {"input_ids": ids, "attention_mask": mask}, [0, 1])


def _close(a, b, what):
    for k in a:
        x, y = a[k].float(), b[k].float()
        if torch.isnan(x).all():
            assert torch.isnan(y).all(), what + k
            continue
        scale = x.abs().max().clamp_min(1e-30)
        assert float((x - y).abs().max() / scale) <= 1e-6, (what, k, float((x - y).abs().max() / scale))


@pytest.mark.parametrize("family", FAMILIES)
def test_gpu_rule_agrees_with_cpu_rule(family):
    """Every layout and scope (tiny model per family): maps, sums, bias terms, extras and errors within 1e-6,
    for an equal-length batch (one block), a ragged one (per sequence) and forced small blocks and budget."""
    lm = tiny(family)
    for lengths in ([14, 14], [16, 9]):
        for layer, cap in enumerate(_captures(lm, lengths)[1:], start=1):
            lw = lm.layer_weights(layer)
            kw = dict(maps=lw.scopes + K21_METHODS, ratios=True, refs=cap.refs, extras=True, causal=lm.causal)
            ref = decompose_batch(lw, cap.x, cap.alpha, lengths, chunk_rule="cpu", **kw)
            for extra in ({}, {"chunk_rows": 4, "budget_bytes": 20_000}):
                got = decompose_batch(lw, cap.x, cap.alpha, lengths, chunk_rule="gpu", **extra, **kw)
                for r, g in zip(ref, got):
                    for part in ("maps", "sums", "bias", "extras", "ratios"):
                        assert set(getattr(r, part)) == set(getattr(g, part)), (family, part)
                        _close(getattr(r, part), getattr(g, part), f"{family} {part} {extra} ")
                    assert set(r.errors) == set(g.errors) and max(g.errors.values()) <= 1e-5


def test_cpu_rule_ignores_the_new_arguments():
    """The CPU rule with every new argument spelled out gives the old call's bytes."""
    for family in ("bert", "llama"):
        lm = tiny(family)
        cap = _captures(lm, [12])[0]
        lw = lm.layer_weights(0)
        a = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, ratios=True, extras=True)
        b = decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, ratios=True, extras=True, chunk_rule="cpu",
                            precision="float32", causal=lm.causal, budget_bytes=512 << 20)
        for k in a.maps:
            assert torch.equal(a.maps[k], b.maps[k])
        for k in a.sums:
            assert torch.equal(a.sums[k], b.sums[k])


def test_rule_classes():
    assert chunks.rule_class("auto", "cpu") == "cpu" and chunks.rule_class("auto", "cuda") == "gpu"
    assert chunks.rule_class("gpu", "cpu") == "gpu" and chunks.rule_class("cpu", "cuda") == "cpu"
    assert chunks.rule_class("auto", "cpu", "bfloat16") == "gpu"
    with pytest.raises(ValueError, match="GPU rule"):
        chunks.rule_class("cpu", "cuda", "tf32")
    with pytest.raises(ValueError, match="auto, cpu, gpu"):
        chunks.rule_class("fast", "cpu")


@pytest.mark.parametrize("n,causal,lengths", [(128, False, None), (128, True, None), (4096, True, None),
                                              (20, False, [20, 8, 12, 9]), (40, True, [40, 12])])
def test_gpu_plan_covers_every_pair_once(n, causal, lengths):
    budget = 1 << 40
    B = len(lengths) if lengths else 8
    plan = chunks.gpu_plan(n, 768, 3072, budget_bytes=budget, batch=B, causal=causal, lengths=lengths)
    lens = lengths or [n] * B
    cover = {}
    for seq, a, b, src in plan.blocks:
        for s in (range(B) if seq < 0 else [seq]):
            for i in range(a, b):
                cover[(s, i)] = cover.get((s, i), 0) + 1
                assert src >= (i + 1 if causal else lens[s])  # every needed source
    assert all(cover.get((s, i)) == 1 for s in range(B) for i in range(lens[s]))
    per = chunks.ff_pair_bytes(768, 3072, False)
    assert all(plan.group_pairs(g) * per <= chunks.GPU_BUFFER_BYTES for g in range(len(plan.groups)))
    if causal and lengths is None and n >= 64:  # within 90 % of the minimal pairs, few blocks and buffers
        assert chunks.pair_count(n, True) * B >= chunks.CAUSAL_EFFICIENCY * plan.pairs
        spans = len(chunks._causal_blocks(n))
        assert plan.pairs * per >= 0.9 * (len(plan.groups) - spans) * chunks.GPU_BUFFER_BYTES  # buffers ~full
        if plan.pairs * per <= chunks.GPU_BUFFER_BYTES:
            assert len(plan.blocks) <= 12
    if not causal and lengths is None:
        assert len(plan.blocks) == 1 and len(plan.groups) == 1  # the whole batch in one GEMM
    if lengths == [20, 8, 12, 9]:
        assert all(seq >= 0 for seq, *_ in plan.blocks)  # ragged: no pad pairs


def test_gpu_plan_buffers_fit_the_budget():
    per = chunks.ff_pair_bytes(768, 3072, False)
    for budget in (per * 1000, per * 5000, 64 << 20):
        plan = chunks.gpu_plan(512, 768, 3072, budget_bytes=budget, batch=2, causal=True)
        for g in range(len(plan.groups)):
            assert plan.group_pairs(g) * per <= budget or plan.groups[g][1] - plan.groups[g][0] == 1
        assert plan.pairs >= 2 * chunks.pair_count(512, True)


def _bert_like(layers: int = 1):
    from transformers import BertConfig, BertModel

    from report_builder.models.loading import from_model

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=200, hidden_size=96, num_hidden_layers=layers, num_attention_heads=12,
                     intermediate_size=384, max_position_embeddings=256, attn_implementation="eager")
    return from_model(BertModel(cfg, add_pooling_layer=False).eval(), None, name="bert-like")


def test_ff_decomposition_issues_few_ops_per_layer():
    """BERT-base's layout and heads (d and d' smaller: the count does not depend on them), a batch: the FF
    decomposition by the GPU rule issues <= 100 torch ops (a kernel each on a GPU), for any n and batch."""
    lm = _bert_like()
    counts = set()
    for n, B in ((128, 8), (64, 2), (96, 4)):
        ids = torch.randint(100, 200, (B, n), generator=torch.Generator().manual_seed(n))
        cap = capture_layers(lm, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, [0])[0]
        lw = lm.layer_weights(0)

        def ff():
            return decompose_batch(lw, cap.x, cap.alpha, [n] * B, maps=(lw.layout.ff_after,), chunk_rule="gpu",
                                   causal=False)
        ff()  # the map index is built once per shape
        counts.add(count_ops(ff)["ops"])
    assert len(counts) == 1 and counts.pop() <= 100, counts


def test_gpu_rule_reads_nothing_on_the_host_mid_layer(monkeypatch):
    """No .item(), bool(), float() or tolist() inside a layer: the errors and the causality check are read
    once, at its end (one tolist)."""
    calls = {"item": 0, "__bool__": 0, "__float__": 0, "__int__": 0, "tolist": 0}
    for name in calls:
        orig = getattr(torch.Tensor, name)

        def wrap(self, *a, _orig=orig, _name=name, **k):
            calls[_name] += 1
            return _orig(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, wrap)
    for family in ("bert", "llama", "qwen3"):
        lm = tiny(family)
        cap = _captures(lm, [16, 16])[1]
        lw = lm.layer_weights(1)
        for k in calls:
            calls[k] = 0
        decompose_batch(lw, cap.x, cap.alpha, [16, 16], maps=lw.scopes + K21_METHODS, ratios=True, refs=cap.refs,
                        extras=True, chunk_rule="gpu", causal=lm.causal)
        assert calls == {"item": 0, "__bool__": 0, "__float__": 0, "__int__": 0, "tolist": 1}, (family, calls)


@pytest.mark.parametrize("family", ["bert", "llama", "gemma3"])
def test_gpu_rule_makes_no_tensor_from_host_data_mid_layer(family):
    """After a layer's first call, the GPU rule builds no tensor from Python or NumPy data inside a layer (on
    a GPU each would be a copy from pageable host memory, which waits for the device): the gated integrals'
    constants (SiLU's closed form, the ladder's nodes) are made once per device."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Made(TorchDispatchMode):
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "lift_fresh" in str(func):
                Made.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    lm = tiny(family)
    cap = _captures(lm, [12, 12])[0]
    lw = lm.layer_weights(0)

    def layer():
        return decompose_batch(lw, cap.x, cap.alpha, [12, 12], maps=lw.scopes + K21_METHODS, ratios=True,
                               refs=cap.refs, extras=True, chunk_rule="gpu", causal=lm.causal)
    layer()
    with Made():
        layer()
    assert Made.ops == [], (family, Made.ops)


def test_gpu_rule_refuses_a_non_causal_alpha_given_as_causal():
    """``causal=True`` on bidirectional probabilities: refused when the errors are read (refs given); a
    caller that checks its own errors (the engine's batched path) sees the FF sums miss the pairs above the
    diagonal (and ATTN's past one attention block)."""
    lm = tiny("bert")
    cap = _captures(lm, [10, 10])[0]
    lw = lm.layer_weights(0)
    with pytest.raises(ValueError, match="not causal"):
        decompose_batch(lw, cap.x, cap.alpha, [10, 10], maps=lw.scopes, chunk_rule="gpu", causal=True, refs=cap.refs)
    with pytest.raises(ValueError, match="not causal"):  # one sequence: checked at the end of its layer
        decompose_layer(lw, cap.x[0], cap.alpha[0], maps=lw.scopes, chunk_rule="gpu", causal=True)
    r = decompose_batch(lw, cap.x, cap.alpha, [10, 10], maps=lw.scopes, chunk_rule="gpu", causal=True)[0]
    assert float((r.sums["ATBFF"] - cap.refs["ATBFF"][0]).norm() / cap.refs["ATBFF"][0].norm()) > 1e-2


@pytest.mark.parametrize("act", ["silu", "gelu", "gelu_new", "relu"])
def test_sync_free_quadrature_equals_the_adaptive_rule(act):
    a = torch.cat([torch.logspace(-5, 3, 400), -torch.logspace(-5, 3, 400), torch.zeros(2), torch.randn(500) * 8])
    b = torch.randn_like(a)
    f = activation(act)
    ref1, ref2 = _gated_closed(f, a.float(), b.float(), IGOptions(), torch.float64)
    got1, got2 = _gated_ladder(f, a.double(), b.double(), IGOptions(), max_numbers=4000)  # several steps
    for r, g in ((ref1, got1), (ref2, got2)):
        assert float(((r - g).abs() / (r.abs() + 1e-3)).max()) <= 1e-9
