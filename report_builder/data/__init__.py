"""report_builder.data"""
