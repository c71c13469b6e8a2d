"""Benchmarks (scripts that print figures; not tests)."""
