"""report_builder.analyses"""
