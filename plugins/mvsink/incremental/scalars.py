"""Uncorrelated scalar subqueries over sources that did not change, evaluated once and written into a query as
literals of their type (:mod:`mvsink.incremental.partitioned`).

A partitioned recompute evaluates the query twice, over the sources as they are and as they were; a scalar
subquery that reads only unchanged sources and refers to nothing outside itself has the same value in both (TPC-H
Q22's ``c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE ...)`` when orders changed). Evaluated once, its
value written in its place (``CAST('4999.998700' AS DECIMAL(19,6))``), the query reads that source only where the
partitioning keys it, so the source is restricted to the changed keys instead of read whole, twice.

Fails closed: a subquery is replaced only when every table it reads is an unchanged source, every column in it
resolves inside it (by the sources' columns, innermost scope first, as SQL resolves them), it selects one column
and returns at most one row (none: NULL), and its value has a type written here exactly (integers, decimals,
booleans, dates, strings without quotes or backslashes, and finite or special doubles and floats).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType
    from sqlglot import exp
    from sqlglot.optimizer.scope import Scope

    from mvsink.incremental.scalarcache import ScalarCache


@dataclasses.dataclass(frozen=True)
class Constants:
    """A query with its constant scalar subqueries replaced (:func:`constant_scalars`): the new text and each
    replaced subquery's text with the literal written for it."""

    query: str
    replaced: tuple[tuple[str, str], ...]


def has_scalar_subquery(query: str) -> bool:
    """Does ``query`` (Spark SQL) have a subquery in an expression other than IN and EXISTS (cheap: the text only)?"""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
    except sqlglot.errors.ParseError:
        return False
    return any(not isinstance(s.parent, (exp.In, exp.Exists, exp.From, exp.Join)) for s in tree.find_all(exp.Subquery))


def constant_candidates(query: str, columns: Mapping[str, set[str]], unchanged: set[str]) -> list[str]:
    """The scalar subqueries of ``query`` (Spark SQL) that read only ``unchanged`` sources and refer to nothing
    outside themselves, as Spark SQL texts; ``columns``: each source's column names (both casefolded)."""
    got = _candidates(query, columns, unchanged)
    return [] if got is None else [s.this.sql(dialect="spark") for s in got[1]]


def constant_scalars(
    spark: SparkSession,
    query: str,
    columns: Mapping[str, set[str]],
    unchanged: set[str],
    *,
    cache: ScalarCache | None = None,
) -> Constants | None:
    """``query`` with each of its :func:`constant_candidates` evaluated by Spark (one job each; or its value kept by
    ``cache`` for the same snapshots, :mod:`mvsink.incremental.scalarcache`) and replaced by its value, or None
    where there is none or one cannot be replaced exactly (more than one row, a type not written here)."""
    got = _candidates(query, columns, unchanged)
    if not got:
        return None
    import sqlglot
    from sqlglot import exp

    tree, found = got
    replaced = []
    for sub in found:
        text = sub.this.sql(dialect="spark")
        tables = [t.name for t in sub.find_all(exp.Table)]
        lit = cache.get(text, tables) if cache is not None else None
        if lit is None:
            lit = evaluated(spark, text)
            if lit is None:
                return None
            if cache is not None:
                cache.put(text, tables, lit)
        replaced.append((text, lit))
        sub.replace(sqlglot.parse_one(lit, dialect="spark"))
    return Constants(tree.sql(dialect="spark"), tuple(replaced))


def evaluated(spark: SparkSession, text: str) -> str | None:
    """The scalar subquery ``text``'s value by Spark, as a literal; None where it has not one column or returns
    more than one row, or its value is not written here exactly."""
    df = spark.sql(text)
    if len(df.schema.fields) != 1:
        return None
    rows = df.limit(2).collect()
    if len(rows) > 1:
        return None
    return literal(rows[0][0] if rows else None, df.schema.fields[0].dataType)


def _candidates(
    query: str, columns: Mapping[str, set[str]], unchanged: set[str]
) -> tuple[Any, list[exp.Subquery]] | None:
    import sqlglot
    from sqlglot import exp
    from sqlglot.optimizer.scope import traverse_scope

    try:
        tree = sqlglot.parse_one(query, dialect="spark")
        scopes = traverse_scope(tree)
    except (sqlglot.errors.ParseError, sqlglot.errors.OptimizeError):
        return None
    if any(True for _ in tree.find_all(exp.CTE)):
        return None
    found: list[exp.Subquery] = []
    for sc in scopes:
        sub = sc.expression.parent
        if not sc.is_subquery or not isinstance(sub, exp.Subquery) or isinstance(sub.parent, (exp.In, exp.Exists)):
            continue
        if not isinstance(sc.expression, exp.Select) or len(sc.expression.selects) != 1:
            continue
        if _constant(sc, columns, unchanged):
            found.append(sub)
    found = [f for f in found if not _inside(f, [g for g in found if g is not f])]
    return (tree, found) if found else None


def _inside(node: exp.Expression, others: list[exp.Subquery]) -> bool:
    """Is ``node`` inside one of the subqueries ``others`` (replaced whole)?"""
    p = node.parent
    while p is not None:
        if any(p is o for o in others):
            return True
        p = p.parent
    return False


def _constant(sc: Scope, columns: Mapping[str, set[str]], unchanged: set[str]) -> bool:
    """Does scope ``sc`` read only ``unchanged`` sources, with every column resolved inside it?"""
    from sqlglot import exp

    inner = list(sc.traverse())
    for s in inner:
        for source in s.sources.values():
            if isinstance(source, exp.Table):
                if source.name.casefold() not in unchanged or source.db or source.catalog:
                    return False
    ids = {id(s) for s in inner}
    for s in inner:
        for c in s.columns:
            if not _resolves(c, s, ids, columns):
                return False
    return True


def _resolves(column: exp.Column, scope: Scope, inside: set[int], columns: Mapping[str, set[str]]) -> bool:
    """Does ``column`` (of ``scope``) resolve to a source of a scope in ``inside`` — the first scope, from its own
    outwards, that has a source of its qualifier (or, unqualified, a source with a column of its name)?"""
    from sqlglot import exp

    name, table = column.name.casefold(), column.table.casefold()
    s: Scope | None = scope
    while s is not None:
        for alias, source in s.sources.items():
            if table:
                hit = alias.casefold() == table
            elif isinstance(source, exp.Table):
                hit = name in columns.get(source.name.casefold(), set())
            else:  # a derived table's outputs
                hit = name in _outputs(source)
            if hit:
                return id(s) in inside
        if not table and name in _outputs(s) and s is scope:
            # (an alias of this SELECT, e.g. in its ORDER BY or HAVING)
            return id(s) in inside
        s = s.parent
    return False


def _outputs(scope: Any) -> set[str]:
    """The column names a scope's SELECT gives (casefolded)."""
    return {str(n).casefold() for n in getattr(scope.expression, "named_selects", [])}


def literal(value: Any, dtype: DataType) -> str | None:
    """``value`` (as Spark collected it) as a Spark SQL literal of type ``dtype``, or None where this writes no
    exact one."""
    from pyspark.sql import types as T

    sql_type = _sql_type(dtype)
    if sql_type is None:
        return None
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(dtype, T.BooleanType):
        return "TRUE" if value else "FALSE"
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return f"CAST({int(value)} AS {sql_type})"
    if isinstance(dtype, T.DecimalType):
        if not isinstance(value, Decimal) or not value.is_finite():
            return None
        return f"CAST('{format(value, 'f')}' AS {sql_type})"
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        f = float(value)
        text = "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity") if math.isinf(f) else repr(f)
        return f"CAST('{text}' AS {sql_type})"
    if isinstance(dtype, T.DateType):
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            return None
        return f"DATE '{value.isoformat()}'"
    if isinstance(dtype, T.StringType):
        if not isinstance(value, str) or any(ch in value for ch in "\\'\"") or dtype.collation != "UTF8_BINARY":
            return None
        return f"CAST('{value}' AS STRING)"
    return None


def _sql_type(dtype: DataType) -> str | None:
    from pyspark.sql import types as T

    plain = {
        T.BooleanType: "BOOLEAN",
        T.ByteType: "TINYINT",
        T.ShortType: "SMALLINT",
        T.IntegerType: "INT",
        T.LongType: "BIGINT",
        T.DoubleType: "DOUBLE",
        T.FloatType: "FLOAT",
        T.DateType: "DATE",
        T.StringType: "STRING",
    }
    for cls, name in plain.items():
        if type(dtype) is cls:
            return name
    if isinstance(dtype, T.DecimalType):
        return f"DECIMAL({dtype.precision},{dtype.scale})"
    return None
