"""Pure chart builders shared by the K21 and K24 figures, by chart kind: ``DataFrame -> alt.Chart``.

Modules: `data` (inline data, field escaping, 1-based layer display), `heatmap` (annotated and lift
heatmaps), `token_maps` (token-to-token maps: K21 Fig. 1 panels, K24 scope strips and explorer),
`lines` (a value per layer), `points` (scatter plots), `bars` (grouped share bars), `diagrams`
(layer and attention-block diagrams). No I/O, no torch; every builder uses the one registered theme.

Pitfall: a builder's output is hashed into the figure's citation; changing any mark, encoding or
data layout changes every hash that uses it, so add a parameter instead of changing a default.
"""
