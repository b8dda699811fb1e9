"""Tests of report_builder.analyses."""
