"""The report site: pages, figure assets, the mkdocs build, and publishing the figure versions (`citations/`).

Entry points: `build.render_site` (tables + roles + provenance -> ``site/``) and `serve.serve`.
Pitfall: this package must never import torch — the site is rebuilt from cached tables alone.
"""
