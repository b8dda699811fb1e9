"""Options of the decomposition that configuration and planning read without torch (`IGOptions`).

Kept out of `feedforward` (which imports torch) so a build whose results are all cached never imports
torch; `feedforward` re-exports it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IGOptions:
    """How IG is computed: ``method`` is ``"closed"`` (default) or ``"numerical"`` with ``steps`` m.

    ``gl_nodes`` per panel and ``gl_span`` (units of |A| per panel, panels a power of two per
    neuron) set the composite Gauss-Legendre rule for gated FFs (see `feedforward._panels`).
    """

    method: str = "closed"
    steps: int = 64
    gl_nodes: int = 16
    gl_span: float = 4.0

    def describe(self) -> str:
        if self.method == "closed":
            return "closed-form"
        return f"numerical-{self.steps}"
