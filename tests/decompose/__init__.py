"""Tests of report_builder.decompose."""
