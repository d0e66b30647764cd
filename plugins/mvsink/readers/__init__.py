"""Reading views without Spark: contents and changefeed through Arrow/DuckDB, status, freshness, the overview."""
