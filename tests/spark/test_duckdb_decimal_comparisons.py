"""Comparisons Spark makes at a decimal type that rounds one side (TPC-H Q11's HAVING over its intermediate tables:
a DECIMAL(36,2) sum against a DECIMAL(38,6) total, compared at DECIMAL(38,4)), evaluated by DuckDB with Spark's
casts carried into its text (:func:`mvsink.engines.duckdbtext.carried_casts`), against Spark itself: every row of
every comparison, in both orders, as values and as filters, over values at the rounding's edges (halves, negative
halves, values equal only once rounded, NULLs) and random ones."""

from __future__ import annotations

import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvsink.engines.duckdbsql import unsupported
from mvsink.engines.duckdbtext import carried_casts, duckdb_schema, duckdb_sql
from mvsink.plan.read import tree_of_dataframe

pytestmark = pytest.mark.spark

D = Decimal
OPS = ["=", "<", "<=", ">", ">=", "<=>"]


def _rows(seed: int, n: int) -> pa.Table:
    """(rid, a DECIMAL(36,2), b DECIMAL(38,6), c DECIMAL(38,6)): the edges, then random values."""
    edges = [
        (D("1.00"), D("1.000050")),  # b rounds up to a's scale+2: 1.0001 > 1.00
        (D("1.00"), D("1.000049")),  # b rounds to 1.0000: equal to a at DECIMAL(38,4) only
        (D("-1.00"), D("-1.000050")),  # a negative half: away from zero
        (D("-1.00"), D("-1.000049")),
        (D("0.00"), D("-0.000050")),
        (D("0.00"), D("0.000049")),
        (D("12345678901234567890123456789012.34"), D("12345678901234567890123456789012.339950")),
        (D("-12345678901234567890123456789012.34"), D("-12345678901234567890123456789012.340049")),
        (None, D("1.000000")),
        (D("2.00"), None),
        (D("9999999999999999999999999999999999.99"), D("99999999999999999999999999999999.999950")),
    ]
    rng = random.Random(seed)
    rows = list(edges)
    for _ in range(n):
        a = D(rng.randint(-(10**6), 10**6)).scaleb(-2)
        b = a + D(rng.choice([-1, 1]) * rng.choice([0, 49, 50, 51, 99, 100, 150, 5000])).scaleb(-6)
        rows.append((a if rng.random() > 0.05 else None, b if rng.random() > 0.05 else None))
    c = [b for _, b in rows[::-1]]
    return pa.table(
        {
            "rid": pa.array(range(len(rows)), pa.int64()),
            "a": pa.array([a for a, _ in rows], pa.decimal128(36, 2)),
            "b": pa.array([b for _, b in rows], pa.decimal128(38, 6)),
            "c": pa.array(c, pa.decimal128(38, 6)),
        }
    )


@pytest.fixture(scope="module")
def decimals(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("carried") / "t.parquet")
    table = _rows(7, 400)
    pq.write_table(table, path)
    spark.read.parquet(path).createOrReplaceTempView("dc")
    zone = str(spark.conf.get("spark.sql.session.timeZone"))
    return table.cast(duckdb_schema(spark.table("dc").schema, None, zone))


def _duck(table: pa.Table, sql: str) -> list[tuple]:
    con = duckdb.connect()
    try:
        con.register("dc", table)
        return sorted(con.execute(sql).fetchall(), key=repr)
    finally:
        con.close()


def _spark(spark, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("left,right", [("a", "b"), ("b", "a")])
def test_a_rounded_comparison_is_evaluated_by_duckdb_as_by_spark(spark, decimals, op, left, right):
    where = f"SELECT rid FROM dc WHERE {left} {op} {right}"
    value = f"SELECT rid, {left} {op} {right} AS r FROM dc"
    for sql in (where, value):
        tree = tree_of_dataframe(spark.sql(sql))
        assert unsupported(tree) is not None, sql  # (without the casts carried: refused, as before)
        carried = carried_casts(tree, sql)
        assert len(carried) == 1, (sql, carried)
        assert unsupported(tree, carried=carried) is None, sql
        text = duckdb_sql(sql, casts=carried)
        assert "DECIMAL(38, 4)" in text, text
        want, got = _spark(spark, sql), _duck(decimals, text)
        assert got == want, (sql, text, [r for r in got if r not in want][:5], [r for r in want if r not in got][:5])
        assert len(want) > 50  # (the rows compared: not a vacuous filter)


@pytest.mark.parametrize(
    "sql,why",
    [
        # the same pair compared twice: which text comparison is which plan one is not told
        ("SELECT rid FROM dc WHERE a > b OR (a > b AND rid > 3)", "twice"),
        # a comparison of expressions, not of columns: its cast is not carried
        ("SELECT rid FROM dc WHERE a + 0 > b", "expression"),
        # the other operand of the text's comparison is not a column (a qualifier's table aside)
        ("SELECT rid FROM dc WHERE a > b * 1", "expression"),
    ],
)
def test_comparisons_not_matched_one_to_one_stay_refused(spark, decimals, sql, why):
    tree = tree_of_dataframe(spark.sql(sql))
    carried = carried_casts(tree, sql)
    assert unsupported(tree, carried=carried) is not None, (why, carried)


def test_several_rounded_comparisons_each_carried(spark, decimals):
    sql = "SELECT rid, a > c AS r FROM dc WHERE a < b OR b <= a OR a = c"
    tree = tree_of_dataframe(spark.sql(sql))
    carried = carried_casts(tree, sql)
    assert len(carried) == 4, carried
    assert unsupported(tree, carried=carried) is None
    assert _duck(decimals, duckdb_sql(sql, casts=carried)) == _spark(spark, sql)


def test_no_rounding_no_casts_carried(spark, decimals):
    sql = "SELECT rid FROM dc WHERE b > c"  # (the same type: Spark casts nothing)
    tree = tree_of_dataframe(spark.sql(sql))
    assert carried_casts(tree, sql) == {}
    assert unsupported(tree) is None
    assert _duck(decimals, duckdb_sql(sql)) == _spark(spark, sql)
