"""report_builder: exact token-to-token decomposition of Transformer layers, rendered as a report.

The flow runs one way: config -> models + eval sets -> decompose (torch) -> analyses (tidy tables,
cached) -> figures (Altair specs) -> pages (Jinja -> Markdown) -> mkdocs build -> site/.
"""

__version__ = "0.1.0"

# The public surface. Submodules are not imported here: `schema` and `errors` stay import-light
# (no pandas, no torch) for the render side and for tools.
__all__ = ["__version__", "api", "errors", "schema"]
