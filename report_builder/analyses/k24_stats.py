"""K24 statistics on contribution maps: contextualization change, FF-amp, pair categories.

Pure numpy / pandas / scipy helpers shared by the compute side (which converts the torch maps to
numpy first) and by the figures. No torch, no altair.

Conventions: a map is an ``(n, n)`` array ``A[i, j]`` (row ``i`` = query/output token, column ``j``
= key/source token) over the *unpadded* sequence. Causal models only have valid pairs ``j <= i``.

Pitfall: Spearman ρ of two maps is undefined when one of them is constant over the valid pairs
(e.g. a 1-token sequence, or a causal 1×1 map); `ctx_change` then returns ``nan`` and the caller
drops that sequence from the mean (``n_seqs`` counts only the sequences that were used).
"""
from __future__ import annotations

import functools
import heapq
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from report_builder import schema

# ---------------------------------------------------------------------------------------------
# Scopes and components
# ---------------------------------------------------------------------------------------------

SCOPES = {lay.id: lay.scopes for lay in schema.LAYOUTS}
"""Layout id -> K24 scopes in layer order (from `schema.LAYOUTS`; kept for the figures' lookups)."""

COMPONENTS = {lay.id: lay.components for lay in schema.LAYOUTS}
"""Layout id -> the component between consecutive scopes (from `schema.LAYOUTS`)."""

FF_SCOPES = {lay.id: (lay.ff_before, lay.ff_after) for lay in schema.LAYOUTS}
"""Layout id -> the (before FF, after FF) scopes used for FF-amp (from `schema.LAYOUTS`)."""


def scope_order(ln_position: str) -> tuple[str, ...]:
    """Scopes of a layer of layout ``ln_position`` (`schema.layout` id), in order."""
    return schema.layout(ln_position).scopes


# ---------------------------------------------------------------------------------------------
# Contextualization change
# ---------------------------------------------------------------------------------------------


def valid_pairs_mask(n: int, causal: bool) -> np.ndarray:
    """Boolean ``(n, n)`` mask of the pairs that enter the statistics.

    All pairs for encoders; the lower triangle including the diagonal (``j <= i``) for causal models.
    """
    if causal:
        return np.tril(np.ones((n, n), dtype=bool))
    return np.ones((n, n), dtype=bool)


def _rank(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank), as ``scipy.stats.rankdata``.

    A tie group's rank depends only on where the group starts and ends in sorted order, never on the
    order the sort leaves its members in, so the fast unstable sort gives the same ranks as a stable
    one. NaNs (sorted last) are never equal, so each is its own group and their order matters: with
    any NaN the stable sort is used, and NaNs are ranked in index order as before.
    """
    order = np.argsort(x)
    xs = x[order]
    if xs.size and xs[-1] != xs[-1]:
        order = np.argsort(x, kind="mergesort")
        xs = x[order]
    first = np.empty(x.size, dtype=bool)
    first[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=first[1:])
    ranks = np.empty(x.size, dtype=np.float64)
    if first.all():  # no ties: the k-th smallest gets 0.5 * (k + (k - 1) + 1) = k exactly
        ranks[order] = np.arange(1, x.size + 1, dtype=np.float64)
        return ranks
    dense = np.cumsum(first)
    bounds = np.append(np.flatnonzero(first), x.size)
    ranks[order] = 0.5 * (bounds[dense] + bounds[dense - 1] + 1)
    return ranks


@dataclass(frozen=True)
class Ranked:
    """One map's valid pairs as centred average ranks and their sum of squares (`ranked`): what the
    Spearman ρ of that map with any other needs, so a scope in several pairs is ranked once."""

    shape: tuple[int, int]
    centred: np.ndarray | None  # None: fewer than 2 valid pairs (ρ undefined)
    ss: float = float("nan")


def ranked(m: np.ndarray, causal: bool, mask: np.ndarray | None = None) -> Ranked:
    """`Ranked` of an ``(n, n)`` map over its valid pairs (see `ctx_change` for ``causal`` and ``mask``)."""
    a = np.asarray(m)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    # float32 maps are ranked as they are: casting to float64 is exact and keeps order and ties
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"maps must be (n, n) arrays, got {a.shape}")
    if mask is None and not causal:
        x = a.ravel()  # every pair, in the row-major order a boolean mask takes them in
    else:
        v = valid_pairs_mask(a.shape[0], causal)
        x = a[v & np.asarray(mask, dtype=bool) if mask is not None else v]
    if x.size < 2:
        return Ranked(a.shape, None)
    r = _rank(x)
    r = r - r.mean()
    return Ranked(a.shape, r, (r * r).sum())


def ranked_change(a: Ranked, b: Ranked) -> float:
    """``1 − Spearman ρ`` of two `Ranked` maps (from S to T), clipped to ``[0, 2]``; nan when undefined."""
    if a.shape != b.shape:
        raise ValueError(f"maps must be equal (n, n) arrays, got {a.shape} and {b.shape}")
    if a.centred is None or b.centred is None:
        return float("nan")
    den = np.sqrt(a.ss * b.ss)
    if den == 0 or not np.isfinite(den):
        return float("nan")
    rho = float((a.centred * b.centred).sum() / den)
    if np.isnan(rho):
        return float("nan")
    return float(np.clip(1.0 - rho, 0.0, 2.0))


def ctx_change(map_s: np.ndarray, map_t: np.ndarray, causal: bool, mask: np.ndarray | None = None) -> float:
    """Contextualization change ``1 − ρ`` between two maps of one sequence and layer.

    Args:
        map_s: ``(n, n)`` map at scope S (before).
        map_t: ``(n, n)`` map at scope T (after).
        causal: if True only pairs ``j <= i`` are used.
        mask: optional extra ``(n, n)`` bool mask (e.g. non-pad), AND-ed with the causal mask.

    Returns:
        ``1 − Spearman ρ`` over the flattened valid pairs, in ``[0, 2]``: 0 for maps with identical
        rank order, 2 for exactly reversed ranks. ``nan`` when ρ is undefined (either map constant
        over the valid pairs, or fewer than 2 valid pairs) — callers drop such sequences.
    """
    a, b = np.asarray(map_s), np.asarray(map_t)
    if a.shape != b.shape:
        raise ValueError(f"maps must be equal (n, n) arrays, got {a.shape} and {b.shape}")
    return ranked_change(ranked(a, causal, mask), ranked(b, causal, mask))


def sequence_ctx_changes(maps: dict[str, np.ndarray], ln_position: str, causal: bool) -> list[dict]:
    """All K24 changes for one sequence and layer.

    Each scope is ranked once (`ranked`) however many pairs it is in, and a pair that is both a
    component and a cumulative one (ATB→ next scope) is computed once: the same values as
    `ctx_change` on every pair.

    Args:
        maps: scope name -> ``(n, n)`` map, for every scope of the layout.
        ln_position: the layout id (`schema.layout`).
        causal: whether pairs are restricted to ``j <= i``.

    Returns:
        rows ``{kind, component, from_scope, to_scope, change}``: one ``component`` row per
        consecutive scope pair (component ``FF``/``RES``/``LN``) and one ``cumulative`` row per
        later scope (component ``"ATB→<scope>"``, from ATB).
    """
    lay = schema.layout(ln_position)
    ranks: dict[str, Ranked] = {}
    changes: dict[tuple[str, str], float] = {}

    def change(s: str, t: str) -> float:
        if (s, t) not in changes:
            for x in (s, t):
                if x not in ranks:
                    ranks[x] = ranked(maps[x], causal)
            changes[(s, t)] = ranked_change(ranks[s], ranks[t])
        return changes[(s, t)]

    rows = []
    for k, comp in enumerate(lay.components):
        s, t = lay.scopes[k], lay.scopes[k + 1]
        rows.append(dict(kind="component", component=comp, from_scope=s, to_scope=t, change=change(s, t)))
    for s, t in lay.cumulative():
        rows.append(dict(kind="cumulative", component=f"{s}→{t}", from_scope=s, to_scope=t, change=change(s, t)))
    return rows


def summarise_ctx(rows: pd.DataFrame) -> pd.DataFrame:
    """Average per-sequence changes into the ``k24_ctx`` table.

    Args:
        rows: one row per (model, dataset, seq, layer, kind, component, from_scope, to_scope) with a
            ``change`` column (``nan`` rows are dropped before averaging).

    Returns:
        ``k24_ctx`` frame: model, dataset, layer, kind, component, from_scope, to_scope, change
        (mean over sequences), change_sd (sample SD, ddof=1; nan for one sequence), n_seqs.
    """
    keys = ["model", "dataset", "layer", "kind", "component", "from_scope", "to_scope"]
    ok = rows.dropna(subset=["change"])
    out = (ok.groupby(keys, sort=False)["change"]
           .agg(change="mean", change_sd="std", n_seqs="count").reset_index())
    out["n_seqs"] = out["n_seqs"].astype(int)
    return out[keys + ["change", "change_sd", "n_seqs"]]


# ---------------------------------------------------------------------------------------------
# FF-amp
# ---------------------------------------------------------------------------------------------


def row_normalise(m: np.ndarray) -> np.ndarray:
    """Divide each row (last axis) by its sum; rows that sum to 0 stay all-zero."""
    a = np.asarray(m, dtype=np.float64)
    s = a.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(s != 0, a / np.where(s != 0, s, 1.0), 0.0)
    return out


def ffamp(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """FF-amp map ``row_normalise(after) − row_normalise(before)``.

    Each row sums to 0 (unless exactly one of the two rows is all-zero). For causal models pass
    maps whose upper triangle is zero (it then stays zero).
    """
    return row_normalise(after) - row_normalise(before)


# ---------------------------------------------------------------------------------------------
# Pair categories
# ---------------------------------------------------------------------------------------------

CATEGORY_ORDER = schema.PAIR_CATEGORIES
"""Pair categories (`schema.PAIR_CATEGORIES`); a pair gets the **first** that applies, in exactly this order."""

_MARKERS = ("Ġ", "▁", "Ċ", " ")  # leading-space / newline markers of byte-level BPE and SentencePiece
_NAME_RE = re.compile(r"\b[A-Z][\w'’.\-]*(?:[ \t]+[A-Z][\w'’\-]*)+")
_NAME_STOP = {"The", "A", "An", "This", "That", "These", "Those", "In", "On", "At", "Of", "For", "And",
              "But", "Or", "If", "When", "While", "As", "By", "To", "From", "With", "It", "He", "She",
              "They", "We", "I", "You", "His", "Her", "Their", "Our", "My", "After", "Before"}


def strip_marker(token: str) -> str:
    """Token text without its WordPiece ``##`` prefix or BPE/SentencePiece leading-space marker."""
    if token.startswith("##"):
        return token[2:]
    t = token
    while t[:1] in _MARKERS:
        t = t[1:]
    return t


def is_punctuation(token: str) -> bool:
    """True if the marker-stripped token is non-empty and all Unicode punctuation or symbols."""
    t = strip_marker(token)
    return bool(t) and all(unicodedata.category(c)[0] in "PS" for c in t)


def infer_word_ids(tokens: Sequence[str], special: Sequence[bool]) -> list[int | None]:
    """Word ids from subword markers when the tokenizer's ``word_ids()`` are unavailable.

    A non-special token continues the previous word if it is a WordPiece ``##`` piece, or (for
    marker-based BPE vocabularies, i.e. when any token carries ``Ġ``/``▁``) if it has no leading-space
    marker; punctuation tokens and tokens after punctuation always start a new word. Special tokens
    get ``None``.
    """
    bpe = any(t[:1] in ("Ġ", "▁") for t in tokens)
    out: list[int | None] = []
    wid = -1
    prev_punct = True
    prev_special = True
    for tok, sp in zip(tokens, special):
        if sp:
            out.append(None)
            prev_special = True
            continue
        punct = is_punctuation(tok)
        if bpe:
            cont = not (tok[:1] in _MARKERS) and not punct and not prev_punct and not prev_special
        else:
            cont = tok.startswith("##") and not prev_special
        if not cont:
            wid += 1
        out.append(wid)
        prev_punct = punct
        prev_special = False
    return out


@functools.lru_cache(maxsize=1)
def _spacy_nlp():
    """An installed spaCy English pipeline with NER, or None (never downloads anything)."""
    try:  # pragma: no cover - spaCy is optional and not installed by default
        import spacy

        for name in ("en_core_web_sm", "en_core_web_md", "en_core_web_lg", "en_core_web_trf"):
            try:
                return spacy.load(name, disable=["parser", "lemmatizer"])
            except Exception:
                continue
    except Exception:
        pass
    return None


def name_method() -> str:
    """Which multi-word-name finder `find_name_spans` uses: ``"spacy-ner"`` or ``"capitalised-span"``."""
    return "spacy-ner" if _spacy_nlp() is not None else "capitalised-span"


def find_name_spans(text: str, use_ner: bool | None = None) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of multi-word names in ``text``.

    With spaCy and an English model importable (and ``use_ner`` not False): entities of ≥ 2 words.
    Otherwise: runs of ≥ 2 consecutive capitalised words (regex), with a leading function word such
    as "The" or "In" dropped (so a sentence-initial "The New York Times" gives "New York Times"); a
    run that is then shorter than 2 words is not a name.
    """
    nlp = _spacy_nlp() if use_ner in (None, True) else None
    spans: list[tuple[int, int]] = []
    if nlp is not None:  # pragma: no cover
        for ent in nlp(text).ents:
            if len(ent.text.split()) >= 2:
                spans.append((ent.start_char, ent.end_char))
        return spans
    for m in _NAME_RE.finditer(text):
        s, e = m.start(), m.end()
        words = list(re.finditer(r"\S+", text[s:e]))
        while words and words[0].group().rstrip(".") in _NAME_STOP:
            words = words[1:]
        if len(words) >= 2:
            spans.append((s + words[0].start(), s + words[-1].end()))
    return spans


def _token_name_ids(offsets, text: str, special, names) -> np.ndarray:
    """Index of the name span each token lies inside, or a unique negative number."""
    n = len(offsets)
    out = -np.arange(1, n + 1)
    if not names:
        return out
    for k in range(n):
        if special[k] or offsets[k] is None:
            continue
        s, e = int(offsets[k][0]), int(offsets[k][1])
        if e <= s:
            continue
        piece = text[s:e]
        s += len(piece) - len(piece.lstrip())  # BPE offsets may include the leading space
        e -= len(piece) - len(piece.rstrip())
        if e <= s:
            continue
        for q, (ns, ne) in enumerate(names):
            if s >= ns and e <= ne:
                out[k] = q
                break
    return out


_CATEGORY_NAMES = np.array(CATEGORY_ORDER, dtype=object)


def pair_categories(tokens: Sequence[str], word_ids: Sequence[int | None] | None,
                    offsets: Sequence[tuple[int, int] | None] | None, text: str,
                    special: Sequence[bool], names: list[tuple[int, int]] | None = None) -> np.ndarray:
    """Category of every pair ``(i, j)`` of one sequence (vectorised `pair_category`).

    Args:
        tokens: ``n`` token strings as the tokenizer writes them (``##ing``, ``Ġthe``, ``▁the``).
        word_ids: ``n`` source-word ids (the fast tokenizer's ``word_ids()``; ``None`` for special
            tokens); if ``None`` they are inferred from subword markers (`infer_word_ids`).
        offsets: ``n`` ``(start, end)`` character offsets into ``text`` (``(0, 0)``/None for specials);
            if ``None``, no multi-word names are found.
        text: the source text the offsets refer to.
        special: ``n`` bools, True for special tokens ([CLS], [SEP], <s>, BOS, …).
        names: name spans from `find_name_spans` (computed from ``text`` if None).

    Returns:
        ``(n, n)`` array of str from `CATEGORY_ORDER`, first that applies in that order:
        ``special token`` (either token special), ``same word`` (same word id), ``multi-word name``
        (both tokens inside one name span), ``adjacent`` (``|i − j| = 1``), ``identical token`` (same
        marker-stripped string, different words), ``punctuation`` (either token punctuation),
        ``other``. The diagonal is labelled by the same rules (callers exclude ``i = j``).
    """
    return _CATEGORY_NAMES[pair_category_codes(tokens, word_ids, offsets, text, special, names)]


def pair_category_codes(tokens: Sequence[str], word_ids: Sequence[int | None] | None,
                        offsets: Sequence[tuple[int, int] | None] | None, text: str,
                        special: Sequence[bool], names: list[tuple[int, int]] | None = None) -> np.ndarray:
    """`pair_categories` as ``(n, n)`` int8 indices into `CATEGORY_ORDER` (same arguments and rules)."""
    n = len(tokens)
    sp = np.asarray(special, dtype=bool).reshape(n)
    if word_ids is None:
        word_ids = infer_word_ids(tokens, sp)
    wid = np.array([(-1 - k) if (w is None or sp[k]) else int(w) for k, w in enumerate(word_ids)])
    if offsets is not None:
        if names is None:
            names = find_name_spans(text)
        nid = _token_name_ids(offsets, text, sp, names)
    else:
        nid = -np.arange(1, n + 1)
    ids: dict[str, int] = {}  # equal marker-stripped strings <-> equal ids (int compares, not n^2 str ones)
    stripped = np.array([ids.setdefault(strip_marker(t), len(ids)) for t in tokens], dtype=np.int64).reshape(n)
    punct = np.array([is_punctuation(t) for t in tokens], dtype=bool)
    idx = np.arange(n)
    conds = [
        sp[:, None] | sp[None, :],
        wid[:, None] == wid[None, :],
        (nid[:, None] == nid[None, :]) & (nid[:, None] >= 0),
        np.abs(idx[:, None] - idx[None, :]) == 1,
        stripped[:, None] == stripped[None, :],
        punct[:, None] | punct[None, :],
    ]
    return np.select(conds, list(range(len(CATEGORY_ORDER) - 1)), default=len(CATEGORY_ORDER) - 1).astype(np.int8)


def pair_category(tokens, word_ids, offsets, text, special, i: int, j: int, names=None) -> str:
    """Category of one pair ``(i, j)``; same rules and arguments as `pair_categories`."""
    return str(pair_categories(tokens, word_ids, offsets, text, special, names)[i, j])


# ---------------------------------------------------------------------------------------------
# Context snippets
# ---------------------------------------------------------------------------------------------


def context_snippet(text: str, offsets, i: int, j: int, width: int = 40,
                    tokens: Sequence[str] | None = None) -> str:
    """The text around tokens ``i`` and ``j`` with both marked as ``⟦…⟧``.

    Shows ``width`` characters before the earlier and after the later token (``…`` where cut;
    whitespace runs collapsed). A token with an empty span (special tokens) is shown as
    ``⟦<token>⟧`` (needs ``tokens``) at the end of the nearest preceding non-empty token.
    """
    marks = []  # (insert_start, insert_end, label or None)
    for k in sorted({i, j}):
        off = offsets[k] if offsets is not None else None
        s, e = (int(off[0]), int(off[1])) if off is not None else (0, 0)
        if e > s:
            piece = text[s:e]
            s += len(piece) - len(piece.lstrip())
            marks.append((s, e, None))
        else:
            pos = 0
            for q in range(k - 1, -1, -1):
                o = offsets[q] if offsets is not None else None
                if o is not None and int(o[1]) > int(o[0]):
                    pos = int(o[1])
                    break
            label = tokens[k] if tokens is not None else "∅"
            marks.append((pos, pos, label))
    lo = max(0, min(m[0] for m in marks) - width)
    hi = min(len(text), max(m[1] for m in marks) + width)
    out, cur = [], lo
    for s, e, label in sorted(marks, key=lambda m: (m[0], m[1])):
        s = max(s, cur)
        out.append(text[cur:s])
        out.append(f"⟦{label}⟧" if label is not None else f"⟦{text[s:e]}⟧")
        cur = max(cur, e)
    out.append(text[cur:hi])
    snippet = re.sub(r"\s+", " ", "".join(out)).strip()
    return ("…" if lo > 0 else "") + snippet + ("…" if hi < len(text) else "")


# ---------------------------------------------------------------------------------------------
# Top pairs and base rates
# ---------------------------------------------------------------------------------------------


@dataclass
class SeqInfo:
    """What the categoriser and the snippet need about one sequence."""

    tokens: Sequence[str]
    special: Sequence[bool]
    text: str = ""
    offsets: Sequence[tuple[int, int] | None] | None = None
    word_ids: Sequence[int | None] | None = None


PAYLOAD = ("seq", "i", "j", "token_i", "token_j", "amp", "before", "after", "category", "context")
"""What `TopPairs.top_frame` records of each pair, after its ``rank``."""


@dataclass(frozen=True)
class SeqPairs:
    """One sequence's valid ``i ≠ j`` pairs, their categories and category counts (`seq_pairs`): the
    same in every layer, so `TopPairs.add` can take them computed once per sequence."""

    n: int
    flat: np.ndarray  # flat indices i * n + j of the valid pairs, row-major
    codes: np.ndarray  # (n, n) indices into CATEGORY_ORDER
    counts: np.ndarray  # pairs per category, CATEGORY_ORDER's order


def seq_pairs(info: SeqInfo, causal: bool) -> SeqPairs:
    """The `SeqPairs` of one sequence (``j ≤ i`` only if ``causal``)."""
    n = len(info.tokens)
    valid = valid_pairs_mask(n, causal) & ~np.eye(n, dtype=bool)
    codes = pair_category_codes(info.tokens, info.word_ids, info.offsets, info.text, info.special)
    return SeqPairs(n, np.flatnonzero(valid), codes, np.bincount(codes[valid], minlength=len(CATEGORY_ORDER)))


@dataclass
class TopPairs:
    """Running top-k FF-amplified pairs (``i ≠ j``) of one (model, dataset, layer) and base rates.

    Feed one sequence at a time with `add`; memory is O(k) for the top pairs plus 7 counters.
    Ties are broken by (seq, i, j) ascending, so the result does not depend on feeding order.
    """

    k: int = 20
    causal: bool = False
    width: int = 40
    _heap: list = field(default_factory=list)  # min-heap of (amp, -seq, -i, -j, payload)
    base_counts: dict = field(default_factory=lambda: {c: 0 for c in CATEGORY_ORDER})

    def add(self, seq: int, amp: np.ndarray, info: SeqInfo, before: np.ndarray | None = None,
            after: np.ndarray | None = None, pairs: SeqPairs | None = None) -> None:
        """Add one sequence's ``(n, n)`` amp map (and optionally its row-normalised before/after maps).

        ``pairs``: the sequence's `seq_pairs` (computed here if None; pass them to share them between layers).
        """
        amp = np.asarray(amp, dtype=np.float64)
        n = amp.shape[0]
        if pairs is None:
            pairs = seq_pairs(info, self.causal)
        if pairs.n != n:
            raise ValueError(f"the pairs are of a sequence of {pairs.n} tokens, the map has {n}")
        for cat, cnt in zip(CATEGORY_ORDER, pairs.counts):
            if cnt:
                self.base_counts[cat] = self.base_counts.get(cat, 0) + int(cnt)
        vals = amp.ravel()[pairs.flat]
        if vals.size == 0:
            return
        kk = min(self.k, vals.size)
        cand = np.argpartition(-vals, kk - 1)[:kk]
        if len(self._heap) >= self.k:  # only candidates above the current k-th key can enter
            floor = self._heap[0][0]
            cand = cand[vals[cand] >= floor]
        for q in cand:
            f = int(pairs.flat[q])
            i, j, v = f // n, f % n, float(vals[q])
            self._offer((v, -seq, -i, -j), lambda i=i, j=j, v=v: dict(
                seq=int(seq), i=i, j=j, token_i=str(info.tokens[i]), token_j=str(info.tokens[j]), amp=v,
                before=float(before[i, j]) if before is not None else float("nan"),
                after=float(after[i, j]) if after is not None else float("nan"),
                category=CATEGORY_ORDER[pairs.codes[i, j]],
                context=context_snippet(info.text, info.offsets, i, j, self.width, info.tokens)
                if info.offsets is not None else f"{info.tokens[i]} ← {info.tokens[j]}",
            ))

    def _offer(self, key: tuple, payload: Callable[[], dict]) -> None:
        if len(self._heap) >= self.k and key <= self._heap[0][:4]:
            return
        item = (*key, payload())
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, item)
        else:
            heapq.heapreplace(self._heap, item)

    def merge(self, top: pd.DataFrame, base: pd.DataFrame) -> None:
        """Fold in another `TopPairs`' `top_frame` and `base_frame` (e.g. a shard's): the result is the
        one feeding both sets of sequences into one `TopPairs` gives, in any order (keys are totally
        ordered, counts are summed)."""
        for cat, cnt in zip(base["category"], base["base_count"]):
            self.base_counts[cat] = self.base_counts.get(cat, 0) + int(cnt)
        for r in top[list(PAYLOAD)].itertuples(index=False):
            self._offer((float(r.amp), -int(r.seq), -int(r.i), -int(r.j)), lambda r=r: dict(
                seq=int(r.seq), i=int(r.i), j=int(r.j), token_i=str(r.token_i), token_j=str(r.token_j),
                amp=float(r.amp), before=float(r.before), after=float(r.after), category=str(r.category),
                context=str(r.context)))

    def top_frame(self) -> pd.DataFrame:
        """Top pairs, ``rank`` 1 = largest amp: rank, seq, i, j, token_i, token_j, amp, before, after, category, context."""
        items = sorted(self._heap, key=lambda t: (-t[0], -t[1], -t[2], -t[3]))
        rows = [dict(rank=r + 1, **t[4]) for r, t in enumerate(items)]
        return pd.DataFrame(rows, columns=["rank", *PAYLOAD])

    def base_frame(self) -> pd.DataFrame:
        """Base counts over all valid ``i ≠ j`` pairs seen: category, base_count (every category listed)."""
        return pd.DataFrame({"category": list(CATEGORY_ORDER),
                             "base_count": [int(self.base_counts.get(c, 0)) for c in CATEGORY_ORDER]})


def top_pairs(amps: Iterable[tuple[int, np.ndarray, SeqInfo]], k: int = 20, causal: bool = False,
              width: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Top-k FF-amplified pairs over a dataset for one layer, and the category base counts.

    Args:
        amps: iterable of ``(seq, amp_map, info)``; ``amp_map`` is ``(n, n)`` (see `ffamp`). To also
            record before/after values use `TopPairs` directly.
        k: how many pairs to keep (over the whole dataset, ``i ≠ j``; ``j ≤ i`` if causal).
        causal: restrict to ``j <= i``.
        width: context characters either side in the snippets.

    Returns:
        ``(top_df, base_df)`` — see `TopPairs.top_frame` / `TopPairs.base_frame`.
    """
    tp = TopPairs(k=k, causal=causal, width=width)
    for seq, amp, info in amps:
        tp.add(seq, amp, info)
    return tp.top_frame(), tp.base_frame()


def category_shares(top_df: pd.DataFrame, base_df: pd.DataFrame) -> pd.DataFrame:
    """Share of each category among top pairs vs its base rate (the ``k24_ffamp_base`` table).

    Args:
        top_df: top pairs with a ``category`` column (plus any of model, dataset, layer).
        base_df: ``category``, ``base_count`` (plus the same group columns).

    Returns:
        one row per (group…, category) for every category in `CATEGORY_ORDER`: group columns,
        category, top_count, top_share (of the group's top pairs), base_count, base_share (of all
        valid ``i ≠ j`` pairs in the group). Shares are 0 (not nan) for empty groups.
    """
    groups = [c for c in ("model", "dataset", "layer") if c in base_df.columns]
    base = base_df.assign(_g=0).groupby(["_g"] + groups + ["category"], sort=False)["base_count"].sum()
    keys = base.reset_index()[["_g"] + groups].drop_duplicates()
    full = keys.merge(pd.DataFrame({"category": list(CATEGORY_ORDER)}), how="cross")
    top = top_df.assign(_g=0).groupby(["_g"] + groups + ["category"], sort=False).size().rename("top_count")
    on = ["_g"] + groups + ["category"]
    out = full.merge(top.reset_index(), on=on, how="left").merge(base.reset_index(), on=on, how="left")
    out[["top_count", "base_count"]] = out[["top_count", "base_count"]].fillna(0).astype(int)
    for col, name in (("top_count", "top_share"), ("base_count", "base_share")):
        tot = out.groupby(["_g"] + groups, sort=False)[col].transform("sum")
        out[name] = np.where(tot > 0, out[col] / tot.where(tot > 0, 1), 0.0).astype(float)
    return out[groups + ["category", "top_count", "top_share", "base_count", "base_share"]].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# RES / LN summaries
# ---------------------------------------------------------------------------------------------


def norm_ratio_summary(ff_norm: np.ndarray, res_norm: np.ndarray) -> dict[str, float]:
    """Per-layer summary of ``‖FF output_i‖`` vs ``‖residual input_i‖`` over all tokens.

    Returns ff_norm_mean, res_norm_mean, ratio_mean, ratio_q10, ratio_q50, ratio_q90 where
    ``ratio_i = ‖FF_i‖ / ‖res_i‖`` (tokens with a zero residual norm are skipped).
    """
    f = np.asarray(ff_norm, dtype=np.float64).ravel()
    r = np.asarray(res_norm, dtype=np.float64).ravel()
    ok = r > 0
    ratio = f[ok] / r[ok]
    q = np.quantile(ratio, [0.1, 0.5, 0.9]) if ratio.size else [np.nan] * 3
    return dict(ff_norm_mean=float(f.mean()), res_norm_mean=float(r.mean()),
                ratio_mean=float(ratio.mean()) if ratio.size else float("nan"),
                ratio_q10=float(q[0]), ratio_q50=float(q[1]), ratio_q90=float(q[2]))


def kept_ratio(ff_change: np.ndarray, ln_out_change: np.ndarray) -> np.ndarray:
    """Per-dimension share of FF's change that survives LN: ``ln_out_change / ff_change`` (nan where 0)."""
    f = np.asarray(ff_change, dtype=np.float64)
    g = np.asarray(ln_out_change, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(f > 0, g / np.where(f > 0, f, 1.0), np.nan)
