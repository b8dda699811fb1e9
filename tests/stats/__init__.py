"""Tests of report_builder.stats."""
