"""Analyses: one module per analysis (declared in `base.Analysis`), listed in `registry`, planned by
`planning` (run by `report_builder.executors`), assembled into tables by `assemble`; the torch passes
(`k21_compute`, `k24_compute`). The torch-free statistics they share with the figures are
`report_builder.stats`."""
