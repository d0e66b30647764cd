"""The driver-side merge of an aggregate's state (old ⊕ Δ) and its checks, without Spark."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from mvsink.incremental.aggfacts import AggregateFacts
from mvsink.incremental.aggmerge import _merge_rows, _sum_limit
from mvsink.incremental.statequeries import state_queries

pytestmark = pytest.mark.unit

Q = "SELECT k, count(*) AS n, sum(x) AS s FROM t GROUP BY k"
STATE = ["_mv_agg_count", "_mv_agg_n0", "_mv_agg_s0"]


def _plan(query: str = Q, sum_type: str = "decimal(4,2)") -> AggregateFacts:
    q = state_queries(query)
    assert not isinstance(q, str)
    args = tuple((with_sum, sum_type if with_sum else None, None) for _, with_sum in q.args)
    schema = pa.schema([])
    return AggregateFacts(q.keys, schema, args, (), schema, None, ansi=False)


def _delta(rows: list[dict[str, object]], *, keyed: bool = True) -> pa.Table:
    fields = [pa.field("k", pa.string())] if keyed else []
    fields += [
        pa.field("_mv_agg_count", pa.int64()),
        pa.field("_mv_agg_n0", pa.int64()),
        pa.field("_mv_agg_s0", pa.decimal128(4, 2)),
        pa.field("_mv_values0", pa.int64()),
    ]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def _old(rows: list[dict[str, object]], *, keyed: bool = True) -> pa.Table:
    fields = [pa.field("k", pa.string())] if keyed else []
    fields += [pa.field("n", pa.int64()), pa.field("s", pa.decimal128(4, 2))]
    fields += [pa.field(c, pa.decimal128(4, 2) if c.endswith("s0") else pa.int64()) for c in STATE]
    fields.append(pa.field("_mv_diff", pa.int64()))
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def _row(k: str | None, n: int, nn: int, s: str | None, diff: int = 1) -> dict[str, object]:
    d = Decimal(s) if s is not None else None
    return {"k": k, "n": n, "s": d, "_mv_agg_count": n, "_mv_agg_n0": nn, "_mv_agg_s0": d, "_mv_diff": diff}


def test_old_plus_delta_per_group_and_dying_groups_disappear():
    delta = _delta(
        [
            {"k": "a", "_mv_agg_count": 2, "_mv_agg_n0": 1, "_mv_agg_s0": Decimal("1.25"), "_mv_values0": 1},
            {"k": None, "_mv_agg_count": -3, "_mv_agg_n0": -3, "_mv_agg_s0": Decimal("-9.00"), "_mv_values0": 3},
            {"k": "new", "_mv_agg_count": 1, "_mv_agg_n0": 0, "_mv_agg_s0": None, "_mv_values0": 0},
        ]
    )
    old = _old([_row("a", 3, 3, "10.00"), _row(None, 3, 3, "9.00")])
    got = _merge_rows(_plan(), delta, old)
    assert not isinstance(got, str)
    rows, n = got
    assert n == 3
    assert rows == [
        {"k": "a", "_mv_agg_count": 5, "_mv_agg_n0": 4, "_mv_agg_s0": Decimal("11.25")},
        {"k": "new", "_mv_agg_count": 1, "_mv_agg_n0": 0, "_mv_agg_s0": None},  # no non-null value: a NULL sum
    ]


def test_a_global_aggregate_keeps_its_row_at_count_zero():
    plan = _plan("SELECT count(*) AS n, sum(x) AS s FROM t")
    delta = _delta(
        [{"_mv_agg_count": -2, "_mv_agg_n0": -2, "_mv_agg_s0": Decimal("-3.00"), "_mv_values0": 2}], keyed=False
    )
    old = _old([{k: v for k, v in _row(None, 2, 2, "3.00").items() if k != "k"}], keyed=False)
    got = _merge_rows(plan, delta, old)
    assert got == ([{"_mv_agg_count": 0, "_mv_agg_n0": 0, "_mv_agg_s0": None}], 1)


@pytest.mark.parametrize(
    "delta,old,why",
    [
        # the table holds two live rows for the group
        (
            {"k": "a", "_mv_agg_count": 1, "_mv_agg_n0": 1, "_mv_agg_s0": Decimal("1.00"), "_mv_values0": 1},
            [_row("a", 1, 1, "1.00"), _row("a", 2, 2, "2.00")],
            "more than one live row",
        ),
        # one row, twice
        (
            {"k": "a", "_mv_agg_count": 1, "_mv_agg_n0": 1, "_mv_agg_s0": Decimal("1.00"), "_mv_values0": 1},
            [_row("a", 1, 1, "1.00", diff=2)],
            "more than one live row",
        ),
        # more rows deleted than the group had
        (
            {"k": "a", "_mv_agg_count": -2, "_mv_agg_n0": -1, "_mv_agg_s0": Decimal("-1.00"), "_mv_values0": 1},
            [_row("a", 1, 1, "1.00")],
            "row count would be negative",
        ),
        # more non-null values than rows
        (
            {"k": "a", "_mv_agg_count": 0, "_mv_agg_n0": 1, "_mv_agg_s0": Decimal("1.00"), "_mv_values0": 1},
            [_row("a", 1, 1, "1.00")],
            "inconsistent",
        ),
        # the change's own sum overflowed (try_sum gave NULL over non-null values)
        (
            {"k": "a", "_mv_agg_count": 1, "_mv_agg_n0": 1, "_mv_agg_s0": None, "_mv_values0": 1},
            [_row("a", 1, 1, "1.00")],
            "overflows",
        ),
        # old + Δ outgrows DECIMAL(4,2)
        (
            {"k": "a", "_mv_agg_count": 1, "_mv_agg_n0": 1, "_mv_agg_s0": Decimal("50.00"), "_mv_values0": 1},
            [_row("a", 1, 1, "50.00")],
            "overflows its type",
        ),
    ],
)
def test_state_that_cannot_be_trusted_takes_the_full_diff(delta, old, why):
    got = _merge_rows(_plan(), _delta([delta]), _old(old))
    assert isinstance(got, str) and why in got, got


def test_sum_limits():
    assert _sum_limit("decimal(4,2)") == Decimal("99.99")
    assert _sum_limit("decimal(38,0)") == Decimal(10) ** 38 - 1
    assert _sum_limit("bigint") == 2**63 - 1
