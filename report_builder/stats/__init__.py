"""Torch-free statistics on the tidy result tables and contribution maps, shared by analyses and figures.

K21: `k21` (Tables 2/3/7/8/11, Fig. 3 means), `k21_figures` (the numbers figures derive beyond it).
K24: `maps` (valid pairs, row normalisation, FF-amp), `ctx_change` (1 − Spearman ρ by ranking each map
once), `pair_categories`, `context_snippet`, `top_pairs` (top FF-amplified pairs, base rates),
`res_ln` (norm and LN summaries), `host_stats` (the K24 pass's per-sequence statistics), and
`k24_figures` (the numbers figures derive). `headlines`: the build's headline numbers, for the build
log and every page.

Numpy and pandas only: no torch, no scipy, nothing from the compute stages (analyses import this package,
figures and the site read it). `ranks`: Spearman's ρ, bit for bit as scipy's (so rendering needs no scipy).
"""
