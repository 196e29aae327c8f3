"""Stress drivers and benchmarks; run from the project root (``python -m stress.bench``)."""
