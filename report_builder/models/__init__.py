"""report_builder.models"""
