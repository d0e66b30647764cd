"""Pure DataFrame -> DataFrame transformations of the write step (no I/O).

``consolidate`` sums diffs per row, ``corrections`` turns persisted contents into desired ones,
``expand`` repeats rows by their multiplicity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvsink.columns import DIFF, TIME

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def quote_name(name: str) -> str:
    """A column name as a Spark SQL identifier (backticks, a backtick doubled)."""
    return "`" + name.replace("`", "``") + "`"


def null_safe_match(left: DataFrame, right: DataFrame, pairs: list[tuple[str, str]]) -> Column:
    """``left.a <=> right.b AND ...`` for each (a, b) of ``pairs`` (at least one): keys that may be NULL."""
    import functools

    if not pairs:
        raise ValueError("null_safe_match needs at least one pair of columns")
    return functools.reduce(
        lambda x, y: x & y, [left[quote_name(a)].eqNullSafe(right[quote_name(b)]) for a, b in pairs]
    )


def consolidate(
    updates: DataFrame, columns: list[str], *, before: int | None = None, through: int | None = None
) -> DataFrame:
    """Sum ``_mv_diff`` per row over updates with ``time < before`` / ``time <= through``; drop zeros."""
    from pyspark.sql import functions as F

    df = updates
    if before is not None:
        df = df.where(F.col(TIME) < F.lit(before))
    if through is not None:
        df = df.where(F.col(TIME) <= F.lit(through))
    return df.groupBy(*columns).agg(F.sum(DIFF).cast("bigint").alias(DIFF)).where(F.col(DIFF) != 0)


def corrections(desired: DataFrame, persisted: DataFrame, *, time: int) -> DataFrame:
    """Updates at ``time`` that turn ``persisted`` (consolidated, with ``_mv_diff``) into ``desired``.

    Union + group-by over all columns: NULLs group together, duplicates are counted, and
    damaged persisted state (negative or spurious multiplicities) is repaired.
    """
    from pyspark.sql import functions as F

    columns = desired.columns
    plus = desired.select(*columns, F.lit(1).cast("bigint").alias(DIFF))
    minus = persisted.select(*columns, (-F.col(DIFF)).alias(DIFF))
    return (
        plus.unionByName(minus)
        .groupBy(*columns)
        .agg(F.sum(DIFF).cast("bigint").alias(DIFF))
        .where(F.col(DIFF) != 0)
        .select(*columns, F.lit(time).cast("bigint").alias(TIME), DIFF)
    )


def expand(consolidated: DataFrame) -> DataFrame:
    """Rows of a consolidated update set, each repeated by its (positive) multiplicity."""
    from pyspark.sql import functions as F

    columns = [c for c in consolidated.columns if c not in (DIFF, TIME)]
    return (
        consolidated.where(F.col(DIFF) > 0)
        .select(*columns, F.explode(F.sequence(F.lit(1).cast("bigint"), F.col(DIFF))).alias("_mv_n"))
        .drop("_mv_n")
    )
