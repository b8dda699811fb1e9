"""Tests of report_builder.bench (the user-facing benchmark)."""
