"""Metrics and robustness aggregation."""
