"""Date and timestamp ± interval in a view: deterministic and row-wise, so linear, in a classic session (the analysed
plan's classes: DateAddYMInterval, TimestampAddYMInterval, DatetimeSub, ...) as over Spark Connect (the EXPLAIN
text prints ``+``); a view with ``+ INTERVAL '1' YEAR`` refreshes with the same incremental mode in both, and holds
what the full diff gives."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.plan.linearity import nonlinear_reason
from mvsink.plan.read import tree_from_explain, tree_of_dataframe
from mvsink.readers.arrow import read_view
from tests.spark.test_mode_independence import ClassicRefresher, ConnectRefresher, differences
from tests.support.aggdata import appends
from tests.support.delta import BASE, HOUR, delete_at, update_at, write_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

EXPRESSIONS = [
    "dt + INTERVAL '1' YEAR",  # DateAddYMInterval
    "dt - INTERVAL '1' YEAR",  # DatetimeSub over DateAddYMInterval(UnaryMinus)
    "ts + INTERVAL '1' YEAR",  # TimestampAddYMInterval
    "ts - INTERVAL '2' MONTH",
    "ts + INTERVAL '1' DAY",  # TimestampAddInterval
    "ts - INTERVAL '1 02:03:04' DAY TO SECOND",
    "dt + INTERVAL '1' DAY",  # DateAdd(ExtractANSIIntervalDays)
    "dt - INTERVAL '3' HOUR",
    "dt + INTERVAL '1' YEAR * n",  # MultiplyYMInterval
    "ts + INTERVAL '1' DAY * n",  # MultiplyDTInterval
    "ts - INTERVAL '2' YEAR / n",  # DivideYMInterval
    "ts + INTERVAL '2' DAY / n",  # DivideDTInterval
    "dt + make_ym_interval(n, 1)",  # MakeYMInterval
    "ts + make_dt_interval(n, 1, 2, 3)",  # MakeDTInterval
    "ts + make_interval(0, n, 0, 1, 2, 3, 4)",  # MakeInterval, DateAddInterval
    "extract(YEAR FROM INTERVAL '3' YEAR * n)",  # ExtractANSIIntervalYears
    "extract(MONTH FROM INTERVAL '3-1' YEAR TO MONTH)",  # ExtractANSIIntervalMonths
    "extract(HOUR FROM INTERVAL '1 02:03:04' DAY TO SECOND)",  # ExtractANSIIntervalHours
    "extract(MINUTE FROM make_dt_interval(n, 1, 2, 3))",
    "extract(SECOND FROM make_dt_interval(n, 1, 2, 3))",
    "extract(MONTH FROM make_interval(n, 2))",  # ExtractIntervalMonths (a calendar interval)
    "make_interval(n, 2) * 2",  # MultiplyInterval
    "make_interval(n, 2) / 2",  # DivideInterval
    "try_add(dt, INTERVAL '1' YEAR)",  # TryEval
]


@pytest.fixture
def t_view(spark):
    spark.createDataFrame(
        [(1, dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 1, 2, 3), 2)], "id long, dt date, ts timestamp, n int"
    ).createOrReplaceTempView("t")


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_interval_arithmetic_is_linear_on_both_plan_paths(spark, t_view, expr):
    q = f"SELECT id, {expr} AS x FROM t"
    classic = nonlinear_reason(tree_of_dataframe(spark.sql(q)), "t")
    text = nonlinear_reason(tree_from_explain(spark.sql("EXPLAIN EXTENDED " + q).collect()[0][0]), "t")
    assert (classic, text) == (None, None)


QUERY = (
    "SELECT id, dt + INTERVAL '1' YEAR AS next_year, dt - INTERVAL '1' MONTH AS last_month, "
    "ts + INTERVAL '1' YEAR AS ts_next, ts - INTERVAL '1 02:03:04' DAY TO SECOND AS ts_back FROM events"
)
EVENTS = pa.schema([("id", pa.int64()), ("dt", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])


def _events(rng: random.Random, ids: range) -> pa.Table:
    epoch = dt.datetime(2024, 2, 29, tzinfo=dt.UTC)
    rows = [
        {
            "id": i,
            "dt": None if i % 7 == 0 else dt.date(2024, 2, 29) + dt.timedelta(days=rng.randint(-400, 400)),
            "ts": None if i % 5 == 0 else epoch + dt.timedelta(seconds=rng.randint(-(10**8), 10**8)),
        }
        for i in ids
    ]
    return pa.Table.from_pylist(rows, schema=EVENTS)


@pytest.mark.parametrize("session", ["classic", "connect"])
def test_a_view_adding_an_interval_refreshes_incrementally_in_both_sessions(
    request, env, tmp_path, monkeypatch, session
):
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # (a tiny table: an update rewrites all of it)
    data, views = env
    rng = random.Random(12)
    events = str(data / "events")
    write_at(events, _events(rng, range(20)), BASE)
    for name, inc in (("iv", True), ("iv_full", False)):
        write_view(
            views, name, query=QUERY, sources={"events": "events"}, target=f"views/{name}", as_of=BASE, incremental=inc
        )
    catalog = Catalog(views)
    if session == "classic":
        run = ClassicRefresher(request.getfixturevalue("spark"), catalog)
    else:
        run = ConnectRefresher(request.getfixturevalue("connect_url"), views, tmp_path / "client.log")
    request.addfinalizer(run.close)
    modes = []
    t = BASE + HOUR
    for step in range(3):
        if step == 1:
            write_at(events, _events(rng, range(20, 25)), t - 60_000)
            update_at(events, {"dt": "dt + INTERVAL '1 day'"}, "id % 3 = 0", t - 30_000)
        elif step == 2:
            delete_at(events, "id % 4 = 1", t - 60_000)
        assert run(["iv", "iv_full"], t, step) == {"iv": "appended", "iv_full": "appended"}
        modes.append(
            (appends(catalog.get("iv").target)[-1]["mode"], appends(catalog.get("iv_full").target)[-1]["mode"])
        )
        got, want = read_view(catalog.get("iv"), as_of=t), read_view(catalog.get("iv_full"), as_of=t)
        assert got.num_rows == want.num_rows and not differences(got, want), (session, step)
        t += HOUR
    assert modes == [("full", "full"), ("incremental", "full"), ("incremental", "full")], (session, modes)
