"""Analyses: one module per analysis (declared in `base.Analysis`), listed in `registry`, planned and
executed by `runner`, assembled into tables by `assemble`, and the torch passes behind them
(`k21_compute`, `k24_compute`). The torch-free statistics they share with the figures are
`report_builder.stats`."""
