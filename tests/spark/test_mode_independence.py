"""Mode independence: a view refreshed by its incremental modes holds exactly what the same view refreshed by the
full diff holds, typed and value for value, after every refresh of a randomized history — in a classic session
and over Spark Connect, which takes exactly the classic session's mode at every refresh.

Every view shape of the test catalogue (the SHAPES of test_incremental_shapes.py, the aggregates of
test_incremental_groups.py, the join views of test_pruned_joins.py) and linear views, aggregates over integers
and decimals (DECIMAL(38,10); TPC-H Q1's ``avg(l_extendedprice * (1 - l_discount))`` over two DECIMAL(15,2)),
MIN/MAX, COUNT(DISTINCT), DISTINCT, HAVING, top-k and a global aggregate, over a source of awkward values
(NULLs, empty strings, trailing spaces, non-ASCII, DECIMAL(18,6) and DECIMAL(38,10), doubles with -0.0, NaN and
infinities, dates, timestamps), refreshed with the default settings (the cost guards off, affected groups on, so
the small tables take the incremental modes) in three twins at the same times: incremental in a classic session,
incremental over Spark Connect, and with ``incremental: false``. After every refresh the incremental twins'
contents are compared with the full diff's: the same Arrow schema of the visible columns, the same multiset of
rows, decimals, strings, dates and timestamps exactly, doubles within 1e-9 relative (NaN equals NaN, -0.0 equals
0.0 as Spark's full diff groups them); and the Connect twin's mode (commit info) with the classic twin's. The
classic twin must have taken an incremental mode in most refreshes after a change, so the comparison is not
vacuous.

A Spark Connect client cannot share a process with the classic session this one keeps: the Connect refreshes
run in one client process (``_serve``), on the test run's one server (``connect_url``, with mvsink's plugin).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from tests.spark import test_incremental_groups as groups_shapes
from tests.spark import test_incremental_shapes as shapes
from tests.spark import test_pruned_joins as joins
from tests.support.aggdata import appends
from tests.support.delta import BASE, HOUR, delete_at, stamp, update_at, write_at

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ROUNDS = int(os.environ.get("MI_ROUNDS", "3"))  # refreshes after the first (full) one
ANSWER = "@@mode-independence@@ "

# ---------------------------------------------------------------- the sources

ORDERS = pa.schema(
    [
        ("id", pa.int64()),
        ("cust", pa.int32()),
        ("status", pa.string()),
        ("qty", pa.int32()),
        ("price", pa.float64()),
        ("s", pa.string()),
        ("d6", pa.decimal128(18, 6)),
        ("d10", pa.decimal128(38, 10)),
        ("ep", pa.decimal128(15, 2)),
        ("disc", pa.decimal128(15, 2)),
        ("f", pa.float64()),
        ("dt", pa.date32()),
    ]
)
# Timestamps in a table of their own: a TIMESTAMP column in a source keeps DuckDB's change terms
# (incremental/duckdbterms.py) off every view over that source (pyspark's to_arrow_schema wants a time zone),
# and the views over orders are to exercise them.
EVENTS = pa.schema([("id", pa.int64()), ("s", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string()), ("seg", pa.string())])
CDF = {"delta.enableChangeDataFeed": "true"}

STATUS = ["A", "B", "C", None, "", "A ", "é", "日本"]
STRINGS = [None, "", " ", "x", "x ", "X", "ñandú", "a\u0301", "日本語", "zz"]
DOUBLES = [0.0, -0.0, float("nan"), 1.5, -2.25, float("inf"), None, 3.0]
PRICES = [0.5, 1.25, 2.0, -0.0, 0.0, float("nan"), None]
TPCH = ("customer", "orders", "lineitem", "supplier", "nation", "region")


def maybe(rng: random.Random, v: Any, p: float = 0.15) -> Any:
    return None if rng.random() < p else v


def awkward_orders(rng: random.Random, start: int, n: int) -> pa.Table:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": start + i,
                "cust": rng.choice([1, 2, 3, 4, None]),
                "status": rng.choice(STATUS),
                "qty": rng.choice([0, 1, 2, 5, 7, -3, None]),
                "price": rng.choice(PRICES),
                "s": rng.choice(STRINGS),
                "d6": maybe(rng, decimal.Decimal(rng.randint(-(10**17), 10**17)).scaleb(-6)),
                "d10": maybe(rng, decimal.Decimal(rng.randint(-(10**25), 10**25)).scaleb(-10)),
                "ep": maybe(rng, decimal.Decimal(rng.randint(100_00, 99_999_99)).scaleb(-2), 0.1),
                "disc": maybe(rng, decimal.Decimal(rng.randint(0, 10)).scaleb(-2), 0.1),
                "f": rng.choice(DOUBLES),
                "dt": maybe(rng, dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(-400, 400))),
            }
        )
    return pa.Table.from_pylist(rows, schema=ORDERS)


def awkward_events(rng: random.Random, ids: list[int]) -> pa.Table:
    epoch = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [
        {
            "id": i,
            "s": rng.choice(STRINGS),
            "ts": maybe(
                rng, epoch + dt.timedelta(seconds=rng.randint(-(10**8), 10**8), microseconds=rng.randint(0, 999_999))
            ),
        }
        for i in ids
    ]
    return pa.Table.from_pylist(rows, schema=EVENTS)


def awkward_customers(rng: random.Random) -> pa.Table:
    rows = [
        {"id": i, "region": rng.choice(["eu", "eu ", "", "ü", None]), "seg": rng.choice(["x", "y", "", None])}
        for i in (1, 2, 3, 4)
    ]
    return pa.Table.from_pylist(rows, schema=CUSTOMERS)


def merge_at(path: str, source: pa.Table, ts: int) -> int:
    """A MERGE: rows of ``source`` replace the rows with their id, the others are inserted."""
    (
        DeltaTable(path)
        .merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return stamp(path, ts)


# ---------------------------------------------------------------- the views

Q1 = (
    "SELECT status, count(*) AS n, sum(qty) AS sum_qty, sum(ep) AS sum_base, sum(ep * (1 - disc)) AS sum_disc, "
    "avg(qty) AS avg_qty, avg(ep) AS avg_price, avg(disc) AS avg_disc, avg(ep * (1 - disc)) AS avg_disc_price "
    "FROM orders GROUP BY status"
)
OWN: dict[str, tuple[str, list[str]]] = {
    # linear
    "projection": (
        "SELECT id, s, d6, d10, f, dt, ep * (1 - disc) AS net, s || '|' AS sx, dt + INTERVAL '1' YEAR AS dty FROM orders",
        [],
    ),
    "inner_join": (  # and a filter
        "SELECT o.id, o.s, c.region, c.seg, o.d6, o.f FROM orders o JOIN customers c ON o.cust = c.id "
        "WHERE o.s <> '' AND (o.f > 0 OR o.f IS NULL OR isnan(o.f)) OR o.dt >= DATE'2026-01-03' OR c.region = 'eu '",
        [],
    ),
    "union_all": (
        "SELECT id, s AS v, dt FROM orders WHERE qty > 1 UNION ALL SELECT id, region, NULL FROM customers",
        [],
    ),
    # aggregates with state: COUNT/SUM/AVG over decimals (integers: the catalogue's and Q1's), global too
    "agg_dec": (
        "SELECT s, count(*) AS n, sum(d6) AS s6, avg(d6) AS a6, sum(d10) AS s10, avg(d10) AS a10, count(d10) AS n10 "
        "FROM orders GROUP BY s",
        [],
    ),
    "q1": (Q1, []),
    "agg_global": (
        "SELECT count(*) AS n, sum(qty) AS sq, avg(qty) AS aq, sum(d10) AS s10, avg(d10) AS a10, "
        "avg(ep * (1 - disc)) AS adp, count(s) AS ns FROM orders",
        [],
    ),
    # affected groups: MIN/MAX of doubles, COUNT(DISTINCT), HAVING over awkward keys and values; DISTINCT over
    # doubles
    "minmax_having": (
        "SELECT s, count(*) AS n, min(status) AS lo_st, max(status) AS hi_st, min(d10) AS lo_d, max(f) AS hi_f, "
        "min(f) AS lo_f, min(dt) AS lo_dt, max(dt) AS hi_dt, count(DISTINCT status) AS ds, count(DISTINCT f) AS df, "
        "sum(d6) AS s6, avg(f) AS af FROM orders GROUP BY s HAVING count(*) > 1",
        [],
    ),
    "distinct": ("SELECT DISTINCT s, dt, f FROM orders", []),
    # top-k
    "topk": (
        "SELECT id, s, d10, dt, f FROM orders ORDER BY s NULLS FIRST, d10 DESC NULLS LAST, dt, id LIMIT 6",
        ["id"],
    ),
    # timestamps
    "ts_join": (
        "SELECT o.id, e.ts, e.ts - INTERVAL '1' MONTH AS back, e.s AS es, o.d10, o.f FROM orders o JOIN events e ON o.id = e.id",
        [],
    ),
    # MIN/MAX of timestamps from the aggregate state
    "ts_minmax": ("SELECT s, count(*) AS n, min(ts) AS lo, max(ts) AS hi FROM events GROUP BY s", []),
    "ts_topk": ("SELECT id, s, ts FROM events ORDER BY ts DESC NULLS FIRST, id LIMIT 5", ["id"]),
    # a partitioned recompute: an aggregate over a correlated EXISTS, over an outer join's aggregate
    "part_exists": (
        "SELECT c.region, count(*) AS n, sum(c.id) AS si FROM customers c "
        "WHERE EXISTS (SELECT 1 FROM orders o WHERE o.cust = c.id AND o.d10 > 0) GROUP BY c.region",
        [],
    ),
    "part_outer": (
        "SELECT k, count(*) AS n FROM (SELECT c.id, count(o.id) AS k, sum(o.d6) AS s6 FROM customers c "
        "LEFT JOIN orders o ON c.id = o.cust AND o.s <> '' GROUP BY c.id) t GROUP BY k",
        [],
    ),
}


def catalogue() -> dict[str, tuple[str, dict[str, str], list[str]]]:
    """name: (query, sources {query name: path under the data root}, declared key)."""
    out: dict[str, tuple[str, dict[str, str], list[str]]] = {}

    def ours(q: str) -> dict[str, str]:
        return {s: s for s in ("orders", "customers", "events") if s in q}

    for name, (q, key, _) in shapes.SHAPES.items():
        out[f"shapes_{name}"] = (q, ours(q), key)
    for name, q in {**groups_shapes.ELIGIBLE, **{k: v[0] for k, v in groups_shapes.NOT_ELIGIBLE.items()}}.items():
        out[f"groups_{name}"] = (q, ours(q), [])
    for name, (q, srcs, _) in joins.VIEWS.items():
        out[f"joins_{name}"] = (q, {s: f"tpch/{s}" for s in srcs}, joins.KEYS.get(name, []))
    for name, (q, key) in OWN.items():
        out[name] = (q, ours(q), key)
    return out


# ---------------------------------------------------------------- the history


def initial_sources(data: Path, rng: random.Random) -> None:
    write_deltalake(str(data / "orders"), awkward_orders(rng, 0, 40), configuration=CDF)
    stamp(data / "orders", BASE)
    write_at(data / "customers", awkward_customers(rng), BASE)  # no change data feed: changes are file rewrites
    write_at(data / "events", awkward_events(rng, list(range(0, 40, 2))), BASE)
    joins.banded_lake(data / "tpch", rng, bands=4)


def change(data: Path, rng: random.Random, step: int, next_id: list[int], t: int) -> list[str]:
    """The changes of round ``step`` (1..ROUNDS), committed from ``t`` on; what was done."""
    orders, customers, events, tpch = (str(data / n) for n in ("orders", "customers", "events", "tpch"))
    done = []

    def insert(n: int) -> None:
        write_at(orders, awkward_orders(rng, next_id[0], n), t + len(done))
        next_id[0] += n

    if step == 1:  # inserts and an update of orders, events inserted (some matching orders), TPC-H's RF1 + RF2
        insert(6)
        done.append("insert")
        update_at(orders, {"status": "'B'", "qty": "qty + 1", "d10": "d10 * 2"}, f"id % 4 = {rng.randint(0, 3)}", t + 1)
        done.append("update")
        write_at(events, awkward_events(rng, [1, 3, 41, 42, 43]), t + 2)
        done.append("events insert")
        joins.rf_pair(Path(tpch), rng, range(500, 504), 1, t + 3)
        done.append("tpch rf")
    elif step == 2:  # no change of orders: the dimensions and events change
        update_at(customers, {"region": "'ü'", "seg": "NULL"}, f"id = {rng.randint(1, 4)}", t)
        done.append("customers")
        update_at(events, {"s": "'x '"}, "id % 3 = 0", t + 1)
        delete_at(events, "id % 5 = 1", t + 2)
        done.append("events update, delete")
        update_at(Path(tpch) / "customer", {"c_nationkey": "(c_nationkey + 1) % 8"}, "c_custkey % 7 = 3", t + 3)
        done.append("tpch customer")
    else:  # orders: a delete, an upsert, a MERGE rewriting every row, duplicates, groups dying; TPC-H's RF1 + RF2
        delete_at(orders, f"id % 5 = {rng.randint(0, 4)}", t)
        done.append("delete")
        ids = rng.sample(range(next_id[0]), 5)
        src = awkward_orders(rng, 0, 8).to_pylist()
        for row, i in zip(src, ids + list(range(next_id[0], next_id[0] + 3))):
            row["id"] = i
        next_id[0] += 3
        merge_at(orders, pa.Table.from_pylist(src, schema=ORDERS), t + 1)
        done.append("merge")
        whole = DeltaTable(orders).to_pyarrow_table().to_pylist()
        for row in whole:  # a MERGE rewriting every row: most unchanged, some changed
            if rng.random() < 0.25:
                row["f"] = rng.choice(DOUBLES)
                row["d6"] = None if row["d6"] is None else -row["d6"]
        merge_at(orders, pa.Table.from_pylist(whole, schema=ORDERS), t + 2)
        done.append("rewrite")
        dupes = rng.sample(whole, 4)  # rows again but for the id: duplicates in the views without it
        for i, row in enumerate(dupes):
            row["id"] = next_id[0] + i
        write_at(orders, pa.Table.from_pylist(dupes, schema=ORDERS), t + 3)
        next_id[0] += 4
        done.append("dupes")
        delete_at(orders, "status = 'C' OR s = 'x '", t + 4)
        done.append("kill groups")
        joins.rf_pair(Path(tpch), rng, range(600, 603), 5, t + 5)
        done.append("tpch rf")
    return done


# ---------------------------------------------------------------- exact comparison


def _cell_key(v: Any) -> Any:
    if isinstance(v, float):
        return ("float", math.isnan(v))
    return v


def _cells_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    return type(a) is type(b) and a == b


def differences(inc: pa.Table, full: pa.Table) -> list[str]:
    """What differs between two views' contents: the schema (names, types), then the rows as multisets."""
    out = []
    si = [(f.name, str(f.type)) for f in inc.schema]
    sf = [(f.name, str(f.type)) for f in full.schema]
    if si != sf:
        return [f"schema {si} != {sf}"]
    buckets: dict[tuple[Any, ...], list[tuple[Any, ...]]] = defaultdict(list)
    for row in full.to_pylist():
        r = tuple(row.values())
        buckets[tuple(_cell_key(v) for v in r)].append(r)
    extra = []
    for row in inc.to_pylist():
        r = tuple(row.values())
        cands = buckets.get(tuple(_cell_key(v) for v in r), [])
        for i, c in enumerate(cands):
            if all(_cells_equal(a, b) for a, b in zip(r, c)):
                cands.pop(i)
                break
        else:
            extra.append(r)
    missing = [r for rows in buckets.values() for r in rows]
    if extra:
        out.append(f"{len(extra)} row(s) only incremental: {extra[:5]}")
    if missing:
        out.append(f"{len(missing)} row(s) only full: {missing[:5]}")
    return out


def negative_zero_signs(table: pa.Table) -> int:
    """How many -0.0 cells the table holds."""
    return sum(
        1
        for row in table.to_pylist()
        for v in row.values()
        if isinstance(v, float) and v == 0 and math.copysign(1, v) < 0
    )


# ---------------------------------------------------------------- the refreshers


class ClassicRefresher:
    def __init__(self, spark: Any, catalog: Catalog) -> None:
        self.spark, self.catalog = spark, catalog

    def __call__(self, names: list[str], t: int, step: int) -> dict[str, str]:
        from mvsink.write.runners import refresh

        out = {}
        for name in names:
            try:
                res = refresh(
                    self.catalog.get(name),
                    t,
                    catalog=self.catalog,
                    runner="inprocess",
                    spark=self.spark,
                    run_id=f"r{step}",
                )
                out[name] = res.status
            except Exception as exc:  # noqa: BLE001 - reported per view
                out[name] = f"error: {type(exc).__name__}: {exc}"
        return out

    def close(self) -> None:
        pass


class ConnectRefresher:
    """A client process of the Connect server (``_serve``), fed one round of refreshes at a time."""

    def __init__(self, url: str, views: Path, log: Path) -> None:
        self.err = open(log, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.spark.test_mode_independence import _serve; _serve()", url, str(views)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            cwd=REPO,
            env=os.environ.copy(),
        )
        self.log = log
        self._answer()

    def _answer(self) -> Any:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(ANSWER):
                return json.loads(line[len(ANSWER) :])
        raise AssertionError(f"the Connect client exited: {self.log.read_text()[-3000:]}")

    def __call__(self, names: list[str], t: int, step: int) -> dict[str, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"views": names, "t": t, "run_id": f"r{step}"}) + "\n")
        self.proc.stdin.flush()
        return dict(self._answer())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=120)
        self.err.close()


def _serve() -> None:
    """The Connect client: refreshes the views each line of stdin names, answers their statuses on stdout."""
    from mvsink.incremental import groups
    from mvsink.spark.connect import remote_session
    from mvsink.write.runners import refresh

    url, views = sys.argv[1], sys.argv[2]
    groups.MAX_AFFECTED_FRACTION = 100.0  # as the classic session's test sets it
    spark = remote_session(url)
    catalog = Catalog(views)
    print(ANSWER + "{}", flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        out = {}
        for name in req["views"]:
            try:
                res = refresh(
                    catalog.get(name),
                    req["t"],
                    catalog=catalog,
                    runner="connect",
                    spark=spark,
                    remote=url,
                    run_id=req["run_id"],
                )
                out[name] = res.status
            except Exception as exc:  # noqa: BLE001 - reported per view
                out[name] = f"error: {type(exc).__name__}: {exc}"
        print(ANSWER + json.dumps(out), flush=True)


# ---------------------------------------------------------------- the test


@pytest.fixture
def eager(monkeypatch):
    """The cost guards off and the affected groups on: the tiny tables then take the incremental modes."""
    from mvsink.incremental import groups

    monkeypatch.setenv("MVSINK_INCREMENTAL_GROUPS", "true")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")
    monkeypatch.setenv("MVSINK_INCREMENTAL_PRUNE_MIN_BYTES", "0")
    monkeypatch.setattr(groups, "MAX_AFFECTED_FRACTION", 100.0)


TWINS = (("", True), ("_connect", True), ("_full", False))  # classic incremental, Connect incremental, full diff


def test_classic_connect_and_full_refreshes_hold_the_same_contents(spark, connect_url, env, eager, tmp_path):
    """One randomized history, three twins of every view: refreshed incrementally in a classic session, the same
    over Spark Connect (a client process of the run's server), and by the full diff. After every refresh: the
    Connect twin took exactly the classic twin's mode, and both hold exactly what the full diff holds."""
    data, views = env
    rng = random.Random(2026)
    initial_sources(data, rng)
    views_ = catalogue()
    assert len(views_) >= 20
    for name, (q, srcs, key) in views_.items():
        for suffix, inc in TWINS:
            extra: dict[str, Any] = {"key": key} if key else {}
            write_view(
                views,
                name + suffix,
                query=q,
                sources=srcs,
                target=f"views/{name}{suffix}",
                as_of=BASE,
                incremental=inc,
                **extra,
            )
    catalog = Catalog(views)
    classic = ClassicRefresher(spark, catalog)
    remote = ConnectRefresher(connect_url, views, tmp_path / "client.log")
    next_id, t = [40], BASE + HOUR
    diffs: list[str] = []
    modes: dict[str, list[str]] = {n: [] for n in views_}
    connect_modes: dict[str, list[str]] = {n: [] for n in views_}
    compared, notes = 0, Counter[str]()
    round_times: list[tuple[int, int]] = []
    full_reasons: dict[str, list[str]] = defaultdict(list)
    started = time.monotonic()
    try:
        for step in range(ROUNDS + 1):
            done = change(data, rng, step, next_id, t - 30 * 60_000) if step else []
            t0 = time.monotonic()
            statuses = classic([n + s for n in views_ for s in ("", "_full")], t, step)
            t1 = time.monotonic()
            statuses.update(remote([n + "_connect" for n in views_], t, step))
            round_times.append((round(t1 - t0), round(time.monotonic() - t1)))
            bad = {n: s for n, s in statuses.items() if s != "appended"}
            assert not bad, (step, bad)
            for name in views_:
                inc, over, full = (catalog.get(name + suffix) for suffix, _ in TWINS)
                last, last_over = appends(inc.target)[-1], appends(over.target)[-1]
                modes[name].append(str(last["mode"]))
                connect_modes[name].append(str(last_over["mode"]))
                if step and last["mode"] == "full":
                    full_reasons[name].append(f"round {step}: {last['mode_reason']}")
                if last_over["mode"] != last["mode"]:
                    diffs.append(
                        f"{name} round {step}: mode {last['mode']} in a classic session, {last_over['mode']} over "
                        f"Spark Connect ({last_over.get('mode_reason')})"
                    )
                full_mode = str(appends(full.target)[-1]["mode"])
                assert full_mode in ("full", "unchanged"), (name, step, full_mode)
                a, c, b = (read_view(x, as_of=t) for x in (inc, over, full))
                compared += 2
                for who, x in (("classic", a), ("connect", c)):
                    for d in differences(x, b):
                        diffs.append(f"{name} round {step} ({who} {modes[name][-1]}; {done}): {d}")
                    if negative_zero_signs(x) != negative_zero_signs(b):
                        notes[f"{name} {who}"] += 1
            t += HOUR
    finally:
        remote.close()
    changed = [(n, m) for n, ms in modes.items() for m in ms[1:] if m != "unchanged"]
    incremental = [(n, m) for n, m in changed if m.startswith("incremental")]
    summary = (
        f"{compared} refreshes compared, {len(changed)} after a change, {len(incremental)} incremental, in "
        f"{time.monotonic() - started:.0f}s (rounds, classic + full / Connect: {round_times}); -0.0 signs differ in "
        f"{dict(notes)}"
    )
    print(summary)
    for name, ms in modes.items():
        print(f"  {name}: {ms}")
    for name, rs in full_reasons.items():
        for r in rs:
            print(f"  FULL {name} {r}")
    assert not diffs, "\n".join([summary, *diffs])
    assert modes == connect_modes  # (every difference is listed above)
    # MIN/MAX from the state (where a change deleted some group's extreme: affected groups)
    assert "incremental:aggregate" in modes["ts_minmax"], modes["ts_minmax"]
    for name in ("ts_minmax", "groups_minmax"):
        assert set(modes[name][1:]) <= {"incremental:aggregate", "incremental:groups", "unchanged"}, modes[name]
        assert "_mv_agg_min0" in DeltaTable(str(data / "views" / name)).schema().to_arrow().names, name
    assert len(incremental) * 4 >= len(changed) * 3, (summary, modes, dict(full_reasons))
    for name in ("part_exists", "part_outer"):  # (the reason is the commit info's: the same in both sessions)
        assert "incremental:aggregate" in modes[name], (name, modes[name], full_reasons.get(name))


def write_view(views: Path, name: str, **fields: Any) -> None:
    from tests.support.viewfiles import write_view as write

    write(views, name, **fields)
