"""Incremental refresh: change terms (linear, telescoped), key pruning, aggregate state, affected groups, top-k, their DuckDB evaluators, and the refresh modes."""
