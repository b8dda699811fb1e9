"""report_builder.figures"""
