"""What kind of Spark session a value belongs to."""

from __future__ import annotations


def is_connect(obj: object) -> bool:
    """True for a Spark Connect session, DataFrame or column (a client: no JVM, no ``_jdf``, no typed plan);
    False for a classic one."""
    return type(obj).__module__.startswith("pyspark.sql.connect")
