"""``value IN (subquery)`` as a conjunct of a filter (TPC-H Q20's two INs, and its query over the intermediate table
of its correlated sum), evaluated by DuckDB through the translation where :func:`mvsink.engines.duckdbsql.unsupported`
accepts it, against Spark itself: NULL values, NULLs in the subquery's column, empty subqueries, duplicates, keys of
int, long, string, date and decimal, an IN inside an IN; and the forms it refuses (under NOT or OR, correlated, of
two types, of two columns)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvsink.engines.duckdbsql import unsupported
from mvsink.engines.duckdbtext import duckdb_schema, duckdb_sql
from mvsink.plan.read import tree_of_dataframe

pytestmark = pytest.mark.spark


def _table(rng: random.Random, n: int, *, nulls: float) -> pa.Table:
    def maybe(v):
        return None if rng.random() < nulls else v

    ks = [maybe(rng.randint(-3, 12)) for _ in range(n)]
    return pa.table(
        {
            "rid": pa.array(range(n), pa.int64()),
            "k": pa.array(ks, pa.int32()),
            "kl": pa.array([None if k is None else k * 1_000_000_007 for k in ks], pa.int64()),
            "s": pa.array([maybe(rng.choice(["", "a", "é", "b ", "ü"])) for _ in range(n)], pa.string()),
            "d": pa.array([maybe(dt.date(2020, 1, 1) + dt.timedelta(days=rng.randint(0, 6))) for _ in range(n)]),
            "m": pa.array([maybe(Decimal(rng.randint(-300, 300)).scaleb(-2)) for _ in range(n)], pa.decimal128(9, 2)),
            "q": pa.array([rng.randint(0, 9) for _ in range(n)], pa.int32()),
        }
    )


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    rng = random.Random(11)
    root = tmp_path_factory.mktemp("insub")
    zone = str(spark.conf.get("spark.sql.session.timeZone"))
    out = {}
    for name, n, nulls in (("a", 300, 0.1), ("b", 60, 0.15), ("c", 40, 0.0)):
        table = _table(rng, n, nulls=nulls)
        pq.write_table(table, str(root / f"{name}.parquet"))
        spark.read.parquet(str(root / f"{name}.parquet")).createOrReplaceTempView(name)
        out[name] = table.cast(duckdb_schema(spark.table(name).schema, None, zone))
    return out


def _duck(tables: dict[str, pa.Table], sql: str) -> list[tuple]:
    con = duckdb.connect()
    try:
        for name, t in tables.items():
            con.register(name, t)
        return sorted(con.execute(sql).fetchall(), key=repr)
    finally:
        con.close()


def _spark(spark, sql: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


ACCEPTED = [
    "SELECT rid, k FROM a WHERE k IN (SELECT k FROM b)",  # NULLs on both sides
    "SELECT rid FROM a WHERE k IN (SELECT k FROM b WHERE q > 4) AND q < 7",
    "SELECT rid FROM a WHERE q > 2 AND kl IN (SELECT kl FROM b) AND rid < 250",
    "SELECT rid FROM a WHERE s IN (SELECT s FROM b)",
    "SELECT rid FROM a WHERE d IN (SELECT d FROM c WHERE q < 5)",
    "SELECT rid FROM a WHERE k IN (SELECT q * 1.5 FROM b)",  # both sides cast by Spark to one decimal
    "SELECT rid FROM a WHERE m IN (SELECT m FROM b)",
    "SELECT rid FROM a WHERE k IN (SELECT k FROM b WHERE q > 100)",  # an empty subquery (index 7)
    "SELECT rid FROM a WHERE k IN (SELECT k FROM b WHERE s IN (SELECT s FROM c))",  # nested
    "SELECT a.rid, c.q FROM a, c WHERE a.k = c.k AND a.s IN (SELECT s FROM b WHERE b.q = 3)",
    # Q20's shape over its intermediate: a join in the subquery, an IN in it, a comparison with a decimal
    "SELECT rid FROM c WHERE k IN (SELECT a.k FROM a, b WHERE a.kl IN (SELECT kl FROM c) AND a.k = b.k AND a.q > b.m)",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_an_in_subquery_conjunct_is_evaluated_by_duckdb_as_by_spark(spark, tables, sql):
    tree = tree_of_dataframe(spark.sql(sql))
    assert unsupported(tree) is None, (sql, unsupported(tree))
    want, got = _spark(spark, sql), _duck(tables, duckdb_sql(sql))
    assert got == want, (sql, [r for r in got if r not in want][:5], [r for r in want if r not in got][:5])


def test_the_cases_are_not_vacuous(spark, tables):
    counts = [len(_spark(spark, sql)) for sql in ACCEPTED]
    assert counts[7] == 0 and all(n > 3 for i, n in enumerate(counts) if i != 7), counts
    # NULLs are in play: a value NULL, and a subquery with a NULL in its column
    assert spark.sql("SELECT count(*) FROM a WHERE k IS NULL").first()[0] > 0
    assert spark.sql("SELECT count(*) FROM b WHERE k IS NULL").first()[0] > 0


@pytest.mark.parametrize(
    "sql,why",
    [
        ("SELECT rid FROM a WHERE k NOT IN (SELECT k FROM b)", "NOT IN: null-aware"),
        ("SELECT rid FROM a WHERE q > 8 OR k IN (SELECT k FROM b)", "under OR"),
        ("SELECT rid, k IN (SELECT k FROM b) AS r FROM a", "a value, not a filter"),
        ("SELECT rid FROM a WHERE k IN (SELECT k FROM b WHERE b.q = a.q)", "correlated"),
        ("SELECT rid FROM a WHERE (k, q) IN (SELECT k, q FROM b)", "two columns"),
        ("SELECT rid FROM a WHERE s IN (SELECT k FROM b)", "a string cast to a number"),
        ("SELECT rid FROM a WHERE d IN (SELECT s FROM b)", "a string cast to a date"),
        ("SELECT rid FROM a WHERE k IN (SELECT DISTINCT k FROM b)", "an operator the check does not take"),
    ],
)
def test_other_in_subqueries_stay_refused(spark, tables, sql, why):
    assert unsupported(tree_of_dataframe(spark.sql(sql))) is not None, why
