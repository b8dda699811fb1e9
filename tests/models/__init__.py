"""Tests of report_builder.models."""
