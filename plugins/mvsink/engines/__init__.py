"""Evaluation outside Spark: the DuckDB connection, Parquet relations, typed Arrow reads, and the DuckDB translation of Spark plans."""
