"""report_builder.figures: the figures of both papers as data (Altair specs, pure, no torch).

`spec` holds the base types, `registry` collects the paper packages `k21` and `k24` (declarations,
per-section builders, readings), `charts` the chart builders by chart kind shared by both papers,
`snippets` the "not configured" YAML entries, `reported` the paper's numbers and `theme` the one
Altair theme. Statistics live in `report_builder.stats`; paper facts in `report_builder.papers`.
"""
