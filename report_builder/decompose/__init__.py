"""The mathematics of the exact decomposition: pure torch, no I/O (norms, attention, feedforward, layer,
reference).

This package is also the notebook API's entry point: calling it, ``report_builder.decompose(model,
texts, ...)``, runs :func:`report_builder.notebook.decompose` (the package and the function share the
name ``report_builder.decompose``, and Python binds a package's submodule as its attribute once the
submodule is imported, so the submodule itself must be the callable). Pitfall: keep this file free of
imports; the call imports the notebook module lazily.
"""
from __future__ import annotations

import sys
import types


class _CallablePackage(types.ModuleType):
    """A module type whose call is :func:`report_builder.notebook.decompose`."""

    def __call__(self, *args, **kwargs):
        from report_builder.notebook import decompose

        return decompose(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
