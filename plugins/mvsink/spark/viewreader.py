"""Reading a view from Spark: a DataFrame of its consolidated contents as of a time.

Spark cannot load Delta here (no Delta Spark connector, DESIGN.md section 3), so the
DataFrame is built from the Parquet file list that delta-rs resolves at one Delta version
and consolidated by Spark itself (group by every column, sum of ``_mv_diff``, rows
repeated by their multiplicity). Nothing is collected to the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvsink.columns import DIFF, ERROR, TIME, is_hidden
from mvsink.core.checks import check_errors_mode, view_errors, worst_check
from mvsink.core.deltalog import is_delta_table
from mvsink.core.frontier import check_read_time
from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import resolve_view
from mvsink.definitions.view import ViewDefinition
from mvsink.location import Location
from mvsink.times import format_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_view(
    spark: SparkSession,
    view: ViewDefinition | Location | str,
    as_of: int | None = None,
    *,
    views_dir: str | None = None,
    with_diff: bool = False,
    errors: str = "fail",
) -> DataFrame:
    """The view's contents at ``as_of`` (default: its newest final time) as a Spark DataFrame.

    ``view`` is a :class:`ViewDefinition`, a view name (looked up in ``views_dir``), or the path
    (or :class:`~mvsink.location.Location`) of a view's Delta table (then ``as_of`` is checked against its since and upper only). Rows
    appear once per copy; with ``with_diff`` they appear once with their multiplicity in
    ``_mv_diff`` instead. The same times are refused as by ``mvsink read``.

    ``errors`` (views with checks), as in :func:`mvsink.read_view`: ``fail`` runs one small Spark
    aggregate over the error rows and raises :class:`~mvsink.exceptions.ViewErrorsError` if there are
    any (naming the checks and a sample row), else returns the ok rows; ``include`` keeps
    ``_mv_error``; ``ignore`` returns the ok rows only.
    """
    from mvsink.spark.sources import read_delta
    from mvsink.spark.transforms import consolidate, expand

    if isinstance(view, Location):
        table, first = ViewTable.open_path(view), 0
    elif isinstance(view, str) and ("/" in view or is_delta_table(view)):
        table, first = ViewTable.open_path(view), 0
    else:
        v = resolve_view(view, views_dir)
        table, first = ViewTable.open(v).require(), v.as_of
    name, fr = table.name, table.frontier
    t = check_read_time(name, fr, first, as_of)
    df = read_delta(spark, table.path, version=fr.version, role=table.role)
    cols = [c for c in df.columns if c not in (TIME, DIFF) and not is_hidden(c)]
    cons = consolidate(df, cols, through=t)
    if ERROR in cols and errors != "include":
        cons = _without_errors(cons, name, errors, at=format_time(t))
    return cons if with_diff else expand(cons)


def _without_errors(cons: DataFrame, name: str, errors: str, *, at: str) -> DataFrame:
    from pyspark.sql import functions as F

    check_errors_mode(name, errors)
    if errors == "fail":
        bad = cons.where(F.col(ERROR).isNotNull() & (F.col(DIFF) > 0))
        per = {r[ERROR]: int(r["n"]) for r in bad.groupBy(ERROR).agg(F.sum(DIFF).alias("n")).collect()}
        if per:
            row = bad.where(F.col(ERROR) == worst_check(per)).drop(ERROR, DIFF).limit(1).collect()[0]
            raise view_errors(name, per, row.asDict(), at=at)
    return cons.where(F.col(ERROR).isNull()).drop(ERROR)
