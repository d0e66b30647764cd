"""End to end through subprocesses: the CLI via spark-submit or Spark Connect, the demo, the soak."""
