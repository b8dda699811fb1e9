"""Precision modes of the pair GEMM (`schema.PRECISIONS`): each mode's errors stay within its declared bound
on every family (bfloat16 and float16 computed on the CPU, TF32 emulated by rounding the GEMM inputs to
10 mantissa bits), the bound is what a build enforces, and a mode that cannot pay on a CPU is refused."""
from __future__ import annotations

import pytest
import torch

from report_builder import config, schema
from report_builder.decompose.layouts import decompose_batch
from report_builder.decompose.precision import pair_mm, round_tf32
from report_builder.engine import Tokens, decompose_sequences
from report_builder.errors import ConfigError
from tests.decompose.test_chunk_rules import _captures
from tests.tiny_models import TINY, tiny

REDUCED = ("tf32", "bfloat16", "float16")


def test_each_mode_declares_one_bound_from_its_roundoff():
    assert schema.PRECISIONS["float32"].bound == schema.ERROR_BOUND == 1e-4
    for m in REDUCED:
        p = schema.precision(m)
        assert p.bound == 16 * p.unit_roundoff and p.tensor_cores
    assert schema.precision("tf32").unit_roundoff == 2.0 ** -11 and schema.precision("bfloat16").unit_roundoff == 2.0 ** -8
    with pytest.raises(KeyError, match="float32, tf32"):
        schema.precision("float8")


def test_tf32_emulation_rounds_to_ten_mantissa_bits():
    x = torch.tensor([1.0, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 1.0 + 2 ** -12, -3.0 - 2 ** -9, -3.0 - 2 ** -10,
                      float("inf"), float("nan")])
    r = round_tf32(x)
    assert r[:6].tolist() == [1.0, 1.0, 1.0 + 2 ** -9, 1.0, -3.0 - 2 ** -9, -3.0]  # ties to even
    assert r[6] == float("inf") and torch.isnan(r[7])
    y = torch.randn(1000)
    bits = round_tf32(y).view(torch.int32)
    assert bool((bits & 0x1FFF == 0).all()) and float(((round_tf32(y) - y).abs() / y.abs()).max()) <= 2 ** -11


def test_pair_mm_in_each_mode_is_float32_out_and_within_roundoff():
    g = torch.Generator().manual_seed(0)
    h, w = torch.randn(64, 96, generator=g), torch.randn(96, 32, generator=g)
    ref = (h.double() @ w.double()).float()
    for m in ("float32",) + REDUCED:
        dt = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(m, torch.float32)
        out = pair_mm(h.to(dt), w.to(dt), m)
        assert out.dtype == torch.float32
        rel = float((out - ref).norm() / ref.norm())
        assert rel <= 4 * schema.precision(m).unit_roundoff + 1e-6, (m, rel)


@pytest.mark.parametrize("family", tuple(TINY))
def test_every_mode_within_its_bound(family):
    lm = tiny(family)
    cap = _captures(lm, [16, 11])[1]
    lw = lm.layer_weights(1)
    kw = dict(maps=lw.scopes, refs=cap.refs, causal=lm.causal)
    ref = decompose_batch(lw, cap.x, cap.alpha, [16, 11], chunk_rule="cpu", **kw)
    for m in REDUCED:
        bound = schema.precision(m).bound
        got = decompose_batch(lw, cap.x, cap.alpha, [16, 11], precision=m, **kw)  # auto: the GPU rule's step
        for r, g in zip(ref, got):
            assert max(g.errors.values()) <= bound, (family, m, g.errors)
            for k in r.maps:
                if torch.isnan(r.maps[k]).all():
                    continue
                d = float((r.maps[k] - g.maps[k]).abs().max() / r.maps[k].abs().max().clamp_min(1e-30))
                assert d <= bound, (family, m, k, d)


def test_the_engine_enforces_the_modes_bound():
    lm = tiny("llama")
    seqs = [Tokens(list(range(5, 21)))]
    lm.precision = "bfloat16"
    try:
        out = list(decompose_sequences(lm, seqs, maps=("ATBLNFF",)))  # bfloat16's errors exceed 1e-4, not its bound
        worst = max(max(r.errors.values()) for _, _, r in out)
        assert schema.ERROR_BOUND < worst <= schema.precision("bfloat16").bound
    finally:
        lm.precision = "float32"


def test_a_mode_that_cannot_pay_on_a_cpu_is_refused():
    cfg = config.load_config(preset="smoke")
    for m in REDUCED:
        with pytest.raises(ConfigError, match=f"^dtype: {m} is not faster than float32 on a CPU"):
            config.replace(cfg, dtype=m)
        assert config.replace(cfg, dtype=m, device="cuda").dtype == m
    with pytest.raises(ConfigError, match="chunk_rule"):
        config.replace(cfg, dtype="tf32", device="cuda", chunk_rule="cpu")
    with pytest.raises(ConfigError, match="chunk_rule: 'fast' is not one of auto, cpu, gpu"):
        config.replace(cfg, chunk_rule="fast")


def test_check_takes_a_mode_and_a_rule_and_uses_the_modes_bound(tmp_path, capsys):
    """`check --dtype bfloat16 --chunk-rule gpu` on a CPU: a correctness check (the bfloat16 bound, exit 0),
    where a float32 bound would have failed."""
    import json

    from report_builder import cli
    from tests.tiny_models import save_tiny

    path = save_tiny("llama", tmp_path / "m")
    assert cli.main(["check", "--model", str(path), "--dtype", "bfloat16", "--chunk-rule", "gpu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bound"] == schema.precision("bfloat16").bound and out["ok"] is True
    assert schema.ERROR_BOUND < out["max_rel_error"] <= out["bound"]


def test_cache_key_names_a_rule_or_mode_only_off_the_default():
    from report_builder.analyses.base import Subject

    cfg = config.load_config(preset="smoke")
    m = cfg.models[0]
    key = lambda c: Subject(c, m, "f", False).base_params()  # noqa: E731
    assert key(cfg) == key(config.replace(cfg, chunk_rule="cpu")) == {"model": m.name, "fingerprint": "f",
                                                                       "dtype": "float32"}
    assert key(config.replace(cfg, chunk_rule="gpu"))["chunk_rule"] == "gpu"
    gpu = config.replace(cfg, device="cuda")
    assert "chunk_rule" not in key(gpu) and "chunk_rule" not in key(config.replace(gpu, chunk_rule="gpu"))
    assert key(config.replace(gpu, chunk_rule="cpu"))["chunk_rule"] == "cpu"
    assert key(config.replace(gpu, dtype="tf32"))["precision_bound"] == schema.precision("tf32").bound
