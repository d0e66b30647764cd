"""Keeping a view's table lean: compaction (since), vacuum, staged-batch garbage collection (no Spark)."""
