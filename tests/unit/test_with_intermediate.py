"""How a refresh through an intermediate table reports its mode (mvsink.core.refresh.with_intermediate): the
intermediate's incremental mode where the view's own refresh did no work in proportion to the sources, ``full``
where the intermediate was recomputed, else the view's own."""

from __future__ import annotations

import dataclasses

import pytest

from mvsink.core.append import RefreshResult
from mvsink.core.refresh import with_intermediate
from mvsink.definitions.intermediate import CTE, HAVING, OUTER_FULL_MAX_BYTES, TOPK

pytestmark = pytest.mark.unit


def _res(view: str, mode: str, reason: str = "", reads: dict | None = None) -> RefreshResult:
    return RefreshResult(view=view, status="appended", refresh_time=1, mode=mode, mode_reason=reason, reads=reads or {})


INNER_AGG = _res("v__mv_inner", "incremental:aggregate", "3 groups", {"lineitem": {"bytes": 10, "files": 1}})
INNER_FULL = _res("v__mv_inner", "full", "a subquery")


@pytest.mark.parametrize(
    ("kind", "outer", "inner", "mode", "starts"),
    [
        (TOPK, _res("v", "unchanged"), INNER_AGG, "incremental:aggregate", "the top k is unchanged"),
        (TOPK, _res("v", "incremental:topk", "2 rows"), INNER_AGG, "incremental:topk", "2 rows"),
        (TOPK, _res("v", "full", "x"), INNER_AGG, "full", "x"),  # (a top-k's full diff: the view's own)
        (TOPK, _res("v", "unchanged"), INNER_FULL, "full", "the intermediate table's full diff; the top k"),
        (CTE, _res("v", "unchanged"), INNER_AGG, "incremental:aggregate", "the query's body is unchanged"),
        (
            CTE,
            _res("v", "full", "a full diff in DuckDB without Spark", {"supplier": {"bytes": 900_000, "files": 1}}),
            INNER_AGG,
            "incremental:aggregate",
            "the query's body recomputed over the intermediate table and 900000 bytes of other tables",
        ),
        (  # a body that reads a large table itself: its full diff is the view's
            CTE,
            _res("v", "full", "y", {"lineitem": {"bytes": OUTER_FULL_MAX_BYTES + 1, "files": 9}}),
            INNER_AGG,
            "full",
            "y",
        ),
        (CTE, _res("v", "full", "z"), _res("v__mv_inner", "unchanged"), "full", "z"),  # (only the body changed)
        (CTE, _res("v", "unchanged"), INNER_FULL, "full", "the intermediate table's full diff; the query's body"),
    ],
)
def test_the_views_mode(kind, outer, inner, mode, starts):
    got = with_intermediate(outer, inner, kind=kind)
    assert got.mode == mode
    assert got.mode_reason.startswith(starts), got.mode_reason
    assert f"intermediate table v__mv_inner: {inner.mode}" in got.mode_reason


def test_reads_are_the_intermediates_for_a_top_k_and_both_for_a_with_clause():
    outer = _res("v", "full", "x", {"supplier": {"bytes": 5, "files": 1}, "_table": {"bytes": 1, "files": 1}})
    assert with_intermediate(outer, INNER_AGG, kind=TOPK).reads == INNER_AGG.reads
    assert with_intermediate(outer, INNER_AGG, kind=CTE).reads == {**outer.reads, **INNER_AGG.reads}


TOTAL_AGG = _res("v__mv_inner2", "incremental:aggregate", "1 group", {"partsupp": {"bytes": 7, "files": 1}})
TOTAL_SAME = _res("v__mv_inner2", "unchanged")
TOTAL_FULL = _res("v__mv_inner2", "full", "a dimension moved")
OVER_BOTH = {
    "v__mv_inner": {"bytes": 900_000_000, "files": 3},  # (the intermediates' own reads do not count)
    "v__mv_inner2": {"bytes": 500, "files": 1},
    "_table": {"bytes": 10, "files": 1},
}


@pytest.mark.parametrize(
    ("outer", "inner", "total", "mode", "starts"),
    [
        (
            _res("v", "full", "a full diff in DuckDB without Spark", OVER_BOTH),
            INNER_AGG,
            TOTAL_AGG,
            "incremental:aggregate",
            "the query's body recomputed over the 2 intermediate tables and 0 bytes of other tables",
        ),
        (_res("v", "unchanged"), _res("v__mv_inner", "unchanged"), TOTAL_AGG, "incremental:aggregate", "the query"),
        (_res("v", "full", "x", OVER_BOTH), INNER_AGG, TOTAL_FULL, "full", "x"),  # one intermediate's full diff
        (_res("v", "unchanged"), INNER_AGG, TOTAL_FULL, "full", "the intermediate table's full diff"),
        (_res("v", "incremental", "2 rows", OVER_BOTH), INNER_AGG, TOTAL_SAME, "incremental", "2 rows"),
    ],
)
def test_a_having_over_subqueries_reports_every_intermediate(outer, inner, total, mode, starts):
    got = with_intermediate(outer, inner, kind=HAVING, more=(total,))
    assert got.mode == mode
    assert got.mode_reason.startswith(starts), got.mode_reason
    for part in (inner, total):
        assert f"intermediate table {part.view}: {part.mode}" in got.mode_reason
    assert got.reads == {**outer.reads, **inner.reads, **total.reads}


def test_timings_and_spark_jobs_of_every_intermediate_add_up():
    inner = dataclasses.replace(INNER_AGG, timings={"write": 1.0}, spark_jobs=2)
    total = dataclasses.replace(TOTAL_AGG, timings={"write": 0.5}, spark_jobs=1)
    outer = dataclasses.replace(_res("v", "full"), timings={"write": 0.25}, spark_jobs=0)
    got = with_intermediate(outer, inner, kind=HAVING, more=(total,))
    assert got.timings == {"inner.write": 1.0, "inner2.write": 0.5, "write": 0.25}
    assert got.spark_jobs == 3
    assert (
        with_intermediate(outer, inner, kind=HAVING, more=(dataclasses.replace(total, spark_jobs=-1),)).spark_jobs == -1
    )
