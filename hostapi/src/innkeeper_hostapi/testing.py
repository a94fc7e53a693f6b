"""testing placeholder"""
