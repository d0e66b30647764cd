"""Declared row checks: the view's ok and err collections (DESIGN §1 "ok / err streams").

A view file may declare ``checks`` (see :class:`mvsink.definitions.view.Check`). Semantics, per row of
the query's result (a row *fails* a check unless its expression is TRUE; NULL fails):

1. ``drop`` checks: a row failing any of them is left out of the view, counted under the
   first one it fails (file order);
2. ``error`` checks, on the rows left: a row failing any of them is an *error row*: it is
   kept in the table with its columns as they are and ``_mv_error`` = the name of the first
   error check it fails; it is corrected like any other row, so fixing the source retracts
   it at the next refresh;
3. ``warn`` checks, on the ok rows (neither dropped nor errors): counted, each independently.

Every row of a view with checks carries ``_mv_error`` (NULL on ok rows). The check step is a
per-row projection and filter, so it commutes with union and with signs: the incremental
path applies it to its signed change terms and gets the same corrections as the full diff.

Counts are totals over the desired contents at the refresh time (rows dropped, error rows,
rows warned, per check), computed inside the Spark job with an Observation, never by
collecting rows. The incremental path, which never computes all of desired, adds the signed
counts of its change terms to the totals the last refresh recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mvsink.columns import ERROR
from mvsink.exceptions import QueryError
from mvsink.spark.session import is_connect

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation

    from mvsink.definitions.view import ViewDefinition

_DROP = "_mv_chk_drop"
_FAIL = "_mv_chk_"


def validate_checks(view: ViewDefinition, result: DataFrame) -> None:
    """Every check must analyse over the query's result as a deterministic per-row boolean."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from mvsink.spark.messages import first_paragraph

    for c in view.checks:
        where = f"view {view.name}: check '{c.name}' ({c.expr})"
        try:
            e = F.expr(c.expr)
            probe = result.select(e.alias("ok"))
            dtype = probe.schema["ok"].dataType
            if isinstance(dtype, (T.BooleanType, T.NullType)):
                _ = result.where(e).schema  # refuses aggregates, windows and generators
        except PySparkException as exc:
            raise QueryError(
                f"{where} does not analyse over the query's columns {result.columns}: "
                f"{first_paragraph(exc).split(chr(10))[0].rstrip(';')}. Fix: correct `expr` of the "
                f"check in {view.file or 'the view file'}; it sees the query's result columns "
                "only."
            ) from None
        if not isinstance(dtype, (T.BooleanType, T.NullType)):
            raise QueryError(
                f"{where} is of type {dtype.simpleString()}, not boolean. Fix: write a condition "
                "that is true for good rows, e.g. qty > 0."
            )
        if plan_deterministic(probe) is False:  # None (a Connect server without the plugin): the lexical check applies
            raise QueryError(f"{where} is not deterministic. Fix: make the check a function of the row.")


def plan_deterministic(df: DataFrame) -> bool | None:
    """Whether ``df``'s analysed plan is deterministic (Spark's own ``analyzed.deterministic``); over Spark Connect
    from mvsink's server plugin (:mod:`mvsink.spark.connectplan`), None where the server has none.

    Then only the lexical check made when the view file is parsed applies. Any other failure to read the plan
    propagates: it must not pass for "deterministic".
    """
    if is_connect(df):
        from mvsink.spark.connectplan import analyzed_plan

        got = analyzed_plan(df)
        return None if got is None else got[1]
    return bool(df._jdf.queryExecution().analyzed().deterministic())


def check_metrics(view: ViewDefinition, weight: str | None = None) -> list[Column]:
    """Aggregates (one per check, named ``check_<i>``) over a flagged frame: rows counted by each check."""
    from pyspark.sql import functions as F

    w = F.col(weight) if weight else F.lit(1)
    kept = F.col(_DROP).isNull()
    ok = kept & F.col(ERROR).isNull()
    out = []
    for i, c in enumerate(view.checks):
        if c.action == "drop":
            cond = F.col(_DROP) == F.lit(c.name)
        elif c.action == "error":
            cond = kept & (F.col(ERROR) == F.lit(c.name))
        else:
            cond = ok & F.col(f"{_FAIL}{i}")
        out.append(F.coalesce(F.sum(F.when(cond, w)), F.lit(0)).cast("bigint").alias(f"check_{i}"))
    return out


def apply_checks(
    df: DataFrame,
    view: ViewDefinition,
    *,
    with_error: bool,
    weight: str | None = None,
    observation: Observation | None = None,
) -> DataFrame:
    """The query's result with the checks applied: dropped rows removed, ``_mv_error`` added.

    ``df`` is the query's result (plus ``weight``, a signed multiplicity column, in the
    incremental path, which is kept). ``with_error``: add ``_mv_error`` (NULL when nothing
    fails). ``observation`` receives :func:`check_metrics` when the frame is computed.
    """
    from pyspark.sql import functions as F

    user = [c for c in df.columns if c != weight]
    tail = [weight] if weight else []
    if not view.checks:
        if not with_error:
            return df
        return df.select(*user, F.lit(None).cast("string").alias(ERROR), *tail)

    def first_failing(action: str) -> Column:
        whens = [F.when(F.col(f"{_FAIL}{i}"), F.lit(c.name)) for i, c in enumerate(view.checks) if c.action == action]
        return F.coalesce(*whens, F.lit(None).cast("string")) if whens else F.lit(None).cast("string")

    fails = [(~F.coalesce(F.expr(c.expr), F.lit(False))).alias(f"{_FAIL}{i}") for i, c in enumerate(view.checks)]
    flagged = df.select("*", *fails)
    flagged = flagged.select("*", first_failing("drop").alias(_DROP), first_failing("error").alias(ERROR))
    if observation is not None:
        flagged = flagged.observe(observation, *check_metrics(view, weight))
    out = flagged.where(F.col(_DROP).isNull())
    return out.select(*user, *([ERROR] if with_error else []), *tail)
