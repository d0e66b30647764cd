"""An aggregate view's accumulable state typed by Spark (:class:`StatePlan`): its queries, its SUM and AVG result
types, and which decimal AVGs it shows. :mod:`mvsink.incremental.modes.aggregate` maintains the state and
:mod:`mvsink.incremental.aggmerge` finalises it into the view's columns exactly as Spark's own aggregates compute
them (DESIGN.md section 10: a view holds what Spark computes, whichever mode wrote it).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Any

from mvsink.incremental.statequeries import (
    ARG_COLUMN,
    StateQueries,
    average_sql,
    decimal_type,
    nonnull_column,
    state_queries,
    sum_column,
)

if TYPE_CHECKING:
    import decimal

    from pyspark.sql import DataFrame, SparkSession

    from mvsink.definitions.view import ViewDefinition

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StatePlan:
    """:class:`StateQueries` typed by Spark: the state query's DataFrame and each argument's types."""

    queries: StateQueries
    desired: DataFrame  # the state query (visible columns, then the state columns)
    sum_types: tuple[str | None, ...]  # Spark's SUM result type per argument (None: no sum kept)
    avg_types: tuple[str | None, ...]  # Spark's AVG result type per argument
    input: DataFrame | None = None  # the aggregate's input query, analysed (for its linearity)

    @property
    def state_columns(self) -> tuple[str, ...]:
        return self.queries.state_columns

    @functools.cached_property
    def decimal_averages(self) -> tuple[int, ...]:
        """The arguments whose AVG the view shows and whose AVG is a decimal (finalised exactly as Spark's)."""
        import re

        used = {int(i) for _, e in self.queries.finalise for i in re.findall(r"_mv_final_avg\((\d+)\)", e, re.I)}
        return tuple(i for i in sorted(used) if decimal_type(self.avg_types[i]) is not None)

    def averages(self, *, precision_loss: bool) -> dict[int, tuple[str, decimal.Decimal] | None]:
        """Per decimal AVG shown: Spark SQL over the state giving Spark's AVG exactly and the bound on the sum's
        absolute value below which it is exact, or None (:func:`~mvsink.incremental.statequeries.average_sql`)."""
        return {
            i: average_sql(
                sum_column(i),
                nonnull_column(i),
                sum_type=self.sum_types[i] or "",
                avg_type=self.avg_types[i] or "",
                precision_loss=precision_loss,
            )
            for i in self.decimal_averages
        }


def state_plan(spark: SparkSession, view: ViewDefinition, result: DataFrame) -> StatePlan | str:
    """The view's accumulable state, typed and checked against its result, or why it has none."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    q = state_queries(view.query)
    if isinstance(q, str):
        return q
    try:
        desired = spark.sql(q.state_query)
        inp = spark.sql(q.input_query)
        visible = desired.schema.fields[: len(result.schema.fields)]
        if [(f.name, f.dataType) for f in visible] != [(f.name, f.dataType) for f in result.schema.fields] or [
            f.name for f in desired.schema.fields[len(visible) :]
        ] != list(q.state_columns):
            return "the state query's columns differ from the view's (kept stateless)"
        summed = [i for i, (_, with_sum) in enumerate(q.args) if with_sum]
        for i in summed:
            dt = inp.schema[ARG_COLUMN.format(i)].dataType
            if not isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)):
                return f"a SUM/AVG argument is {dt.simpleString().upper()} (only integers and decimals are exact)"
        for i, _ in q.extremes:
            why = extreme_type_reason(inp.schema[ARG_COLUMN.format(i)].dataType)
            if why:
                return why
        aggs = [f(ARG_COLUMN.format(i)).alias(f"{f.__name__}{i}") for i in summed for f in (F.sum, F.avg)]
        types = inp.agg(*aggs).schema if aggs else None  # analysed only: one plan for every argument
        sum_types = [
            types[f"sum{i}"].dataType.simpleString() if types and i in summed else None for i in range(len(q.args))
        ]
        avg_types = [
            types[f"avg{i}"].dataType.simpleString() if types and i in summed else None for i in range(len(q.args))
        ]
    except PySparkException as exc:
        log.info("view %s: no aggregate state: %s", view.name, exc)
        return "the state queries did not analyse"
    return StatePlan(queries=q, desired=desired, sum_types=tuple(sum_types), avg_types=tuple(avg_types), input=inp)


def extreme_type_reason(dt: Any) -> str | None:
    """Why a MIN/MAX argument of Spark type ``dt`` keeps no state, else None: only types whose order and equality
    are total and the same in Spark, DuckDB and Python (integers, decimals, dates, timestamps, booleans, strings of
    the binary collation). FLOAT/DOUBLE (NaN, -0.0), collated strings, binary and nested types fail closed."""
    from pyspark.sql import types as T

    exact = (
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.DecimalType,
        T.DateType,
        T.TimestampType,
        T.TimestampNTZType,
        T.BooleanType,
    )
    if isinstance(dt, exact) or (isinstance(dt, T.StringType) and dt.simpleString() == "string"):
        return None
    return (
        f"a MIN/MAX argument is {dt.simpleString().upper()} (its order is not the same in Spark, DuckDB and Python; "
        "only integers, decimals, dates, timestamps, booleans and strings of the binary collation are kept)"
    )


def formattable(sql: str) -> str:
    """SQL text with its braces doubled, for ``spark.sql(text, df=...)``, which formats ``{df}`` into it."""
    return sql.replace("{", "{{").replace("}", "}}")
