"""An aggregate view's rows and state as DuckDB computes them for the full diff (incremental/duckdbagg.py), against
Python's reference of Spark's semantics (no Spark: the differential runs against Spark are
tests/spark/test_full_diff_duckdb_aggregates.py): AVG of decimals rounded HALF_UP at scale s + 4 as
:func:`~mvsink.incremental.statequeries.decimal_average` computes it (ties, signs), SUM/COUNT/MIN/MAX with NULLs,
the extremes' multiplicities capped, a global aggregate over no rows, a SUM that might overflow raising, and the
refusals."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from mvsink.engines.duckdbtext import duckdb_sql
from mvsink.incremental.duckdbagg import aggregate_refused, state_sql
from mvsink.incremental.statequeries import MULTIPLICITY_CAP, StateQueries, decimal_average, state_queries

pytestmark = pytest.mark.unit

QUERY = (
    "SELECT g, count(*) AS n, count(x) AS nx, sum(x) AS s, avg(x) AS a, min(x) AS lo, max(d) AS hi, max(t) AS top "
    "FROM src GROUP BY g"
)
SUM_TYPES = ("decimal(28,2)", None, None)  # x: DECIMAL(18,2); d, t: MIN/MAX only
AVG_TYPES = ("decimal(22,6)", None, None)
SOURCE = pa.schema([("g", pa.string()), ("x", pa.decimal128(38, 2)), ("d", pa.int32()), ("t", pa.string())])


def _queries(query: str = QUERY) -> StateQueries:
    q = state_queries(query)
    assert not isinstance(q, str), q
    return q


def _run(rows: list[dict[str, Any]], *, query: str = QUERY, with_state: bool = True) -> list[dict[str, Any]]:
    q = _queries(query)
    con = duckdb.connect()
    con.register("src", pa.Table.from_pylist(rows, schema=SOURCE))
    sql = state_sql(q, duckdb_sql(q.input_query), sum_types=SUM_TYPES, avg_types=AVG_TYPES, with_state=with_state)
    return con.sql(sql).to_arrow_table().to_pylist()


def _reference(rows: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Spark's values per group, from Python (AVG: decimal_average, the state's rule)."""
    out: dict[Any, dict[str, Any]] = {}
    for g in {r["g"] for r in rows}:
        grp = [r for r in rows if r["g"] == g]
        xs = [r["x"] for r in grp if r["x"] is not None]
        ds = [r["d"] for r in grp if r["d"] is not None]
        ts = [r["t"] for r in grp if r["t"] is not None]
        total = sum(xs, Decimal(0)) if xs else None
        out[g] = {
            "n": len(grp),
            "nx": len(xs),
            "s": total,
            "a": decimal_average(total, len(xs), precision=22, scale=6) if total is not None else None,
            "lo": min(xs) if xs else None,
            "hi": max(ds) if ds else None,
            "top": max(ts, key=lambda v: v.encode()) if ts else None,  # (binary order)
            "_mv_agg_minc0": min(MULTIPLICITY_CAP, xs.count(min(xs))) if xs else 0,
        }
    return out


@pytest.mark.parametrize("seed", range(4))
def test_random_groups_equal_sparks_rules(seed: int) -> None:
    rng = random.Random(seed)
    values = [Decimal("0.01"), Decimal("-0.01"), Decimal("0.05"), Decimal("-7.35"), Decimal("99999999.99"), None]
    rows = [
        {
            "g": rng.choice(["a", "b", "ü", "Z", None]),
            "x": rng.choice(values) if rng.random() < 0.8 else Decimal(rng.randint(-(10**8), 10**8)) / 100,
            "d": rng.choice([1, -3, None]),
            "t": rng.choice(["a", "B", "é", None]),
        }
        for _ in range(rng.randint(1, 200))
    ]
    got = {r["g"]: r for r in _run(rows)}
    want = _reference(rows)
    assert set(got) == set(want)
    for g, w in want.items():
        for c, v in w.items():
            assert got[g][c] == v, (g, c, got[g][c], v)


def test_average_ties_round_half_up_away_from_zero() -> None:
    # 0.01 / 32 = 0.0003125 (a tie at scale 6: up to 0.000313); the same negated (-0.000313); 0.01 / 3 (0.003333)
    for xs, want in (
        ([Decimal("0.01")] + [Decimal(0)] * 31, Decimal("0.000313")),
        ([Decimal("-0.01")] + [Decimal(0)] * 31, Decimal("-0.000313")),
        ([Decimal("0.01"), Decimal(0), Decimal(0)], Decimal("0.003333")),
        ([Decimal("0.02"), Decimal(0), Decimal(0)], Decimal("0.006667")),
    ):
        got = _run([{"g": "a", "x": x, "d": None, "t": None} for x in xs])
        assert got[0]["a"] == want, (xs[0], got[0]["a"])
        assert got[0]["a"] == decimal_average(sum(xs, Decimal(0)), len(xs), precision=22, scale=6)


def test_multiplicity_is_capped_and_the_visible_columns_come_first() -> None:
    rows = [{"g": "a", "x": Decimal("1.00"), "d": 1, "t": "x"}] * (MULTIPLICITY_CAP + 6)
    got = _run(rows)[0]
    assert got["_mv_agg_minc0"] == MULTIPLICITY_CAP and got["_mv_agg_count"] == MULTIPLICITY_CAP + 6
    assert list(got)[:8] == ["g", "n", "nx", "s", "a", "lo", "hi", "top"]
    assert list(got)[8:] == list(_queries().state_columns)
    assert list(_run(rows, with_state=False)[0]) == ["g", "n", "nx", "s", "a", "lo", "hi", "top"]


def test_a_global_aggregate_over_no_rows_is_one_row_of_nulls_and_zeros() -> None:
    got = _run([], query="SELECT count(*) AS n, sum(x) AS s, avg(x) AS a, min(x) AS lo FROM src")
    assert got == [
        {
            "n": 0,
            "s": None,
            "a": None,
            "lo": None,
            "_mv_agg_count": 0,
            "_mv_agg_n0": 0,
            "_mv_agg_s0": None,
            "_mv_agg_min0": None,
            "_mv_agg_minc0": 0,
        }
    ]


def test_a_sum_that_might_overflow_sparks_type_raises() -> None:
    big = Decimal("6" * 26 + ".00")  # the sum is 1.00, its absolute values sum past DECIMAL(28,2): refused
    rows = [{"g": "a", "x": x, "d": None, "t": None} for x in (big, Decimal(f"-{big}"), Decimal("1.00"))]
    with pytest.raises(duckdb.InvalidInputException, match="a SUM might overflow the Spark type decimal"):
        _run(rows)


@pytest.mark.parametrize(
    ("query", "avg", "why"),
    [
        ("SELECT g, avg(x) AS a FROM src GROUP BY g", "decimal(13,6)", "an AVG of a DECIMAL of 9 digits"),
        ("SELECT g, avg(d) AS a FROM src GROUP BY g", "double", "Spark's AVG of integers is a DOUBLE"),
        ("SELECT g, sum(x) + 1 AS s FROM src GROUP BY g", "decimal(22,6)", "is not a grouping key or a bare"),
        ("SELECT g, avg(x) * 2 AS a FROM src GROUP BY g", "decimal(22,6)", "is not a grouping key or a bare"),
    ],
)
def test_refusals(query: str, avg: str, why: str) -> None:
    q = _queries(query)
    types = {"g": "string", "a": avg, "s": "decimal(29,2)"}
    got = aggregate_refused(q, sum_types=("decimal(28,2)",), avg_types=(avg,), types=types)
    assert got is not None and why in got, got


def test_bare_aggregates_are_accepted() -> None:
    types = {"g": "string", "n": "bigint", "nx": "bigint", "s": "decimal(28,2)", "a": "decimal(22,6)"}
    types |= {"lo": "decimal(18,2)", "hi": "int", "top": "string"}
    types |= {"_mv_agg_min0": "decimal(18,2)", "_mv_agg_max1": "int", "_mv_agg_max2": "string"}
    assert aggregate_refused(_queries(), sum_types=SUM_TYPES, avg_types=AVG_TYPES, types=types) is None
