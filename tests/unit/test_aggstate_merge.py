"""The driver-side merge of an aggregate's state (old ⊕ Δ) and its checks, without Spark."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from mvsink.incremental.aggfacts import AggregateFacts
from mvsink.incremental.aggmerge import EXHAUSTED, _merge_rows, _sum_limit, merge_extreme
from mvsink.incremental.statequeries import MULTIPLICITY_CAP, state_queries

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


# ---------------------------------------------------------------- MIN and MAX

MM = "SELECT k, min(x) AS lo, max(x) AS hi FROM t GROUP BY k"
MM_STATE = ["_mv_agg_count", "_mv_agg_n0", "_mv_agg_max0", "_mv_agg_maxc0", "_mv_agg_min0", "_mv_agg_minc0"]


def _mm_facts() -> AggregateFacts:
    q = state_queries(MM)
    assert not isinstance(q, str) and q.extremes == ((0, "max"), (0, "min"))
    assert q.state_columns == tuple(MM_STATE)
    schema = pa.schema([])
    return AggregateFacts(q.keys, schema, ((False, None, None),), (), schema, None, ansi=False, extremes=q.extremes)


def _mm_table(rows: list[dict[str, object]], *, old: bool) -> pa.Table:
    fields = [pa.field("k", pa.string())]
    if old:
        fields += [pa.field("lo", pa.int32()), pa.field("hi", pa.int32())]
    for c in MM_STATE:
        fields.append(pa.field(c, pa.int32() if c in ("_mv_agg_min0", "_mv_agg_max0") else pa.int64()))
    fields.append(pa.field("_mv_diff", pa.int64()) if old else pa.field("_mv_values_unused", pa.int64()))
    full = [{f.name: r.get(f.name) for f in fields} for r in rows]
    return pa.Table.from_pylist(full, schema=pa.schema(fields))


def _mm_old(k: str, n: int, lo: tuple[int, int] | None, hi: tuple[int, int] | None) -> dict[str, object]:
    return {
        "k": k,
        "lo": lo and lo[0],
        "hi": hi and hi[0],
        "_mv_agg_count": n,
        "_mv_agg_n0": n,
        "_mv_agg_min0": lo and lo[0],
        "_mv_agg_minc0": lo[1] if lo else 0,
        "_mv_agg_max0": hi and hi[0],
        "_mv_agg_maxc0": hi[1] if hi else 0,
        "_mv_diff": 1,
    }


def _mm_delta(k: str, n: int, lo: tuple[int, int] | None, hi: tuple[int, int] | None) -> dict[str, object]:
    return {
        "k": k,
        "_mv_agg_count": n,
        "_mv_agg_n0": n,
        "_mv_agg_min0": lo and lo[0],
        "_mv_agg_minc0": lo and lo[1],
        "_mv_agg_max0": hi and hi[0],
        "_mv_agg_maxc0": hi and hi[1],
    }


def _mm_merge(old: list[dict[str, object]], delta: list[dict[str, object]]) -> object:
    got = _merge_rows(_mm_facts(), _mm_table(delta, old=False), _mm_table(old, old=True))
    if isinstance(got, str):
        return got
    return [(r["k"], r["_mv_agg_min0"], r["_mv_agg_minc0"], r["_mv_agg_max0"], r["_mv_agg_maxc0"]) for r in got[0]]


def test_min_max_merge_rules():
    old = [_mm_old("a", 5, (1, 2), (9, 1))]
    # a better value: the new extreme with Δ's count; a worse one: unchanged
    assert _mm_merge(old, [_mm_delta("a", 1, (0, 1), (5, 1))]) == [("a", 0, 1, 9, 1)]
    # the same value: the counts add up (one of two copies of the MIN deleted; a second copy of the MAX)
    assert _mm_merge(old, [_mm_delta("a", 0, (1, -1), (9, 1))]) == [("a", 1, 1, 9, 2)]
    # no value of non-zero net count (a row moved within the group): unchanged
    assert _mm_merge(old, [_mm_delta("a", 1, None, None)]) == [("a", 1, 2, 9, 1)]
    # a new group takes Δ's extremes; a group losing its last non-null value has NULL and 0
    got = _mm_merge(old, [_mm_delta("b", 2, (4, 2), (4, 2)), _mm_delta("a", -5, (1, -2), (9, -1))])
    assert got == [("b", 4, 2, 4, 2)]  # (a's count reaches 0: the group is gone)
    dead = [_mm_old("a", 5, (1, 2), (9, 1))]
    dead_delta = {**_mm_delta("a", 0, (1, -2), (9, -1)), "_mv_agg_n0": -5}
    assert _mm_merge(dead, [dead_delta]) == [("a", None, 0, None, 0)]  # (rows left, every value NULL)


def test_a_deleted_extreme_refuses_and_counts_the_groups():
    old = [_mm_old("a", 5, (1, 2), (9, 1)), _mm_old("b", 3, (2, 1), (3, 1))]
    got = _mm_merge(old, [_mm_delta("a", -2, (1, -2), None), _mm_delta("b", -1, (2, -1), (3, -1))])
    assert isinstance(got, str)
    assert got.startswith("every row holding the MAX of 1 affected group(s) and the MIN of 2 affected group(s)")
    # a deletion beyond the kept count, or of a better value than the kept extreme: the state is inconsistent
    for lo in ((1, -3), (0, -1)):
        got = _mm_merge(old[:1], [_mm_delta("a", -1, lo, None)])
        assert isinstance(got, str) and "inconsistent" in got, (lo, got)


def test_a_capped_multiplicity_only_grows():
    cap = MULTIPLICITY_CAP
    old = [_mm_old("a", 100, (1, cap), (9, cap - 1))]
    assert _mm_merge(old, [_mm_delta("a", 5, (1, 5), (9, 5))]) == [("a", 1, cap, 9, cap)]
    got = _mm_merge(old, [_mm_delta("a", -1, (1, -1), None)])  # at least 64 copies, one deleted: unknown
    assert isinstance(got, str) and "the MIN of 1 affected group(s)" in got
    assert _mm_merge(old, [_mm_delta("a", -1, None, (9, -1))]) == [("a", 1, cap, 9, cap - 2)]


@pytest.mark.parametrize(
    "kind,kept,delta,n,want",
    [
        ("min", None, (3, 2), 2, (3, 2)),
        ("min", (3, 1), (2, 1), 4, (2, 1)),
        ("max", (3, 1), (2, 5), 4, (3, 1)),
        ("max", (3, 1), (4, -1), 4, "inconsistent"),
        ("max", (3, 1), (3, -1), 4, EXHAUSTED),
        ("max", (3, 1), (3, -1), 0, (None, 0)),
        ("min", "x", None, 1, "x"),
        ("min", None, None, 1, "inconsistent"),
        ("min", ("b", 1), ("a", 2), 3, ("a", 2)),
        ("min", (Decimal("1.10"), 1), (Decimal("1.1"), 1), 3, (Decimal("1.10"), 2)),
    ],
)
def test_merge_extreme(kind, kept, delta, n, want):
    kept = (kept, 1) if kept == "x" else kept
    want = (want, 1) if want == "x" else want
    got = merge_extreme(kind, kept, delta or (None, None), n)
    if want == "inconsistent":
        assert isinstance(got, str) and "inconsistent" in got
    else:
        assert got == want
