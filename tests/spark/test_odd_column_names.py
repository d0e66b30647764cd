"""Views whose columns need quoting, and views with checks, through every reader and compaction.

A column named ``a"b`` (a double quote inside) and one named ``it's`` travel through refresh, the
Python reader, the changefeed, the Spark reader and compaction. A view with checks (its table has
``_mv_error`` after ``_mv_time`` and ``_mv_diff``) goes through the changefeed and compaction too.
Each step is checked in the data and in the commit log.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.core import deltalog
from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.maintenance.compaction import compact
from mvsink.readers.arrow import changes, read_view
from mvsink.spark.viewreader import read_view as spark_read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, update_at, write_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

ORDERS = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("name", pa.string())])
QUOTE, APOS = 'a"b', "it's"


def _orders(rows: list[tuple[int, int | None, str | None]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ORDERS.names, r)) for r in rows], schema=ORDERS)


def _bag(table: pa.Table, cols: list[str]) -> Counter:
    return Counter(tuple(r[c] for c in cols) for r in table.select(cols).to_pylist())


@pytest.fixture
def odd(env):
    data, views = env
    orders = data / "orders"
    write_at(orders, _orders([(1, 5, 'x"y'), (2, 7, "b"), (3, -1, "it's")]), BASE)
    write_at(orders, _orders([(4, 9, "d")]), BASE + 2 * HOUR)  # t2: insert
    delete_at(orders, "id = 2", BASE + 2 * HOUR + 1)  # t2: delete
    update_at(orders, {"qty": "6"}, "id = 1", BASE + 4 * HOUR)  # t3: update
    write_view(
        views,
        "odd",
        query=f"SELECT id, qty AS `{QUOTE}`, name AS `{APOS}` FROM orders",
        sources={"orders": "orders"},
        target="views/odd",
        as_of=BASE,
    )
    write_view(
        views,
        "checked",
        query="SELECT id, qty, name FROM orders",
        sources={"orders": "orders"},
        target="views/checked",
        as_of=BASE,
        checks=[{"name": "positive_qty", "expr": "qty > 0"}],
    )
    return Catalog(views)


T1, T2, T3 = BASE + HOUR, BASE + 3 * HOUR, BASE + 5 * HOUR
WANT = {  # contents of odd at each refresh time: (id, a"b, it's)
    T1: Counter({(1, 5, 'x"y'): 1, (2, 7, "b"): 1, (3, -1, "it's"): 1}),
    T2: Counter({(1, 5, 'x"y'): 1, (3, -1, "it's"): 1, (4, 9, "d"): 1}),
    T3: Counter({(1, 6, 'x"y'): 1, (3, -1, "it's"): 1, (4, 9, "d"): 1}),
}


def test_quoted_column_names_through_readers_changes_and_compaction(spark, odd):
    view = odd.get("odd")
    cols = ["id", QUOTE, APOS]
    for t in (T1, T2, T3):
        res = refresh(view, t, catalog=odd, runner="inprocess", spark=spark)
        assert res.status == "appended", res
    table = ViewTable.open(view)
    assert table.column_names == [*cols, TIME, DIFF]
    assert [h.op for h in reversed(table.history())] == ["create", "bump", "append", "append", "append"]

    for t, want in WANT.items():
        got = read_view(view, as_of=t)
        assert got.column_names == cols and _bag(got, cols) == want
        sdf = spark_read_view(spark, view, as_of=t)
        assert sdf.columns == cols and _bag(pa.Table.from_pylist([r.asDict() for r in sdf.collect()]), cols) == want

    feed = changes(view, T2)
    assert feed.schema == table.arrow_schema()
    assert [(r["id"], r[QUOTE], r[APOS], r[TIME], r[DIFF]) for r in feed.to_pylist()] == [
        (2, 7, "b", T2, -1),
        (4, 9, "d", T2, 1),
        (1, 5, 'x"y', T3, -1),
        (1, 6, 'x"y', T3, 1),
    ]

    # compaction to since T2: contents at T2 and later unchanged, history below T2 folded into time T2
    version = table.version
    res = compact(view, since=T2)
    assert res.status == "compacted" and res.version == version + 1, res
    commit = deltalog.read_commit(view.target, version + 1)
    assert commit is not None and commit.info is not None and commit.info.operation == "compact"
    assert commit.transactions == {view.since_app_id: T2} and commit.removes and commit.adds
    after = ViewTable.open(view)
    assert after.frontier.since == T2 and after.frontier.upper == T3 + 1
    assert sorted(set(after.updates().column(TIME).to_pylist())) == [T2, T3]
    for t in (T2, T3):
        assert _bag(read_view(view, as_of=t), cols) == WANT[t]
    feed = changes(view, T2)
    assert [(r["id"], r[QUOTE], r[TIME], r[DIFF]) for r in feed.to_pylist()] == [
        (1, 5, T2, 1),
        (3, -1, T2, 1),
        (4, 9, T2, 1),
        (1, 5, T3, -1),
        (1, 6, T3, 1),
    ]


def test_a_view_with_checks_through_changes_and_compaction(spark, odd):
    view = odd.get("checked")
    for t in (T1, T2, T3):
        res = refresh(view, t, catalog=odd, runner="inprocess", spark=spark)
        assert res.status == "appended" and res.checks["positive_qty"]["rows"] == 1, res
    table = ViewTable.open(view)
    assert table.column_names == ["id", "qty", "name", TIME, DIFF, ERROR]  # _mv_error after the update columns
    cols = ["id", "qty", "name", ERROR]
    before = {t: _bag(read_view(view, as_of=t, errors="include"), cols) for t in (T2, T3)}
    assert before[T3] == Counter({(1, 6, 'x"y', None): 1, (3, -1, "it's", "positive_qty"): 1, (4, 9, "d", None): 1})

    feed = changes(view, T2)
    assert feed.schema == table.arrow_schema()
    assert [(r["id"], r[TIME], r[DIFF], r[ERROR]) for r in feed.to_pylist()] == [
        (2, T2, -1, None),
        (4, T2, 1, None),
        (1, T3, -1, None),
        (1, T3, 1, None),
    ]

    res = compact(view, since=T2)
    assert res.status == "compacted", res
    commit = deltalog.read_commit(view.target, res.version or -1)
    assert commit is not None and commit.info is not None and commit.info.since == T2
    for t in (T2, T3):
        assert _bag(read_view(view, as_of=t, errors="include"), cols) == before[t]
    rows = ViewTable.open(view).updates()
    assert rows.filter(pa.compute.equal(rows[TIME], T2)).num_rows == 3  # one update per row alive at T2
    assert _bag(changes(view, T2).filter(pa.compute.equal(pa.compute.field(TIME), T2)), cols) == before[T2]
