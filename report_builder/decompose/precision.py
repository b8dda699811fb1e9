"""The decomposition's pair GEMM in a precision mode (`schema.PRECISIONS`): the second FF matmul over the
token pairs, ``h (P, d') @ W2 (d', d)`` with float32 output, its inputs in float32, TF32, bfloat16 or
float16 and the products accumulated in float32.

On CUDA the reduced modes run on tensor cores: TF32 through torch's float32 matmul precision (``high``,
set around the one call), bfloat16/float16 inputs with a float32 output (``out_dtype``; where this torch
lacks it, the 16-bit output is widened, one more rounding). On a CPU the same arithmetic is emulated:
TF32 by rounding both inputs to 10 explicit mantissa bits (round to nearest, ties to even), 16-bit
inputs widened exactly to float32; products and sums then run in float32 (for correctness tests: no
mode is faster than float32 on a CPU).

Pitfall: the mode applies to this GEMM only; everything else stays float32, so a mode's error comes from
rounding this GEMM's two inputs (the bound's derivation, `schema.Precision.bound`).
"""
from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from report_builder.schema import precision as _mode

HALF = {"bfloat16": torch.bfloat16, "float16": torch.float16}
"""Modes whose GEMM inputs are stored in a 16-bit format (the hidden terms are written in it directly)."""


def input_dtype(mode: str) -> torch.dtype:
    """The dtype the hidden terms are stored in for ``mode`` (float32 for float32 and TF32)."""
    _mode(mode)
    return HALF.get(mode, torch.float32)


def round_tf32(t: Tensor) -> Tensor:
    """``t`` (float32) rounded to TF32's 10 explicit mantissa bits, round to nearest, ties to even (the
    CPU emulation of a TF32 tensor-core input). Infinities and NaNs are kept."""
    bits = t.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    out = ((bits + 0xFFF + lsb) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(t), out, t)


@contextlib.contextmanager
def _tf32():
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(prev)


_OUT_DTYPE: dict[str, bool] = {}


def pair_mm(h: Tensor, w: Tensor, mode: str) -> Tensor:
    """``h @ w`` as float32 in ``mode``: ``h`` (P, d') in `input_dtype` (a strided 2-D view is fine),
    ``w`` (d', d) in the same dtype. Returns (P, d) float32."""
    if mode == "float32":
        return torch.mm(h, w)
    if mode == "tf32":
        if h.device.type == "cuda":
            with _tf32():
                return torch.mm(h, w)
        return torch.mm(round_tf32(h), round_tf32(w))
    if h.device.type != "cuda":
        return torch.mm(h.float(), w.float())  # exact products of 16-bit inputs, float32 sums
    key = str(h.device)
    if _OUT_DTYPE.get(key, True):
        try:
            out = torch.mm(h, w, out_dtype=torch.float32)
            _OUT_DTYPE[key] = True
            return out
        except (TypeError, RuntimeError, NotImplementedError):
            _OUT_DTYPE[key] = False
    return torch.mm(h, w).float()
