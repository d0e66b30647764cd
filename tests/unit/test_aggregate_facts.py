"""An aggregate view's state as plain values (incremental/aggfacts.py) and the plan facts kept for refreshes without
Spark (incremental/driverfacts.py): which views Python finalises, its values, and the facts' file format."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from mvsink.incremental.aggfacts import AggregateFacts, finalised_rows, python_finalise, sum_arrow_type
from mvsink.incremental.driverfacts import FORMAT, DriverFacts, term_key
from mvsink.incremental.statequeries import state_queries
from mvsink.plan.joinkeys import Column, Edge

pytestmark = pytest.mark.unit

Q = "SELECT k, count(*) AS n, sum(x) AS s, avg(x) AS a, count(y) AS c, avg(i) AS ai FROM t GROUP BY k"
ARGS = ((True, "decimal(22,2)", "decimal(16,6)"), (False, None, None), (True, "bigint", "double"))
TYPES = {"k": "string", "n": "bigint", "s": "decimal(22,2)", "a": "decimal(16,6)", "c": "bigint", "ai": "double"}


def _finalise(query: str, args=ARGS, types=TYPES):
    q = state_queries(query)
    assert not isinstance(q, str)
    return python_finalise(q.finalise, keys=q.keys, args=args, types=types)


def test_keys_and_bare_count_sum_avg_are_finalised_in_python():
    assert _finalise(Q) == (
        ("k", "key", 0),
        ("n", "count", 0),
        ("s", "sum", 0),
        ("a", "avg", 0),
        ("c", "nonnull", 1),
        ("ai", "avg", 2),
    )


@pytest.mark.parametrize(
    ("query", "types"),
    [
        ("SELECT k, sum(x) * 2 AS s FROM t GROUP BY k", {"k": "string", "s": "decimal(23,2)"}),  # an expression
        ("SELECT k, CAST(sum(x) AS DECIMAL(30,2)) AS s FROM t GROUP BY k", {"k": "string", "s": "decimal(30,2)"}),
        ("SELECT k, sum(x) AS s FROM t GROUP BY k", {"k": "string", "s": "decimal(30,2)"}),  # not SUM's type
        ("SELECT k, sum(x) / count(*) AS r FROM t GROUP BY k", {"k": "string", "r": "decimal(38,6)"}),
    ],
)
def test_anything_else_is_left_to_spark(query, types):
    assert _finalise(query, args=((True, "decimal(22,2)", "decimal(16,6)"),), types=types) is None


def test_a_decimal_avg_spark_computes_through_double_is_left_to_spark():
    # AVG of DECIMAL(p <= 11, s) is DECIMAL(p + 4, s + 4) computed through DOUBLE by Spark's optimizer
    args = ((True, "decimal(17,2)", "decimal(11,6)"),)
    types = {"k": "string", "a": "decimal(11,6)"}
    assert _finalise("SELECT k, avg(x) AS a FROM t GROUP BY k", args=args, types=types) is None


def _facts(*, ansi: bool = True, avg: str = "decimal(16,6)") -> AggregateFacts:
    args = ((True, "decimal(22,2)", avg), (False, None, None), (True, "bigint", "double"))
    fin = _finalise(Q, args=args, types={**TYPES, "a": avg})
    assert fin is not None
    schema = pa.schema(
        [
            ("k", pa.string()),
            ("n", pa.int64()),
            ("s", pa.decimal128(22, 2)),
            ("a", pa.decimal128(*map(int, avg[8:-1].split(",")))),
            ("c", pa.int64()),
            ("ai", pa.float64()),
            ("_mv_agg_count", pa.int64()),
            ("_mv_agg_n0", pa.int64()),
            ("_mv_agg_s0", pa.decimal128(22, 2)),
            ("_mv_agg_n1", pa.int64()),
            ("_mv_agg_n2", pa.int64()),
            ("_mv_agg_s2", pa.int64()),
            ("_mv_time", pa.int64()),
            ("_mv_diff", pa.int64()),
        ]
    )
    columns = tuple(schema.names[:-2])
    return AggregateFacts(("k",), pa.schema([("k", pa.string())]), args, columns, schema, fin, ansi)


def _state(k, count, n0, s0, n1, n2, s2) -> dict:
    return {
        "k": k,
        "_mv_agg_count": count,
        "_mv_agg_n0": n0,
        "_mv_agg_s0": s0,
        "_mv_agg_n1": n1,
        "_mv_agg_n2": n2,
        "_mv_agg_s2": s2,
    }


def test_python_finalises_as_spark_does():
    facts = _facts()
    got = finalised_rows(
        facts,
        [
            _state("a", 3, 3, Decimal("1.00"), 2, 3, 10),
            _state("b", 2, 0, None, 0, 0, None),  # no non-null value: NULL SUM and AVG
            _state(None, 3, 3, Decimal("-2.00"), 3, 2, 1),
        ],
    )
    assert not isinstance(got, str)
    assert got.schema == pa.schema([facts.schema.field(c) for c in facts.columns])
    rows = got.to_pylist()
    assert rows[0] == {
        **_state("a", 3, 3, Decimal("1.00"), 2, 3, 10),
        "n": 3,
        "s": Decimal("1.00"),
        "a": Decimal("0.333333"),  # 1.00 / 3 rounded HALF_UP at scale 6, as Spark's AVG
        "c": 2,
        "ai": 10 / 3,
    }
    assert (rows[1]["s"], rows[1]["a"], rows[1]["ai"], rows[1]["c"], rows[1]["n"]) == (None, None, None, 0, 2)
    assert (rows[2]["a"], rows[2]["ai"]) == (Decimal("-0.666667"), 0.5)  # HALF_UP away from zero


def test_an_avg_that_overflows_its_type_is_null_or_under_ansi_the_full_diff():
    big = _state("a", 1, 1, Decimal("99999999999999999999.99"), 0, 0, None)
    got = finalised_rows(_facts(ansi=True), [big])
    assert isinstance(got, str) and "overflows" in got
    # AVG DECIMAL(16,6) holds 10 integer digits: beyond it Spark's AVG is NULL without ANSI
    assert finalised_rows(_facts(ansi=False), [big]).to_pylist()[0]["a"] is None


def test_sum_types():
    assert sum_arrow_type("bigint") == pa.int64()
    assert sum_arrow_type("decimal(38,4)") == pa.decimal128(38, 4)
    assert sum_arrow_type("double") is None and sum_arrow_type(None) is None


def test_the_facts_file_round_trips():
    facts = DriverFacts(
        key="abc",
        made_at=1_700_000_000_000,
        mode="incremental:aggregate",
        schemas={"t": pa.schema([("x", pa.decimal128(38, 2)), ("k", pa.string())])},
        edges=(Edge(Column("t", "k"), Column("u", "k")),),
        linear_in=("t",),
        terms={term_key(("t",)): 'SELECT 1 AS "_mv_diff"', term_key(("t", "u")): None},
        aggregate=_facts(),
    )
    back = DriverFacts.from_json(facts.to_json())
    assert back == facts
    with pytest.raises(ValueError, match="format"):
        DriverFacts.from_json(facts.to_json().replace(f'"format": {FORMAT}', '"format": 0'))


def test_a_bare_min_or_max_is_finalised_in_python_null_without_values():
    query = "SELECT k, min(d) AS lo, max(d) AS hi, max(d) - min(d) AS span FROM t GROUP BY k"
    q = state_queries(query)
    assert not isinstance(q, str)
    types = {"k": "string", "lo": "date", "hi": "date", "_mv_agg_min0": "date", "_mv_agg_max0": "date"}
    assert python_finalise(q.finalise[:3], keys=q.keys, args=((False, None, None),), types=types) == (
        ("k", "key", 0),
        ("lo", "min", 0),
        ("hi", "max", 0),
    )
    assert _finalise(query, args=((False, None, None),), types={**types, "span": "int"}) is None  # an expression
    # a MIN of another type than its state's: left to Spark
    assert (
        python_finalise(q.finalise[:2], keys=q.keys, args=((False, None, None),), types={**types, "lo": "int"}) is None
    )
    day = datetime.date(2026, 1, 2)
    facts = AggregateFacts(
        keys=("k",),
        key_schema=pa.schema([("k", pa.string())]),
        args=((False, None, None),),
        columns=("k", "lo", "_mv_agg_count", "_mv_agg_n0", "_mv_agg_min0", "_mv_agg_minc0"),
        schema=pa.schema(
            [
                ("k", pa.string()),
                ("lo", pa.date32()),
                ("_mv_agg_count", pa.int64()),
                ("_mv_agg_n0", pa.int64()),
                ("_mv_agg_min0", pa.date32()),
                ("_mv_agg_minc0", pa.int64()),
            ]
        ),
        finalise=(("k", "key", 0), ("lo", "min", 0)),
        ansi=True,
        extremes=((0, "min"),),
    )
    rows = [
        {"k": "a", "_mv_agg_count": 2, "_mv_agg_n0": 2, "_mv_agg_min0": day, "_mv_agg_minc0": 1},
        {"k": "b", "_mv_agg_count": 2, "_mv_agg_n0": 0, "_mv_agg_min0": None, "_mv_agg_minc0": 0},
    ]
    got = finalised_rows(facts, rows)
    assert not isinstance(got, str)
    assert [(r["k"], r["lo"]) for r in got.to_pylist()] == [("a", day), ("b", None)]
    assert AggregateFacts.from_json(facts.to_json()) == facts
