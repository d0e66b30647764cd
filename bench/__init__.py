"""Benchmarks and the concurrency soak; `python -m bench.soak` runs from the repository root."""
