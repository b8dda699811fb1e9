"""The mathematics of the exact decomposition: pure torch, no I/O (norms, attention, feedforward, layer,
layouts, reference).

The notebook function of the same name is ``report_builder.decompose(model, texts, ...)``
(`report_builder.notebook.decompose`, bound by ``report_builder/__init__.py``). Pitfall: keep this
file free of imports — ``import report_builder`` imports this package (to bind the function after
it), and must stay light.
"""
