"""How a refresh through an intermediate table reports its mode (mvsink.core.refresh.with_intermediate): the
intermediate's incremental mode where the view's own refresh did no work in proportion to the sources, ``full``
where the intermediate was recomputed, else the view's own."""

from __future__ import annotations

import pytest

from mvsink.core.append import RefreshResult
from mvsink.core.refresh import with_intermediate
from mvsink.definitions.intermediate import CTE, OUTER_FULL_MAX_BYTES, TOPK

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
