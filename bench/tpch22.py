"""How many of the 22 TPC-H queries refresh incrementally on TPC-H's own change stream (RF1 + RF2), or on a price
update of parts, partsupp and suppliers (``--stream dims``), or on 0.1 % of the orders updated, deleted and
inserted, scattered over every file (``--stream scattered``; bench/streams.py).

    python -m bench.tpch22 [--sf 1] [--pairs 1] [--stream rf|dims|scattered] [--rounds 1] [--queries 1,3,5]
                           [--out bench/reports/tpch22-sf<SF>[-dims].md] [--results bench/results]
                           [--path connect|inprocess]

Each query (the specification's text with its validation parameters; an ORDER BY without LIMIT dropped,
since a view is a multiset; an ORDER BY ... LIMIT kept, refreshed as a top-k with a declared key) becomes a
view over Delta sources made by tpchgen-cli (bench/tpch_refresh.py's layout: key order, files of about 32
MB). Every view is refreshed once (the full diff), then ``--pairs`` RF1 + RF2 pairs are committed
(bench/streams.py; ``--stream dims``: ``--pairs`` x 0.1 % of the parts, their partsupp rows and the suppliers
updated), and each view is refreshed again: the mode, why, its time, and the time of an overwrite
(Spark computes the query and replaces a Delta table) are recorded, and the view is checked exact against
DuckDB evaluating the same query over the same source snapshot (delta-rs's read, not Spark's).
``MVSINK_INCREMENTAL_GROUPS`` is on for the run (affected groups; mvsink's default since 2026-11-29).
By default (``--path connect``) every refresh is a new ``mvsink refresh --remote`` process and every overwrite a new
process (bench.connect_process's), both through one Spark Connect server: the path an Airflow task takes.
``--path inprocess`` runs both in this process's warm Spark. Writes a Markdown table and the raw rows (JSON) beside
it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import decimal
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)

import yaml  # noqa: E402

from bench.layout import REPORTS, RESULTS, command, link, raw_name  # noqa: E402
from bench.rows import mode_name  # noqa: E402
from bench.streams import make_stream  # noqa: E402
from bench.tpch_refresh import _overwrite, _versions, stamp, write_source  # noqa: E402

TABLES = ("lineitem", "orders", "customer", "supplier", "nation", "region", "part", "partsupp")

# (query, key for a top-k view or None); validation parameters of the specification (2.4.x.3)
QUERIES: dict[int, tuple[str, list[str] | None]] = {
    1: (
        """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty,
  avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus""",
        None,
    ),
    2: (
        """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
FROM part, supplier, partsupp, nation, region
WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE '%BRASS'
  AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE'
  AND ps_supplycost = (SELECT min(ps_supplycost) FROM partsupp, supplier, nation, region
    WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey
      AND n_regionkey = r_regionkey AND r_name = 'EUROPE')
ORDER BY s_acctbal DESC, n_name, s_name, p_partkey LIMIT 100""",
        ["p_partkey", "s_name"],
    ),
    3: (
        """SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate, l_orderkey LIMIT 10""",
        ["l_orderkey"],
    ),
    4: (
        """SELECT o_orderpriority, count(*) AS order_count FROM orders
WHERE o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-10-01'
  AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
GROUP BY o_orderpriority""",
        None,
    ),
    5: (
        """SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer, orders, lineitem, supplier, nation, region
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey AND c_nationkey = s_nationkey
  AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'ASIA'
  AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'
GROUP BY n_name""",
        None,
    ),
    6: (
        """SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
        None,
    ),
    7: (
        """SELECT supp_nation, cust_nation, l_year, sum(volume) AS revenue FROM (
  SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, extract(year FROM l_shipdate) AS l_year,
    l_extendedprice * (1 - l_discount) AS volume
  FROM supplier, lineitem, orders, customer, nation n1, nation n2
  WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey
    AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey
    AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
    AND l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31') AS shipping
GROUP BY supp_nation, cust_nation, l_year""",
        None,
    ),
    8: (
        """SELECT o_year, sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) / sum(volume) AS mkt_share FROM (
  SELECT extract(year FROM o_orderdate) AS o_year, l_extendedprice * (1 - l_discount) AS volume, n2.n_name AS nation
  FROM part, supplier, lineitem, orders, customer, nation n1, nation n2, region
  WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = o_orderkey AND o_custkey = c_custkey
    AND c_nationkey = n1.n_nationkey AND n1.n_regionkey = r_regionkey AND r_name = 'AMERICA'
    AND s_nationkey = n2.n_nationkey AND o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
    AND p_type = 'ECONOMY ANODIZED STEEL') AS all_nations
GROUP BY o_year""",
        None,
    ),
    9: (
        """SELECT nation, o_year, sum(amount) AS sum_profit FROM (
  SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year,
    l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
  FROM part, supplier, lineitem, partsupp, orders, nation
  WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey AND p_partkey = l_partkey
    AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey AND p_name LIKE '%green%') AS profit
GROUP BY nation, o_year""",
        None,
    ),
    10: (
        """SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name, c_address,
  c_phone, c_comment
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01'
  AND o_orderdate < DATE '1994-01-01' AND l_returnflag = 'R' AND c_nationkey = n_nationkey
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC, c_custkey LIMIT 20""",
        ["c_custkey"],
    ),
    11: (
        """SELECT ps_partkey, sum(ps_supplycost * ps_availqty) AS value
FROM partsupp, supplier, nation
WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
GROUP BY ps_partkey HAVING sum(ps_supplycost * ps_availqty) > (
  SELECT sum(ps_supplycost * ps_availqty) * {fraction} FROM partsupp, supplier, nation
  WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY')""",
        None,
    ),
    12: (
        """SELECT l_shipmode,
  sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count,
  sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END) AS low_line_count
FROM orders, lineitem
WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate
  AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'
GROUP BY l_shipmode""",
        None,
    ),
    13: (
        """SELECT c_count, count(*) AS custdist FROM (
  SELECT c_custkey, count(o_orderkey) AS c_count
  FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
  GROUP BY c_custkey) AS c_orders
GROUP BY c_count""",
        None,
    ),
    14: (
        """SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
  / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
FROM lineitem, part
WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'""",
        None,
    ),
    15: (
        """WITH revenue0 AS (
  SELECT l_suppkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue FROM lineitem
  WHERE l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01' GROUP BY l_suppkey)
SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue0
WHERE s_suppkey = supplier_no AND total_revenue = (SELECT max(total_revenue) FROM revenue0)""",
        None,
    ),
    16: (
        """SELECT p_brand, p_type, p_size, count(DISTINCT ps_suppkey) AS supplier_cnt
FROM partsupp, part
WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%'
  AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
  AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
GROUP BY p_brand, p_type, p_size""",
        None,
    ),
    17: (
        """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part
WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
  AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)""",
        None,
    ),
    18: (
        """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) AS sum_qty
FROM customer, orders, lineitem
WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)
  AND c_custkey = o_custkey AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
ORDER BY o_totalprice DESC, o_orderdate, o_orderkey LIMIT 100""",
        ["o_orderkey"],
    ),
    19: (
        """SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part
WHERE (p_partkey = l_partkey AND p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
    AND l_quantity >= 1 AND l_quantity <= 11 AND p_size BETWEEN 1 AND 5 AND l_shipmode IN ('AIR', 'AIR REG')
    AND l_shipinstruct = 'DELIVER IN PERSON')
  OR (p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
    AND l_quantity >= 10 AND l_quantity <= 20 AND p_size BETWEEN 1 AND 10 AND l_shipmode IN ('AIR', 'AIR REG')
    AND l_shipinstruct = 'DELIVER IN PERSON')
  OR (p_partkey = l_partkey AND p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
    AND l_quantity >= 20 AND l_quantity <= 30 AND p_size BETWEEN 1 AND 15 AND l_shipmode IN ('AIR', 'AIR REG')
    AND l_shipinstruct = 'DELIVER IN PERSON')""",
        None,
    ),
    20: (
        """SELECT s_name, s_address FROM supplier, nation
WHERE s_suppkey IN (SELECT ps_suppkey FROM partsupp
    WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
      AND ps_availqty > (SELECT 0.5 * sum(l_quantity) FROM lineitem WHERE l_partkey = ps_partkey
        AND l_suppkey = ps_suppkey AND l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'))
  AND s_nationkey = n_nationkey AND n_name = 'CANADA'""",
        None,
    ),
    21: (
        """SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation
WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F'
  AND l1.l_receiptdate > l1.l_commitdate
  AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)
  AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey AND l3.l_suppkey <> l1.l_suppkey
    AND l3.l_receiptdate > l3.l_commitdate)
  AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA'
GROUP BY s_name ORDER BY numwait DESC, s_name LIMIT 100""",
        ["s_name"],
    ),
    22: (
        """SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal FROM (
  SELECT substring(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer
  WHERE substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')
    AND c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00
      AND substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17'))
    AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale
GROUP BY cntrycode""",
        None,
    ),
}


def query_text(n: int, sf: float) -> str:
    return QUERIES[n][0].replace("{fraction}", repr(0.0001 / sf))


def sources_of(sql: str) -> list[str]:
    low = re.sub(r"'[^']*'", "''", sql.lower())  # not a word inside a string literal
    return [t for t in TABLES if re.search(rf"\b{t}\b", low)]


def generate(root: Path, sf: float, t0: int) -> None:
    """The eight TPC-H tables from tpchgen-cli as Delta sources under ``root/src`` (tpch_refresh's layout)."""
    raw = root / "raw"
    if not all((raw / f"{t}.parquet").exists() for t in TABLES):
        raw.mkdir(parents=True, exist_ok=True)
        cli = str(Path(sys.executable).parent / "tpchgen-cli")
        subprocess.run(
            [cli, "parquet", "-s", str(sf), "--tables", ",".join(TABLES), "--output-dir", str(raw)], check=True
        )
    for t in TABLES:
        shutil.rmtree(root / "src" / t, ignore_errors=True)
        write_source(raw / f"{t}.parquet", root / "src" / t, file_mb=32, cdf=True)
        stamp(root / "src" / t, t0)


def _norm(v: Any) -> Any:
    if isinstance(v, (float, decimal.Decimal)):
        return round(float(v), 4)
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    return v


def _close(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(sorted(a, key=repr), sorted(b, key=repr)):
        for u, w in zip(x, y):
            if isinstance(u, float) and isinstance(w, float):
                if abs(u - w) > max(1e-6, 1e-9 * max(abs(u), abs(w))) and round(u, 2) != round(w, 2):
                    return False
            elif u != w:
                return False
    return True


def oracle_rows(sql: str, root: Path, sources: list[str], ts: int) -> list[tuple[Any, ...]]:
    """The query by DuckDB over delta-rs's snapshots of the sources as of ``ts``."""
    import duckdb
    from deltalake import DeltaTable

    from mvsink.core.table import version_at

    con = duckdb.connect()
    for s in sources:
        path = str(root / "src" / s)
        con.register(s, DeltaTable(path, version=version_at(path, ts, role="bench")).to_pyarrow_table())
    return [tuple(_norm(v) for v in r) for r in con.sql(sql).fetchall()]


def view_rows(view: Any, ts: int) -> list[tuple[Any, ...]]:
    from mvsink.readers.arrow import read_view

    t = read_view(view, as_of=ts)
    cols = [c for c in t.column_names if c not in ("_mv_time", "_mv_diff")]
    return [tuple(_norm(r[c]) for c in cols) for r in t.select(cols).to_pylist()]


@contextlib.contextmanager
def _runner(
    path: str, root: Path, views_dir: Path, catalog: Any
) -> Iterator[tuple[Callable[[str, int, str], dict[str, Any]], Callable[[str, Any], float]]]:
    """(refresh(view name, time, run id) -> its result as a dict, overwrite(view name, view) -> seconds) on ``path``:
    ``connect``, each a new process through one Spark Connect server started here (bench.connect_process's); or
    ``inprocess``, this process's Spark."""
    if path == "connect":
        from bench.connect_process import SERVER_CONF, overwrite, refresh
        from bench.tpch_refresh import compile_package
        from mvsink.devtools.localairflow import free_port
        from mvsink.spark.connect import start_server

        compile_package()
        port = free_port()
        remote = f"sc://127.0.0.1:{port}"
        server = start_server(port=port, conf=SERVER_CONF, log_path=root / "connect-server.log")
        try:

            def refresh_one(name: str, t: int, run_id: str) -> dict[str, Any]:
                return refresh(name, t, remote=remote, views_dir=views_dir)[1]

            def overwrite_one(name: str, view: Any) -> float:
                srcs = {s: root / "src" / s for s in sources_of(view.query)}
                return overwrite(name, view.query, srcs, root / "overwrite" / name, remote=remote)[0]

            yield refresh_one, overwrite_one
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
        return
    from mvsink.write.runners import local_session
    from mvsink.write.runners import refresh as refresh_in

    spark = local_session(conf={"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]

    def refresh_here(name: str, t: int, run_id: str) -> dict[str, Any]:
        res = refresh_in(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=run_id)
        return {"status": res.status, "mode": res.mode, "reason": res.reason, "reads": res.reads}

    def overwrite_here(name: str, view: Any) -> float:
        return float(_overwrite(spark, view, root / "overwrite" / name, jvm_pid)["overwrite_s"])

    yield refresh_here, overwrite_here


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--pairs", type=int, default=1, help="RF1 + RF2 pairs committed before the measured refresh")
    ap.add_argument(
        "--stream",
        choices=("rf", "dims", "scattered"),
        default="rf",
        help="rf: TPC-H's RF1 + RF2; dims: --pairs x 0.1%% of the parts, their partsupp rows and the suppliers "
        "updated; scattered: --pairs x 0.1%% of the orders (and their lineitems) updated, deleted and inserted, "
        "spread over every file (bench/streams.py)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="changes applied and refreshed in turn (a day apart); round 2 on shows the steady state, where a "
        "refresh may run from plan facts the one before kept",
    )
    ap.add_argument("--queries", default=",".join(str(q) for q in QUERIES))
    ap.add_argument("--root", default="/tmp/mvsink-tpch22")
    ap.add_argument("--out", help="the report (default: bench/reports/tpch22-sf<SF>.md)")
    ap.add_argument("--results", default=str(RESULTS), help="folder of the raw rows, one JSON file per run")
    ap.add_argument(
        "--path",
        choices=("connect", "inprocess"),
        default="connect",
        help="connect (default): each refresh and each overwrite a new process through one Spark Connect server, "
        "as an Airflow task runs it; inprocess: both in this process's warm Spark",
    )
    args = ap.parse_args()
    numbers = [int(q) for q in args.queries.split(",")]
    root = Path(args.root) / f"sf{args.sf}"
    t0 = 1_767_225_600_000
    day = 86_400_000
    date = dt.datetime.now(dt.UTC)
    print(f"generating TPC-H SF{args.sf} (8 tables) under {root} ...", flush=True)
    generate(root, args.sf, t0)
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    os.environ["MVSINK_INCREMENTAL_GROUPS"] = "true"
    views_dir = root / "views"
    shutil.rmtree(views_dir, ignore_errors=True)
    shutil.rmtree(root / "out", ignore_errors=True)
    views_dir.mkdir(parents=True)
    for n in numbers:
        sql, key = query_text(n, args.sf), QUERIES[n][1]
        doc: dict[str, Any] = {
            "name": f"q{n}",
            "query": sql,
            "sources": {s: f"src/{s}" for s in sources_of(sql)},
            "target": f"out/q{n}",
            "as_of": t0,
        }
        if key:
            doc["key"] = key
        (views_dir / f"q{n}.yaml").write_text(yaml.safe_dump(doc))

    from mvsink.definitions.catalog import Catalog

    catalog = Catalog(views_dir)
    t1, t2 = t0 + day, t0 + 2 * day
    with _runner(args.path, root, views_dir, catalog) as (refresh_one, overwrite_one):
        for n in numbers:
            res = refresh_one(f"q{n}", t1, "initial")
            print(f"q{n}: initial {res['status']} {res['mode']}", flush=True)
        rows = []
        changes = []
        stream = make_stream(args.stream, root, args.sf)  # (one for every round: RF pairs move on through its cursor)
        for rnd in range(1, args.rounds + 1):
            at = t2 + (rnd - 1) * day
            changed = stream.apply(args.pairs * 0.001, rnd, at - 3_600_000)
            changes.append(changed)
            for n in numbers:
                view = catalog.get(f"q{n}")
                s = time.monotonic()
                res = refresh_one(f"q{n}", at, f"rf-q{n}-{rnd}")
                refresh_s = time.monotonic() - s
                ow_s = overwrite_one(f"q{n}", view)
                from mvsink.core.table import ViewTable

                info = ViewTable.open(view).history(limit=1)[0].info
                exact = _close(view_rows(view, at), oracle_rows(view.query, root, sources_of(view.query), at))
                row = {
                    "query": n,
                    "round": rnd,
                    "sf": args.sf,
                    "stream": args.stream,
                    "path": "connect-process" if args.path == "connect" else "in-process",
                    "view": f"q{n}",
                    "mode": mode_name(str(res["mode"] or ("unchanged" if res.get("status") == "appended" else ""))),
                    "reason": (info.mode_reason if info else "") or res.get("reason") or "",
                    "refresh_s": refresh_s,
                    "overwrite_s": ow_s,
                    "reads": res.get("reads"),
                    "timings": res.get("timings"),
                    "spark_jobs": res.get("spark_jobs"),
                    "exact": exact,
                }
                rows.append(row)
                print(
                    f"round {rnd} q{n}: {row['mode']} {refresh_s:.2f}s vs overwrite {ow_s:.2f}s exact={exact}",
                    flush=True,
                )
        changed = changes[0]
    tail = "" if args.stream == "rf" else f"-{args.stream}"
    out = Path(args.out or REPORTS / f"tpch22-sf{args.sf:g}{tail}.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": date.isoformat(timespec="seconds"),
        "command": command("bench.tpch22"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": _versions(),
        "sf": args.sf,
        "pairs": args.pairs,
        "stream": args.stream,
        "path": args.path,
        "changed": changed,
        "rounds": args.rounds,
        "changes": changes,
    }
    raw_path = Path(args.results) / raw_name("tpch22", date, f"sf{args.sf:g}-{args.stream}")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({**meta, "rows": rows}, indent=1, default=str))
    print(f"wrote {raw_path}", flush=True)
    first = [r for r in rows if r["round"] == 1]
    incremental = [r for r in first if r["mode"] not in ("full", "", "unchanged")]
    unchanged = len(first) - len(incremental) - sum(1 for r in first if r["mode"] == "full")
    lines = [
        (
            f"# The 22 TPC-H queries on RF1 + RF2 (SF {args.sf}, {args.pairs} pair(s))"
            if args.stream == "rf"
            else f"# The 22 TPC-H queries on {args.pairs} x 0.1 % of the orders updated, deleted and inserted "
            f"({changed.get('orders_updated')}, {changed.get('orders_deleted')}, {changed.get('orders_inserted')}), "
            f"scattered over every file (SF {args.sf})"
            if args.stream == "scattered"
            else f"# The 22 TPC-H queries on a price update of {changed.get('parts_updated')} parts, "
            f"{changed.get('partsupp_updated')} partsupp rows and {changed.get('suppliers_updated')} suppliers "
            f"(SF {args.sf})"
        ),
        "",
        f"{meta['date']}, {meta['machine']}; {meta['versions']}. `{meta['command']}`; "
        "`MVSINK_INCREMENTAL_GROUPS=true`. "
        + (
            "Each refresh and each overwrite a new process through one Spark Connect server (the path an Airflow "
            "task takes). "
            if args.path == "connect"
            else "Refreshes and overwrites in one warm in-process Spark. "
        )
        + (
            "One refresh each after the change (no repeats: ratios are indicative)"
            if args.rounds == 1
            else f"{args.rounds} rounds, each a change (the stream's next) and one refresh of each view: round 1 is the "
            "first refresh after the first build, the later ones the steady state (a refresh may run from plan facts "
            "the one before kept); no repeats, ratios are indicative"
        )
        + "; exact = the view equals DuckDB over the same snapshot.",
        "",
        f"Raw rows: {link(raw_path, out)}.",
        "",
        f"**{len(incremental)} of {len(first)}** refresh incrementally ({unchanged} unchanged: the change touches "
        "none of their sources)" + (" in round 1" if args.rounds > 1 else "") + "; "
        f"{sum(1 for r in rows if r['exact'])} of {len(rows)} exact.",
        "",
        "| query | round | mode | refresh s | overwrite s | ratio | exact | why not incremental |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(rows, key=lambda r: (r["query"], r["round"])):
        why = "" if r["mode"] != "full" else str(r["reason"]).replace("|", "/")[:300]
        lines.append(
            f"| Q{r['query']} | {r['round']} | {r['mode']} | {r['refresh_s']:.2f} | {r['overwrite_s']:.2f} | "
            f"{r['refresh_s'] / max(r['overwrite_s'], 1e-9):.2f} | {'yes' if r['exact'] else '**no**'} | {why} |"
        )
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", flush=True)
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
