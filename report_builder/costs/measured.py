"""GPU factors measured by the GPU check (``tests/tools/gpu_check.sh``), kept dated in `DIR`
(``report_builder/costs/measured/``): a plan for that GPU (``plan --gpu H200``, or ``--device cuda`` on
it) prices its tasks from the newest run there and says "measured on <date>"; any other GPU stays an
estimate (datasheet peak x an assumed matmul efficiency, the CPU-fitted factors).

A file is the check's JSON as written (``schema`` `SCHEMA`). To use a new run, copy its
``gpu-check.json`` into `DIR` as ``<gpu>-<date>.json`` (``h200-2026-12-05.json``), or run
``python -m report_builder.costs.measured gpu-check.json``, which checks it and copies it there under
that name. The newest ``table.date`` whose ``table.device`` names the GPU wins.

What a file gives (`Measured`, all from its ``table``):

- ``rates``: the matmul FLOP/s the bench measured beside the FF step, per precision (``matmul_tflops``);
- ``efficiency``: each kind of work's FLOP rate as a fraction of that matmul, per precision
  (``precision.<mode>.efficiency``: ``bench`` at BERT-base n = 128, batch 8);
- ``overhead``: a fixed time per (sequence, layer) of the ``full`` and ``ratios`` kinds, the part of the
  K24 and K21 paper passes (``k24_pass``, ``k21_pass``: the forward pass, the decomposition, the
  transfers and the statistics, which those passes include) that their FLOPs at those efficiencies do not
  explain (at least 0); so the host statistics of those kinds are not added again (``host_included``).

Pitfall: a run records the engine that ran; after a change to the engine, its factors describe the old
code until the check is run again (the file says which commit it measured).
"""
from __future__ import annotations

import json
import math
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = "report_builder gpu-check 1"
DIR = Path(__file__).resolve().parent / "measured"
KINDS = ("forward", "ratios", "maps", "full")
PRECISIONS = {"fp32": "float32", "tf32": "tf32", "bf16": "bfloat16"}
"""`devices.precision_of` names -> the check's precision modes."""


@dataclass(frozen=True)
class Measured:
    """One GPU check's factors (see the module docstring)."""

    device: str
    date: str
    path: str
    torch: str = ""
    commit: str = ""
    source: str = ""
    rates: dict = field(default_factory=dict)  # precision (fp32/tf32/bf16) -> matmul FLOP/s
    efficiency: dict = field(default_factory=dict)  # precision -> kind -> fraction of that matmul
    overhead: dict = field(default_factory=dict)  # kind -> seconds per (sequence, layer)

    def factors(self, precision: str) -> tuple[dict, dict] | None:
        """(efficiency per kind, fixed seconds per (sequence, layer) per kind) for ``precision``, or None when
        this run did not measure it."""
        eff = self.efficiency.get(precision)
        if not eff or not self.rates.get(precision):
            return None
        return dict(eff), dict(self.overhead)

    def label(self) -> str:
        """``measured on <date> (<device>, torch <v>, commit <c>; <file>)``."""
        what = ", ".join(x for x in (self.device, f"torch {self.torch}" if self.torch else "",
                                     f"commit {self.commit[:7]}" if self.commit else "") if x)
        return f"measured on {self.date} ({what}; {Path(self.path).name})"


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 else None


def load(path: str | Path) -> Measured:
    """A measured file -> `Measured`; ValueError (one line) when it is not a GPU check's JSON with a device
    and a date, or holds no positive finite rate."""
    from report_builder.costs.flops import Shape, forward_flops, work_flops
    from report_builder import schema

    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{p.name}: not readable as JSON ({e})") from None
    t = doc.get("table") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(t, dict):
        raise ValueError(f"{p.name}: not a GPU check's JSON (schema {SCHEMA!r})")
    device, date = t.get("device"), t.get("date") or doc.get("date")
    if not isinstance(device, str) or not device or not isinstance(date, str) or not date:
        raise ValueError(f"{p.name}: no device or date in its table")
    date = date[:10]  # the day (an ISO time stamp's date part): what a plan names
    rates, eff = {}, {}
    for prec, mode in PRECISIONS.items():
        r = _num((t.get("matmul_tflops") or {}).get(mode))
        if r:
            rates[prec] = r * 1e12
        e = ((t.get("precision") or {}).get(mode) or {}).get("efficiency") or {}
        if all(_num(e.get(k)) for k in KINDS):
            eff[prec] = {k: float(e[k]) for k in KINDS}
    if not rates:
        raise ValueError(f"{p.name}: no measured matmul rate (table.matmul_tflops)")
    overhead = {}
    if "fp32" in rates and "fp32" in eff:
        for kind, key in (("full", "k24_pass"), ("ratios", "k21_pass")):
            run = t.get(key)
            if not isinstance(run, dict):
                continue
            try:
                n, seqs, L, secs = int(run["seq_len"]), int(run["n_seqs"]), int(run["layers_total"]), _num(run["seconds"])
                s = Shape(int(run["d_model"]), L, int(run["heads"]), int(run.get("kv_heads") or run["heads"]),
                          int(run["head_dim"]), int(run["d_ff"]), bool(run["gated"]),
                          schema.layout(run["ln_position"]) is schema.POST_LN, 0, causal=bool(run.get("causal", False)))
            except (KeyError, TypeError, ValueError):
                continue
            if not secs or n < 1 or seqs < 1 or L < 1:
                continue
            e, rate = eff["fp32"], rates["fp32"]
            model = (forward_flops(s, n) / e["forward"] + work_flops(kind, s, n) / e[kind]) * L * seqs / rate
            overhead[kind] = max(0.0, (secs - model) / (seqs * L))
    return Measured(device=device, date=date, path=str(p), torch=str(t.get("torch") or ""),
                    commit=str(doc.get("commit") or ""), source=str(doc.get("source") or ""), rates=rates,
                    efficiency=eff, overhead=overhead)


def available(folder: Path = DIR) -> list[Measured]:
    """Every valid measured file in ``folder``, newest first (an invalid one is skipped)."""
    out = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if p.is_symlink() or not p.is_file():
            continue
        try:
            out.append(load(p))
        except ValueError:
            continue
    return sorted(out, key=lambda m: (m.date, m.path), reverse=True)


def find(gpu: str | None, folder: Path = DIR, known: tuple[str, ...] = ()) -> Measured | None:
    """The newest run on ``gpu``: a GPU's short name (``H200``) or a device name (``NVIDIA H200 SXM
    141GB``), matched by the ``known`` short names it contains (`devices.GPUS`' keys; the caller passes
    them), else by the name itself, inside the run's device name."""
    if not gpu:
        return None
    keys = [k for k in known if k.lower() in gpu.lower()] or [gpu]
    for m in available(folder):
        if any(k.lower() in m.device.lower() for k in keys):
            return m
    return None


def install(src: str | Path, folder: Path = DIR) -> Path:
    """Check a GPU check's JSON and copy it into ``folder`` as ``<gpu>-<date>.json`` (the GPU: the device
    name's first word of letters then digits, ``H200`` in ``NVIDIA H200``); returns the new path."""
    import re

    m = load(src)
    model = next((w for w in re.split(r"[^A-Za-z0-9]+", m.device) if re.fullmatch(r"[A-Za-z]+[0-9]+[A-Za-z]*", w)),
                 "gpu")
    name = re.sub(r"[^a-z0-9.-]", "-", f"{model}-{m.date[:10]}".lower())
    dst = folder / f"{name}.json"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)
    return dst


def main(argv: list[str] | None = None) -> int:
    """``python -m report_builder.costs.measured FILE``: install a GPU check's JSON (see `install`)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m report_builder.costs.measured GPU-CHECK.json  (copies it into "
              f"{DIR} as <gpu>-<date>.json)", file=sys.stderr)
        return 2
    try:
        dst = install(args[0])
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    m = load(dst)
    print(f"{dst}: {m.label()}; rates " + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in m.rates.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
