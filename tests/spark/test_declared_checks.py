"""Declared checks (issue 5, acceptance 4) in refreshes: error, drop and warn rows kept in the view's table, their
counts, reads, self-correction of errors, incremental = full, and an independent DuckDB oracle with the check
logic written separately in SQL."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from mvsink.cli.app import main as cli_main
from mvsink.columns import ERROR
from mvsink.definitions.catalog import Catalog
from mvsink.exceptions import QueryError, ViewErrorsError
from mvsink.readers.arrow import read_updates, read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, snapshot, update_at, write_at
from tests.support.oracle import multiset
from tests.support.viewfiles import write_view

ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int32()), ("status", pa.string()), ("qty", pa.int32())])


CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string())])


PROJ = "SELECT id, cust, status, qty FROM orders WHERE id >= 0"


LEFT = "SELECT o.id, o.status, o.qty, c.region FROM orders o LEFT JOIN customers c ON o.cust = c.id"


# drop test rows first, then errors, then warnings (expressions valid in Spark SQL and DuckDB)
CHECKS = [
    {"name": "not_test", "expr": "status IS NULL OR status <> 'T'", "action": "drop"},
    {"name": "positive_qty", "expr": "qty > 0", "action": "error"},
    {"name": "known_status", "expr": "status IN ('A', 'B')", "action": "error"},
    {"name": "small_qty", "expr": "qty < 3", "action": "warn"},
]


LEFT_CHECKS = [
    {"name": "has_region", "expr": "region IS NOT NULL", "action": "error"},
    {"name": "not_test", "expr": "status <> 'T'", "action": "drop"},
    {"name": "small_qty", "expr": "qty < 2", "action": "warn"},
]


# ---------------------------------------------------------------- the oracle: DuckDB, checks in plain SQL


def _case(checks: list[dict[str, str]], action: str) -> str:
    whens = [f"WHEN NOT coalesce(({c['expr']}), false) THEN '{c['name']}'" for c in checks if c["action"] == action]
    return f"CASE {' '.join(whens)} END" if whens else "CAST(NULL AS VARCHAR)"


def oracle(
    query: str, checks: list[dict[str, str]], sources: dict[str, str], ts: int
) -> tuple[Counter[tuple[Any, ...]], dict[str, int]]:
    """(rows with _mv_error, rows per check) of the query and its checks over the sources as of ``ts``."""
    con = duckdb.connect()
    for name, path in sources.items():
        con.register(name, snapshot(path, ts))
    con.execute(
        f"CREATE TEMP TABLE f AS SELECT *, {_case(checks, 'drop')} AS _drop, "
        f"{_case(checks, 'error')} AS {ERROR} FROM ({query}) q"
    )
    rows = multiset(con.sql("SELECT * EXCLUDE (_drop) FROM f WHERE _drop IS NULL").to_arrow_table())
    counts = {}
    for c in checks:
        where = {
            "drop": f"_drop = '{c['name']}'",
            "error": f"_drop IS NULL AND {ERROR} = '{c['name']}'",
            "warn": f"_drop IS NULL AND {ERROR} IS NULL AND NOT coalesce(({c['expr']}), false)",
        }[c["action"]]
        counts[c["name"]] = con.execute(f"SELECT count(*) FROM f WHERE {where}").fetchone()[0]  # type: ignore[index]
    return rows, counts


def rows_of(counts: dict[str, Any]) -> dict[str, int]:
    return {k: v["rows"] for k, v in counts.items()}


def _orders(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "cust": rng.choice([1, 2, 3, 9, None]),
                "status": rng.choice(["A", "B", "T", "X", None]),
                "qty": rng.choice([-1, 0, 1, 2, 3, 5, None]),
            }
            for i in range(n)
        ],
        schema=ORDERS,
    )


def _customers(rng: random.Random) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "region": rng.choice(["eu", "us", None])} for i in (1, 2, 3)], schema=CUSTOMERS
    )


# ---------------------------------------------------------------- refreshes


@pytest.fixture
def orders_view(env):
    """A source with a bad row of each kind, and a view over it with checks."""
    data, views = env
    orders = str(data / "orders")
    write_at(
        orders,
        pa.Table.from_pylist(
            [
                {"id": 1, "cust": 1, "status": "A", "qty": 1},  # ok
                {"id": 2, "cust": 1, "status": "A", "qty": 5},  # ok, warned by small_qty
                {"id": 3, "cust": 2, "status": "B", "qty": 0},  # error positive_qty
                {"id": 4, "cust": 2, "status": "X", "qty": -2},  # error positive_qty (first failing), also known_status
                {"id": 5, "cust": 3, "status": None, "qty": 2},  # error known_status (NULL fails)
                {"id": 6, "cust": 3, "status": "T", "qty": 0},  # dropped by not_test (drop wins over errors)
                {"id": 7, "cust": 3, "status": "B", "qty": None},  # error positive_qty (NULL fails)
            ],
            schema=ORDERS,
        ),
        BASE,
    )
    write_view(
        views, "checked", query=PROJ, sources={"orders": "orders"}, target="views/checked", as_of=BASE, checks=CHECKS
    )
    return data, views, orders


@pytest.mark.spark
def test_error_drop_warn_rows_counts_and_reads(spark, orders_view):
    data, views, orders = orders_view
    view = Catalog(views).get("checked")
    t1 = BASE + HOUR
    res = refresh(view, t1, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.rows_added == 6, res
    want_counts = {"not_test": 1, "positive_qty": 3, "known_status": 1, "small_qty": 1}
    assert rows_of(res.checks) == want_counts
    assert res.checks["not_test"]["action"] == "drop" and res.checks["small_qty"]["action"] == "warn"
    assert (
        "checks: not_test: 1 dropped, positive_qty: 3 error row(s), known_status: 1 error row(s), "
        "small_qty: 1 warned" in res.summary()
    )
    assert rows_of(mvsink_history(view.target)[0]["checks"]) == want_counts

    # the error collection is in the same table, with _mv_error set
    everything = read_view(view, errors="include")
    assert everything.column_names == ["id", "cust", "status", "qty", ERROR]
    by_id = {r["id"]: r[ERROR] for r in everything.to_pylist()}
    assert by_id == {1: None, 2: None, 3: "positive_qty", 4: "positive_qty", 5: "known_status", 7: "positive_qty"}
    rows, counts = oracle(PROJ, CHECKS, {"orders": orders}, t1)
    assert multiset(everything) == rows and counts == want_counts

    # reading fails naming the check and a sample row; ignore returns the ok rows
    with pytest.raises(ViewErrorsError) as ei:
        read_view(view)
    msg = str(ei.value)
    assert "view checked" in msg and "'positive_qty' (3 row(s))" in msg and "'known_status' (1 row(s))" in msg
    assert "failed check 'positive_qty'" in msg and "id=" in msg and "Fix:" in msg
    ok = read_view(view, errors="ignore")
    assert ok.column_names == ["id", "cust", "status", "qty"] and sorted(ok.column("id").to_pylist()) == [1, 2]

    # the Spark reader: the same rule, without collecting the contents
    from mvsink.spark.viewreader import read_view as spark_read

    with pytest.raises(ViewErrorsError) as es:
        spark_read(spark, view)
    assert es.value.check == "positive_qty" and es.value.counts == ei.value.counts
    assert multiset(
        pa.Table.from_pylist([r.asDict() for r in spark_read(spark, view, errors="include").collect()])
    ) == multiset(everything)
    assert sorted(r["id"] for r in spark_read(spark, view, errors="ignore").collect()) == [1, 2]
    assert spark_read(spark, view, errors="ignore").columns == ["id", "cust", "status", "qty"]

    # the command line: --errors
    assert cli_main(["read", "checked", "--views-dir", str(views)]) == 2
    assert cli_main(["read", "checked", "--views-dir", str(views), "--errors", "ignore", "--format", "csv"]) == 0


@pytest.mark.spark
def test_fixing_the_source_retracts_the_error_at_the_next_refresh(spark, orders_view, capsys):
    data, views, orders = orders_view
    view = Catalog(views).get("checked")
    t1, t2 = BASE + HOUR, BASE + 2 * HOUR
    refresh(view, t1, runner="inprocess", spark=spark)
    # fix the quantities (id 3, 4, 7) and the status of id 5; id 4 still fails known_status
    update_at(orders, {"qty": "1"}, "qty IS NULL OR qty <= 0", t1 + 10)
    update_at(orders, {"status": "'A'"}, "id = 5", t1 + 20)
    res = refresh(view, t2, runner="inprocess", spark=spark)
    assert res.status == "appended"
    # id 6 (status T) is still dropped; its qty fix is invisible
    assert rows_of(res.checks) == {"not_test": 1, "positive_qty": 0, "known_status": 1, "small_qty": 1}
    # the commit log: each fixed error row retracted and its ok version added, at t2
    ups = read_updates(view).to_pylist()
    at_t2 = sorted(((r["id"], r[ERROR], r["_mv_diff"]) for r in ups if r["_mv_time"] == t2), key=lambda x: (x[0], x[2]))
    assert at_t2 == [
        (3, "positive_qty", -1),
        (3, None, 1),
        (4, "positive_qty", -1),
        (4, "known_status", 1),
        (5, "known_status", -1),
        (5, None, 1),
        (7, "positive_qty", -1),
        (7, None, 1),
    ]
    rows, _ = oracle(PROJ, CHECKS, {"orders": orders}, t2)
    assert multiset(read_view(view, errors="include")) == rows
    with pytest.raises(ViewErrorsError, match="known_status"):
        read_view(view)
    # the last error fixed: reading succeeds, the older time still shows the errors
    update_at(orders, {"status": "'B'"}, "id = 4", t2 + 10)
    refresh(view, BASE + 3 * HOUR, runner="inprocess", spark=spark)
    assert sorted(read_view(view).column("id").to_pylist()) == [1, 2, 3, 4, 5, 7]
    with pytest.raises(ViewErrorsError):
        read_view(view, as_of=t1)
    # status shows the counts
    capsys.readouterr()
    assert cli_main(["status", "checked", "--views-dir", str(views)]) == 0
    assert "checks: not_test: 1 dropped, positive_qty: 0 error row(s)" in capsys.readouterr().out


@pytest.mark.spark
@pytest.mark.parametrize("seed,cdf", [(3, True), (8, False)])
def test_incremental_and_full_agree_with_the_oracle(spark, env, monkeypatch, seed, cdf):
    """Same views with incremental on and off: equal contents (ok and err) and counts, equal to the oracle."""
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    data, views = env
    rng = random.Random(seed)
    orders, customers = str(data / "orders"), str(data / "customers")
    conf = {"delta.enableChangeDataFeed": "true"} if cdf else None
    from deltalake import write_deltalake

    write_deltalake(orders, _orders(rng, 0, 25), configuration=conf)
    update_at(orders, {"qty": "qty"}, "id < 0", BASE)  # (a no-op commit, dated)
    write_deltalake(customers, _customers(rng), configuration=conf)
    update_at(customers, {"region": "region"}, "id < 0", BASE + 1)
    defs = {"proj": (PROJ, CHECKS), "left": (LEFT, LEFT_CHECKS)}
    srcs = {"orders": orders, "customers": customers}
    for name, (q, checks) in defs.items():
        used = {k: k for k in srcs if k in q}
        for suffix, inc in (("inc", True), ("full", False)):
            write_view(
                views,
                f"{name}_{suffix}",
                query=q,
                sources=used,
                target=f"views/{name}_{suffix}",
                as_of=BASE,
                checks=checks,
                incremental=inc,
            )
    catalog = Catalog(views)
    t, next_id = BASE + HOUR, [25]
    for step in range(4):
        for _ in range(rng.randint(1, 2)):
            t += 60_000
            op = rng.choice(["insert", "insert", "delete", "fix", "break", "customers"])
            if op == "insert":
                write_at(orders, _orders(rng, next_id[0], rng.randint(1, 4)), t)
                next_id[0] += 4
            elif op == "delete":
                delete_at(orders, f"id % 6 = {rng.randint(0, 5)}", t)
            elif op == "fix":
                update_at(orders, {"qty": "1", "status": "'A'"}, f"id % 3 = {rng.randint(0, 2)}", t)
            elif op == "break":
                update_at(orders, {"qty": "0"}, f"id % 4 = {rng.randint(0, 3)}", t)
            else:
                update_at(customers, {"region": "NULL"}, f"id = {rng.randint(1, 3)}", t)
        t += HOUR
        for name, (q, checks) in defs.items():
            rows, counts = oracle(q, checks, srcs, t)
            for suffix in ("inc", "full"):
                view = catalog.get(f"{name}_{suffix}")
                res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"s{step}")
                assert res.status == "appended", res
                assert rows_of(res.checks) == counts, (view.name, step, res.mode, res.checks, counts)
                assert multiset(read_view(view, as_of=t, errors="include")) == rows, (view.name, step)
                ok = Counter({k[:-1]: n for k, n in rows.items() if k[-1] is None})
                assert multiset(read_view(view, as_of=t, errors="ignore")) == ok
    modes = [
        h.get("mode")
        for h in reversed(mvsink_history(str(data / "views" / "proj_inc")))
        if h.get("operation") == "append"
    ]
    assert "incremental" in modes and "full" not in modes[1:], modes
    full_modes = {
        h.get("mode") for h in mvsink_history(str(data / "views" / "proj_full")) if h.get("operation") == "append"
    }
    assert full_modes <= {"full", "unchanged"}


@pytest.mark.spark
def test_adding_and_removing_checks_on_an_existing_table(spark, orders_view):
    """A view without checks keeps its table shape; adding checks adds _mv_error; removing them retracts errors."""
    data, views, orders = orders_view
    write_view(views, "later", query=PROJ, sources={"orders": "orders"}, target="views/later", as_of=BASE)
    view = Catalog(views).get("later")
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    assert ERROR not in DeltaTable(view.target).schema().to_arrow().names
    assert read_view(view).num_rows == 7 and read_view(view, errors="include").column(ERROR).null_count == 7

    write_view(
        views, "later", query=PROJ, sources={"orders": "orders"}, target="views/later", as_of=BASE, checks=CHECKS
    )
    view = Catalog(views).get("later")
    res = refresh(view, BASE + 2 * HOUR, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.mode == "full" and rows_of(res.checks)["positive_qty"] == 3
    assert ERROR in DeltaTable(view.target).schema().to_arrow().names
    assert [h["operation"] for h in mvsink_history(view.target)][:2] == ["append", "evolve"]
    rows, _ = oracle(PROJ, CHECKS, {"orders": orders}, BASE + 2 * HOUR)
    assert multiset(read_view(view, errors="include")) == rows
    assert read_view(view, as_of=BASE + HOUR).num_rows == 7  # older contents: all rows, no errors

    write_view(views, "later", query=PROJ, sources={"orders": "orders"}, target="views/later", as_of=BASE)
    view = Catalog(views).get("later")
    res = refresh(view, BASE + 3 * HOUR, runner="inprocess", spark=spark)
    assert res.status == "appended" and not res.checks
    assert read_view(view).num_rows == 7


@pytest.mark.spark
def test_view_over_a_view_reads_its_ok_rows(spark, orders_view):
    data, views, orders = orders_view
    write_view(
        views,
        "downstream",
        query="SELECT status, count(*) AS n FROM up GROUP BY status",
        sources={"up": {"view": "checked"}},
        target="views/downstream",
        as_of=BASE,
    )
    catalog = Catalog(views)
    refresh(catalog.get("checked"), BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    res = refresh(catalog.get("downstream"), BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    assert res.status == "appended"
    assert read_view(catalog.get("downstream")).to_pylist() == [{"status": "A", "n": 2}]


@pytest.mark.spark
@pytest.mark.parametrize(
    "expr,fragments",
    [
        ("missing_col > 0", ["check 'c' (missing_col > 0) does not analyse", "missing_col", "Fix:"]),
        ("qty + 1", ["is of type int, not boolean"]),
    ],
)
def test_check_that_does_not_analyse_fails_the_refresh(spark, orders_view, expr, fragments):
    data, views, orders = orders_view
    write_view(
        views,
        "badcheck",
        query=PROJ,
        sources={"orders": "orders"},
        target="views/badcheck",
        as_of=BASE,
        checks=[{"name": "c", "expr": expr}],
    )
    view = Catalog(views).get("badcheck")
    with pytest.raises(QueryError) as ei:
        refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    for f in fragments:
        assert f in str(ei.value), str(ei.value)
    assert not Path(view.target).exists()


@pytest.mark.spark
def test_dry_run_reports_check_counts(spark, orders_view):
    data, views, orders = orders_view
    view = Catalog(views).get("checked")
    res = refresh(view, BASE + HOUR, runner="inprocess", spark=spark, dry_run=True)
    assert res.status == "dry_run" and rows_of(res.checks)["positive_qty"] == 3
    assert "checks: not_test: 1 dropped" in res.summary()
    # the no-change shortcut carries the last refresh's counts over
    refresh(view, BASE + HOUR, runner="inprocess", spark=spark)
    res = refresh(view, BASE + 2 * HOUR, runner="inprocess", spark=spark)
    assert res.status == "appended" and res.mode == "" and rows_of(res.checks)["positive_qty"] == 3
