"""Pure DataFrame -> DataFrame transformations of the write step (no I/O).

``consolidate`` sums diffs per row, ``corrections`` turns persisted contents into desired ones,
``expand`` repeats rows by their multiplicity, ``view_contents`` reads an upstream view's rows from its updates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvsink.columns import DIFF, ERROR, TIME, is_hidden

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
    """Updates at ``time`` that turn ``persisted`` (rows with ``_mv_diff``: consolidated, or a table's raw updates,
    several per row) into ``desired``.

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


def visible_columns(columns: list[str]) -> list[str]:
    """The columns of an upstream view's table that make a row: its own and ``_mv_error`` (not the hidden state)."""
    return [c for c in columns if c not in (TIME, DIFF) and not is_hidden(c)]


def view_rows(consolidated: DataFrame, *, expand_rows: bool) -> DataFrame:
    """An upstream view's consolidated updates -> its ok rows (``_mv_error`` dropped), repeated by their
    multiplicity (``expand_rows``), else kept with their ``_mv_diff``."""
    from pyspark.sql import functions as F

    df = consolidated
    if ERROR in df.columns:  # a view reads another view's ok collection
        df = df.where(F.col(ERROR).isNull()).drop(ERROR)
    return expand(df) if expand_rows else df


def view_contents(updates: DataFrame, *, through: int | None = None, expand_rows: bool = True) -> DataFrame:
    """An upstream view's updates (its table's rows, ``through`` a time if given) -> its ok rows: consolidated
    over the columns a read sees (:func:`visible_columns`), then :func:`view_rows`."""
    return view_rows(consolidate(updates, visible_columns(updates.columns), through=through), expand_rows=expand_rows)
