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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mvsink.exceptions import MvSinkError, QueryError, ViewErrorsError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, Observation

    from mvsink.definitions.view import ViewDefinition

ERROR = "_mv_error"
ERRORS_MODES = ("fail", "include", "ignore")
_DROP = "_mv_chk_drop"
_FAIL = "_mv_chk_"

# counts as recorded in commit info and reports: {check name: {"action": ..., "rows": n}}
CheckCounts = dict[str, dict[str, Any]]


# ---------------------------------------------------------------- Spark side

def validate_checks(view: ViewDefinition, result: DataFrame) -> None:
    """Every check must analyse over the query's result as a deterministic per-row boolean."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from mvsink.spark.job import _first_paragraph

    for c in view.checks:
        where = f"view {view.name}: check '{c.name}' ({c.expr})"
        try:
            e = F.expr(c.expr)
            probe = result.select(e.alias("ok"))
            dtype = probe.schema["ok"].dataType
            if isinstance(dtype, (T.BooleanType, T.NullType)):
                _ = result.where(e).schema  # refuses aggregates, windows and generators
        except PySparkException as exc:
            raise QueryError(f"{where} does not analyse over the query's columns {result.columns}: "
                             f"{_first_paragraph(exc).split(chr(10))[0].rstrip(';')}. Fix: correct `expr` of the "
                             f"check in {view.file or 'the view file'}; it sees the query's result columns "
                             "only.") from None
        if not isinstance(dtype, (T.BooleanType, T.NullType)):
            raise QueryError(f"{where} is of type {dtype.simpleString()}, not boolean. Fix: write a condition "
                             "that is true for good rows, e.g. qty > 0.")
        try:
            deterministic = bool(probe._jdf.queryExecution().analyzed().deterministic())
        except Exception:  # Spark Connect: the lexical check at parse time still applies
            deterministic = True
        if not deterministic:
            raise QueryError(f"{where} is not deterministic. Fix: make the check a function of the row.")


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


def apply_checks(df: DataFrame, view: ViewDefinition, *, with_error: bool, weight: str | None = None,
                 observation: Observation | None = None) -> DataFrame:
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


def counts_of(view: ViewDefinition, metrics: Mapping[str, Any]) -> CheckCounts:
    """Observation metrics -> ``{check: {"action": ..., "rows": n}}``."""
    return {c.name: {"action": c.action, "rows": int(metrics.get(f"check_{i}") or 0)}
            for i, c in enumerate(view.checks)}


def add_counts(view: ViewDefinition, base: Mapping[str, Any], delta: CheckCounts) -> CheckCounts | None:
    """Totals = the last refresh's totals + the change's signed counts (None if ``base`` lacks a check)."""
    out: CheckCounts = {}
    for c in view.checks:
        b = base.get(c.name)
        if not isinstance(b, dict) or b.get("action") != c.action:
            return None
        out[c.name] = {"action": c.action, "rows": int(b.get("rows", 0)) + int(delta[c.name]["rows"])}
    return out


def format_counts(counts: Mapping[str, Any]) -> str:
    """``positive_qty: 2 errors, test_rows: 1 dropped, big_qty: 3 warned``."""
    words = {"error": "error row(s)", "drop": "dropped", "warn": "warned"}
    return ", ".join(f"{name}: {c.get('rows', 0)} {words.get(c.get('action', ''), 'rows')}"
                     for name, c in counts.items())


# ---------------------------------------------------------------- readers

def worst_check(per: dict[str, int]) -> str:
    """The check with the most error rows (ties: by name)."""
    return sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def view_errors(view_name: str, per: dict[str, int], sample: dict[str, Any], *, at: str = "") -> ViewErrorsError:
    """The error a read raises when the contents hold error rows (``per``: rows per check)."""
    first = worst_check(per)
    sample_text = ", ".join(f"{k}={v!r}" for k, v in sample.items())
    if len(sample_text) > 300:
        sample_text = sample_text[:297] + "..."
    when = f" at {at}" if at else ""
    ordered = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))
    checks = ", ".join(f"'{name}' ({n} row(s))" for name, n in ordered)
    return ViewErrorsError(
        f"view {view_name}{when}: {sum(per.values())} row(s) failed error checks: {checks}; e.g. row "
        f"({sample_text}) failed check '{first}'. Fix: correct the source rows (the next refresh removes "
        "the errors), or read with errors='include' (--errors include) to get them with their _mv_error, "
        "or errors='ignore' (--errors ignore) to read only the ok rows.",
        counts=dict(per), sample=sample, check=first)


def split_errors(view_name: str, table: pa.Table, errors: str = "fail", *, at: str = "") -> pa.Table:
    """Contents (rows already expanded) -> what a reader asked for.

    ``fail`` (default): the ok rows, without ``_mv_error``; raise :class:`ViewErrorsError`
    naming the checks and a sample row if there is any error row. ``include``: every row, with
    ``_mv_error`` (NULL on ok rows; added as NULL for a table without checks). ``ignore``: the
    ok rows only, without ``_mv_error``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if errors not in ERRORS_MODES:
        raise MvSinkError(f"view {view_name}: errors={errors!r} is not one of {list(ERRORS_MODES)}. "
                          "Fix: pass errors='fail' (default), 'include' or 'ignore'.")
    if ERROR not in table.column_names:
        if errors == "include":
            return table.append_column(pa.field(ERROR, pa.string()), pa.nulls(table.num_rows, pa.string()))
        return table
    if errors == "include":
        return table
    bad = pc.is_valid(table.column(ERROR))
    n_bad = pc.sum(bad).as_py() or 0
    if n_bad and errors == "fail":
        err_rows = table.filter(bad)
        per = {r[ERROR]: int(r["count_all"]) for r in err_rows.group_by(ERROR).aggregate([([], "count_all")]).to_pylist()}
        first = worst_check(per)
        of_first = err_rows.filter(pc.equal(err_rows.column(ERROR), first))
        raise view_errors(view_name, per, of_first.slice(0, 1).drop_columns([ERROR]).to_pylist()[0], at=at)
    return table.filter(pc.invert(bad)).drop_columns([ERROR])
