"""Query analysis on Spark's analysed plan: the plan as a tree, reading it from a session, linearity, aggregate and top-k splits, join keys."""
