"""Citations: what a published figure is and how it is verified (versions and permalinks, history,
recipe and provenance, `reproduce`, `diff`).

Everything but `reproduce` sits below `site/` (the site build publishes versions through it);
`reproduce` sits above it (it plans, runs and draws one figure through analyses, executors and site).
"""
