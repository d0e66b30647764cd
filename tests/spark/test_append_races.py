"""Append's races: a competing append wins and the loser cleans up; a retried append after a lost reply does not
append twice."""

from __future__ import annotations

import pytest

from mvsink.core.append import append
from mvsink.core.mint import mint
from mvsink.core.staging import list_staged
from mvsink.exceptions import InjectedFault
from mvsink.readers.arrow import read_view
from mvsink.write.job import run_write
from tests.support.data import PROJECT
from tests.support.delta import BASE, HOUR, operations, staged_leftovers
from tests.support.oracle import multiset, oracle

pytestmark = pytest.mark.spark


def test_competing_append_wins_and_loser_cleans_up(spark, proj):
    catalog, view, orders = proj
    a = mint(view, BASE + HOUR, catalog=catalog, run_id="a")
    b = mint(view, BASE + HOUR, catalog=catalog, run_id="b")
    ra, rb = run_write(spark, view, a), run_write(spark, view, b)
    assert sorted(list_staged(view.target)) == sorted([a.batch_id, b.batch_id])
    assert append(view, b, rb).status == "appended"
    lost = append(view, a, ra)
    assert lost.status == "rescheduled" and lost.upper == BASE + HOUR + 1
    assert operations(view.target).count("append") == 1
    assert staged_leftovers(view.target) == []
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + HOUR)
    # a stale description is refused by write itself: nothing staged
    assert run_write(spark, view, a).status == "stale"
    assert staged_leftovers(view.target) == []


def test_retried_append_after_lost_reply_does_not_duplicate(spark, proj, monkeypatch):
    catalog, view, orders = proj
    desc = mint(view, BASE + HOUR, catalog=catalog, run_id="once")
    report = run_write(spark, view, desc)
    monkeypatch.setenv("MVSINK_FAIL_POINTS", "append:after_commit")
    with pytest.raises(InjectedFault):
        append(view, desc, report)
    monkeypatch.delenv("MVSINK_FAIL_POINTS")
    retry = append(view, desc, report)  # an Airflow retry of the same task
    assert retry.status == "appended" and "already committed" in retry.reason
    assert operations(view.target).count("append") == 1
    assert multiset(read_view(view)) == oracle(PROJECT, {"orders": orders}, BASE + HOUR)
    assert staged_leftovers(view.target) == []
