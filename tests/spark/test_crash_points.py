"""Acceptance 5: a crash at any step of a refresh (fail points), then the next refresh is exact and appends once."""

from __future__ import annotations

import random

import pytest

from mvsink.core.staging import list_staged
from mvsink.exceptions import InjectedFault
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, operations, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("point", ["write:after_staging", "append:before_commit", "append:after_commit"])
def test_crash_points_then_next_refresh_is_exact(spark, proj, point, monkeypatch):
    catalog, view, orders = proj
    r1 = BASE + HOUR
    monkeypatch.setenv("MVSINK_FAIL_POINTS", point)
    with pytest.raises(InjectedFault):
        refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark, run_id="crashed")
    monkeypatch.delenv("MVSINK_FAIL_POINTS")
    assert list_staged(view.target), "the crash left a staged batch behind"

    again = refresh(view, r1, catalog=catalog, runner="inprocess", spark=spark, run_id="again")
    if point == "append:after_commit":
        assert again.status == "up_to_date"  # the crashed run had committed
    else:
        assert again.status == "appended"
    assert operations(view.target).count("append") == 1  # nothing appended twice
    assert multiset(read_view(view, as_of=r1)) == oracle(PROJECT, {"orders": orders}, r1)
    assert staged_leftovers(view.target) == []

    write_at(orders, make_orders(random.Random(9), 200, 4), r1 + 10)
    later = refresh(view, BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert later.status == "appended"
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + 2 * HOUR)
    assert staged_leftovers(view.target) == []
