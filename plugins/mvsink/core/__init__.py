"""The Spark-free protocol: batch descriptions, the view's table and its commit log, the Delta-log reader, staging, mint, append, refresh."""
