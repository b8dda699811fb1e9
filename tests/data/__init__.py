"""Tests of report_builder.data."""
