"""The write step: the job that computes and stages corrections, the runners that start it (in-process, Spark Connect, spark-submit), and explain."""
