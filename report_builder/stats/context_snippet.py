"""The text around a token pair with both tokens marked ``⟦…⟧`` (K24's top FF-amplified pairs).

Pitfall: a special token has an empty character span; it is shown as ``⟦<token>⟧`` at the end of the
nearest preceding non-empty token, and BPE offsets that include a leading space are trimmed first.
"""
from __future__ import annotations

import re
from typing import Sequence


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
