"""report_builder.decompose"""
