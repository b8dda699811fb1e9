"""The K24 pass's statistics on the device (GPU builds): what `stats.host_stats.HostStats` computes per
sequence and layer on the host, computed per batch and layer where the maps are, so only a few numbers
per sequence reach the host.

`DeviceStats.reduce` is the engine's reduce step (`engine.reduce_sequences`); from the batch tensors of
one layer's scope maps and extras it returns, per sequence:

- ``ctx``: the contextualization change ``1 − ρ`` of every pair of `stats.ctx_change.change_plan`:
  Spearman ρ over the valid pairs (``j ≤ i`` for causal models; without special tokens when asked), each
  scope ranked once with average ranks for ties (`centred_ranks`, `stats.ctx_change._rank`'s rule; NaNs
  last, each its own group), nan where ρ is undefined;
- ``amp_*``: the FF-amp map's best ``top_k`` valid ``i ≠ j`` pairs (stable descending sort: ties go to the
  smaller ``(i, j)``, as `stats.top_pairs.TopPairs` orders them) with their row-normalised before/after
  values;
- ``ff_norm``, ``res_norm`` (per token) and the float64 sums over tokens of |FF| and of the FF part of the
  next norm's output (per dimension), and that norm's γ.

`DeviceStats.add` turns a batch of those into `HostStats`' rows (pair categories and snippets stay on
the host, once per sequence), `DeviceStats.tables` into `k24_compute.scope_partials`' tables. The same
code runs on CPU tensors, which is how it is tested against the host statistics: the ranks and hence ρ
are exact in float64 (sums of half-integer products), the rest agrees to float rounding.

Pitfall: the batch tensors hold padding; every statistic masks it (`engine.Batch.real`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from report_builder.engine import Batch, BatchOut, batch_tensor
from report_builder.stats.ctx_change import change_plan
from report_builder.stats.host_stats import HostStats
from report_builder.stats.top_pairs import PAYLOAD, SeqInfo, SeqPairs, TopPairs, seq_pairs


def centred_ranks(x: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Average ranks of each row's valid entries, centred on their mean.

    Args:
        x: (R, P) float64 values; valid: (R, P) bool, which of them count.
    Returns:
        ``(c, ss, count)``: (R, P) centred ranks (0 where not valid), (R,) their sum of squares, (R,)
        the valid entries per row. Ties share their mean rank; NaNs rank after every number, each
        alone, in index order (as `stats.ctx_change._rank`).
    """
    R, P = x.shape
    pos = torch.arange(P, device=x.device)
    first = torch.sort((~valid).to(torch.uint8), dim=1, stable=True).indices  # the valid entries first, in order
    count = valid.sum(1)
    tail = pos[None, :] >= count[:, None]
    xv = torch.where(tail, torch.nan, torch.gather(x, 1, first))
    vals, second = torch.sort(xv, dim=1, stable=True)  # NaNs last, in index order
    order = torch.gather(first, 1, second)
    new = torch.ones_like(tail)
    new[:, 1:] = vals[:, 1:] != vals[:, :-1]  # NaN != NaN: each NaN is its own group
    last = torch.ones_like(tail)
    last[:, :-1] = new[:, 1:]
    start = torch.where(new, pos, 0).cummax(1).values
    end = torch.where(last, pos + 1, P).flip(1).cummin(1).values.flip(1)
    ranks = torch.where(tail, 0.0, 0.5 * (start + end + 1).to(x.dtype))
    r = torch.zeros_like(x).scatter_(1, order, ranks)
    mean = r.sum(1) / count.clamp_min(1)
    c = torch.where(valid, r - mean[:, None], 0.0)
    return c, (c * c).sum(1), count


def _row_normalise(m: Tensor) -> Tensor:
    """`stats.maps.row_normalise` on (..., n, n) float64: rows that sum to 0 stay all-zero."""
    s = m.sum(-1, keepdim=True)
    nz = s != 0
    return torch.where(nz, m / torch.where(nz, s, 1.0), 0.0)


class DeviceStats:
    """The K24 statistics of one pass computed on the device (see the module docstring).

    Args:
        lay: the model's `schema.Layout`. causal: pairs ``j ≤ i`` only.
        encoded: the pass's sequences, in the engine's order (``batch.group`` indexes them).
        top_k, include_special, n_layers: as `HostStats`.
    """

    def __init__(self, lay, causal: bool, encoded: list, *, top_k: int, include_special: bool, n_layers: int):
        self.lay, self.causal, self.encoded = lay, causal, encoded
        self.top_k, self.include_special, self.n_layers = top_k, include_special, n_layers
        self.rows, self.pairs = change_plan(lay.id)
        self.scopes = list(dict.fromkeys(s for p in self.pairs for s in p))
        self.ctx_rows: list[dict] = []
        self.tops: dict[int, TopPairs] = {}
        self.norms: list[tuple[int, int, np.ndarray, np.ndarray]] = []
        self.dim_rows: list[tuple[int, int, int, np.ndarray, np.ndarray]] = []
        self.gamma: dict[int, np.ndarray] = {}
        self.errors: dict[tuple[int, str], float] = {}

    def reduce_bytes(self, n: int) -> int:
        """Device bytes per sequence of (padded) length ``n`` `reduce` needs while it runs."""
        return n * n * (110 * len(self.scopes) + 8 * len(self.pairs) + 64)

    def _masks(self, batch: Batch, dev: torch.device) -> tuple[Tensor, Tensor, Tensor]:
        """(B, n) real tokens, (B, n, n) the pairs the ranks use, (B, n, n) the FF-amp candidates."""
        key = ("k24-masks", str(dev))
        if key not in batch.memo:
            n = batch.n
            real = batch.real(dev)
            pairs = real[:, :, None] & real[:, None, :]
            if self.causal:
                pairs = pairs & torch.ones(n, n, dtype=torch.bool, device=dev).tril()[None]
            amp = pairs & ~torch.eye(n, dtype=torch.bool, device=dev)[None]
            ranked = pairs
            if not self.include_special:
                def special():
                    out = torch.zeros(len(batch.group), n, dtype=torch.bool)
                    for b, k in enumerate(batch.group):
                        out[b, :len(self.encoded[k].special)] = torch.tensor(list(self.encoded[k].special), dtype=torch.bool)
                    return out
                keep = real & ~batch.to(dev, "special", special)
                ranked = pairs & keep[:, :, None] & keep[:, None, :]
            batch.memo[key] = (real, ranked, amp)
        return batch.memo[key]

    def reduce(self, batch: Batch, layer: int, rs: list) -> dict[str, Tensor]:
        """One layer of one batch, on its device -> the tensors `add` reads (see the module docstring)."""
        maps = {s: batch_tensor(rs, "maps", s, batch) for s in self.scopes}
        dev = maps[self.scopes[0]].device
        real, ranked, amp_ok = self._masks(batch, dev)
        B, n = len(batch.group), batch.n
        S, P = len(self.scopes), n * n
        x = torch.stack([maps[s] for s in self.scopes], 1).reshape(B * S, P).double()
        c, ss, count = centred_ranks(x, ranked.reshape(B, 1, P).expand(B, S, P).reshape(B * S, P))
        c, ss, count = c.view(B, S, P), ss.view(B, S), count.view(B, S)
        del x
        changes = []
        for s_, t_ in self.pairs:  # a few pairs: one small reduction each, no index tensor to upload
            a, b = self.scopes.index(s_), self.scopes.index(t_)
            den = torch.sqrt(ss[:, a] * ss[:, b])
            rho = (c[:, a] * c[:, b]).sum(-1) / den
            ok = (count[:, a] >= 2) & (count[:, b] >= 2) & (den != 0) & torch.isfinite(den) & ~torch.isnan(rho)
            changes.append(torch.where(ok, (1.0 - rho).clamp(0.0, 2.0), torch.nan))
        out = {"ctx": torch.stack(changes, 1)}
        del c
        pair_real = (real[:, :, None] & real[:, None, :]).double()
        before = _row_normalise(maps[self.lay.ff_before].double() * pair_real)
        after = _row_normalise(maps[self.lay.ff_after].double() * pair_real)
        key = torch.where(amp_ok, after - before, -torch.inf).reshape(B, P)
        vals, idx = torch.sort(key, dim=1, descending=True, stable=True)
        k = min(self.top_k, P)
        idx = idx[:, :k]
        out.update(amp_val=vals[:, :k], amp_idx=idx, amp_before=before.reshape(B, P).gather(1, idx),
                   amp_after=after.reshape(B, P).gather(1, idx))
        ff = batch_tensor(rs, "extras", "ff", batch).float()
        res = batch_tensor(rs, "extras", "residual", batch).float()
        w = real[..., None].double()
        out.update(ff_norm=ff.norm(dim=-1), res_norm=res.norm(dim=-1), ff_sum=(ff.abs().double() * w).sum(1))
        if "ln_ff" in rs[0].extras:
            ln = batch_tensor(rs, "extras", "ln_ff", batch).float()
            out["ln_sum"] = (ln.abs().double() * w).sum(1)
            out["gamma"] = rs[0].extras["ln_weight"].float()
        return out

    def add(self, out: BatchOut) -> None:
        """A batch's tensors (on the host) -> the rows `HostStats.add` makes for its sequences."""
        batch = out.batch
        for b, (k, n) in enumerate(zip(batch.group, batch.lengths)):
            e = self.encoded[k]
            info = SeqInfo(tokens=e.tokens, special=e.special, text=e.text, offsets=e.offsets, word_ids=e.word_ids)
            pairs: SeqPairs | None = None
            for layer in sorted(out.layers):
                t = out.layers[layer]
                ch = t["ctx"][b].tolist()
                changes = {p: ch[i] for i, p in enumerate(self.pairs)}
                for row in self.rows:
                    self.ctx_rows.append(dict(seq=e.seq, layer=layer, **row,
                                              change=changes[(row["from_scope"], row["to_scope"])]))
                if pairs is None:
                    pairs = seq_pairs(info, self.causal)
                vals = t["amp_val"][b].numpy()
                keep = vals != -np.inf
                flat = t["amp_idx"][b].numpy()[keep]
                self.tops.setdefault(layer, TopPairs(k=self.top_k, causal=self.causal)).add_candidates(
                    e.seq, (flat // batch.n) * n + flat % batch.n, vals[keep], info, pairs,
                    t["amp_before"][b].numpy()[keep], t["amp_after"][b].numpy()[keep])
                self.norms.append((e.seq, layer, t["ff_norm"][b, :n].numpy(), t["res_norm"][b, :n].numpy()))
                ffs = t["ff_sum"][b].numpy()
                ln = t["ln_sum"][b].numpy() if "ln_sum" in t else np.full_like(ffs, np.nan)
                if "gamma" in t:
                    self.gamma[layer] = t["gamma"].numpy()
                self.dim_rows.append((e.seq, layer, n, ffs, ln))
                for s, v in out.errors[b].get(layer, {}).items():
                    self.errors[(layer, s)] = max(self.errors.get((layer, s), 0.0), v)

    def tables(self) -> dict[str, pd.DataFrame]:
        """``ctx_rows``, ``top_pairs`` and ``base_counts`` as `HostStats.tables` gives them (rows in
        sequence order)."""
        ctx = pd.DataFrame(self.ctx_rows, columns=list(HostStats.CTX_COLS))
        tops = sorted(self.tops.items())
        frames = [tp.top_frame().drop(columns="rank").assign(layer=l) for l, tp in tops]
        bases = [tp.base_frame().assign(layer=l) for l, tp in tops]
        cols = ["layer", *PAYLOAD]
        return {
            "ctx_rows": ctx.sort_values("seq", kind="mergesort", ignore_index=True),
            "top_pairs": pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols),
            "base_counts": (pd.concat(bases, ignore_index=True)[["layer", "category", "base_count"]] if bases
                            else pd.DataFrame(columns=["layer", "category", "base_count"])),
        }
