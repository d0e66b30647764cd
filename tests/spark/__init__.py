"""A real Spark ``local[2]`` session and real Delta tables, in this process (marker ``spark``)."""
