"""report_builder: exact token-to-token decomposition of Transformer layers, rendered as a report.

The flow runs one way: config -> models + eval sets -> decompose (torch) -> analyses (tidy tables,
cached) -> figures (Altair specs) -> pages (Jinja -> Markdown) -> mkdocs build -> site/.
"""

__version__ = "0.1.0"
