"""Refresh cost against full overwrite, MERGE on key and the compute-only floor (TPC-H).

    python bench/tpch_refresh.py [--sf 0.1] [--rates 0,0.001,0.01,0.1] [--out bench/RESULTS.md]

For each view (Q1-style aggregate, Q3-style join + aggregate, orders x customer projection)
and change rate, in one warm in-process Spark (local[2]):
  floor      evaluate the view, noop sink
  overwrite  Spark computes the view and replaces a Delta table (Parquet + delta-rs overwrite commit)
  merge      Spark computes the view, delta-rs MERGE on the view's key (matched update,
             not matched insert, not matched by source delete)
  refresh    this project: mint, write (corrections), append
Source changes are committed with delta-rs between refreshes: a fraction of orders updated
(o_totalprice, o_orderstatus), deleted (with their lineitems) and inserted (copies with new keys).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from mvsink.table import set_commit_time  # noqa: E402

VIEWS = {
    "q1": ("""SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus""",
           ["lineitem"], ["l_returnflag", "l_linestatus"]),
    "q3": ("""SELECT l_orderkey, o_orderdate, o_shippriority, sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey
WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority""", ["customer", "orders", "lineitem"], ["l_orderkey"]),
    "wide": ("""SELECT o_orderkey, o_orderstatus, o_totalprice, o_orderdate, o_orderpriority, c_name, c_nationkey,
       c_mktsegment, c_acctbal FROM orders JOIN customer ON o_custkey = c_custkey""",
             ["orders", "customer"], ["o_orderkey"]),
}
DAY = 86_400_000


def stamp(path: Path, ts: int) -> None:
    set_commit_time(str(path), ts)


def generate(root: Path, sf: float, t0: int) -> None:
    raw = root / "raw"
    if not (raw / "lineitem.parquet").exists():
        raw.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(Path(sys.executable).parent / "tpchgen-cli"), "parquet", "-s", str(sf),
                        "--tables", "lineitem,orders,customer", "--output-dir", str(raw)], check=True)
    for t in ("lineitem", "orders", "customer"):
        shutil.rmtree(root / "src" / t, ignore_errors=True)
        table = pq.read_table(raw / f"{t}.parquet")
        table = table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type)
                                      for f in table.schema]))
        write_deltalake(str(root / "src" / t), table)
        stamp(root / "src" / t, t0)


def change(root: Path, rate: float, step: int, ts: int) -> None:
    """Update, delete and insert about ``rate`` of the orders (and their lineitems) in 3 commits."""
    if rate <= 0:
        return
    orders, lineitem = DeltaTable(str(root / "src" / "orders")), DeltaTable(str(root / "src" / "lineitem"))
    m = max(3, round(3 / rate))
    r = (7 * step) % m
    orders.update(updates={"o_totalprice": "o_totalprice + 1", "o_orderstatus": "'X'"},
                  predicate=f"o_orderkey % {m} = {r}")
    stamp(root / "src" / "orders", ts)
    orders = DeltaTable(str(root / "src" / "orders"))
    orders.delete(f"o_orderkey % {m} = {(r + 1) % m}")
    stamp(root / "src" / "orders", ts + 1)
    lineitem.delete(f"l_orderkey % {m} = {(r + 1) % m}")
    stamp(root / "src" / "lineitem", ts + 1)
    offset = 10_000_000_000 * (step + 1)
    for t, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        current = pa.table(DeltaTable(str(root / "src" / t)).to_pyarrow_table())
        keys = np.asarray(current.column(key).to_numpy(zero_copy_only=False))
        add = current.filter(pa.array(keys % m == (r + 2) % m))
        add = add.set_column(add.schema.get_field_index(key), key, pa.compute.add(add.column(key), offset))
        write_deltalake(str(root / "src" / t), add, mode="append")
        stamp(root / "src" / t, ts + 2)


def dir_bytes(paths: list[str]) -> int:
    return sum(os.path.getsize(p.removeprefix("file://")) for p in paths)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--rates", default="0,0.001,0.01,0.1")
    ap.add_argument("--root", default="/tmp/mvsink-bench")
    ap.add_argument("--out", default=str(Path(__file__).parent / "RESULTS.md"))
    args = ap.parse_args()
    root = Path(args.root) / f"sf{args.sf}"
    t0 = 1_767_225_600_000
    print(f"generating TPC-H SF{args.sf} under {root} ...", flush=True)
    generate(root, args.sf, t0)
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    views_dir = root / "views"
    shutil.rmtree(views_dir, ignore_errors=True)
    shutil.rmtree(root / "out", ignore_errors=True)
    views_dir.mkdir(parents=True)
    for name, (sql, sources, key) in VIEWS.items():
        (views_dir / f"{name}.yaml").write_text(yaml.safe_dump({
            "name": name, "query": sql, "sources": {s: f"src/{s}" for s in sources}, "target": f"out/{name}",
            "as_of": t0, "key": key}))

    from mvsink.mint import mint
    from mvsink.refresh import refresh
    from mvsink.sparkrun import local_session
    from mvsink.view import Catalog
    from mvsink.write import register_sources

    spark = local_session(conf={"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    catalog = Catalog(views_dir)
    rows: list[dict[str, object]] = []
    rates = [float(x) for x in args.rates.split(",")]
    t = t0 + DAY
    for name in VIEWS:  # initial load of every view (not measured)
        refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark)
    for step, rate in enumerate(rates, start=1):
        t += DAY
        change(root, rate, step, t - 3_600_000)
        for name, (_sql, _sources, key) in VIEWS.items():
            view = catalog.get(name)
            desc = mint(view, t, catalog=catalog, run_id="bench-probe", dry_run=True)
            register_sources(spark, view, desc)  # type: ignore[arg-type]
            desired = spark.sql(view.query)
            s = time.monotonic()
            desired.write.format("noop").mode("overwrite").save()
            floor = time.monotonic() - s

            ow_path = root / "out" / f"{name}_overwrite"
            s = time.monotonic()
            spark.sql(view.query).write.mode("overwrite").parquet(str(ow_path / "stage"))
            table = pa.table(pq.read_table(ow_path / "stage"))
            write_deltalake(str(ow_path / "delta"), table, mode="overwrite")
            overwrite = time.monotonic() - s
            ow_dt = DeltaTable(str(ow_path / "delta"))
            ow_bytes = dir_bytes(ow_dt.file_uris())

            mg_path = root / "out" / f"{name}_merge"
            s = time.monotonic()
            src = pa.table(spark.sql(view.query).toArrow())
            if not (mg_path / "_delta_log").exists():
                write_deltalake(str(mg_path), src)
                merge_bytes = dir_bytes(DeltaTable(str(mg_path)).file_uris())
            else:
                mdt = DeltaTable(str(mg_path))
                before = set(mdt.file_uris())
                pred = " AND ".join(f"t.{k} = s.{k}" for k in key)
                (mdt.merge(src, predicate=pred, source_alias="s", target_alias="t")
                 .when_matched_update_all().when_not_matched_insert_all().when_not_matched_by_source_delete()
                 .execute())
                merge_bytes = dir_bytes(sorted(set(DeltaTable(str(mg_path)).file_uris()) - before))
            merge = time.monotonic() - s

            s = time.monotonic()
            res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"bench-{step}")
            total = time.monotonic() - s
            rows.append({"view": name, "rate": rate, "floor_s": floor, "overwrite_s": overwrite,
                         "overwrite_bytes": ow_bytes, "merge_s": merge, "merge_bytes": merge_bytes,
                         "refresh_s": total, "mint_s": res.timings.get("mint", 0), "write_s": res.timings.get("write", 0),
                         "append_s": res.timings.get("append", 0), "refresh_bytes": res.bytes,
                         "refresh_rows": res.rows_added + res.rows_retracted, "refresh_files": res.files,
                         "status": res.status})
            print(json.dumps(rows[-1]), flush=True)
    spark.stop()
    write_report(Path(args.out), rows, args.sf)
    return 0


def write_report(out: Path, rows: list[dict[str, object]], sf: float) -> None:
    head = ("| view | change | floor s | overwrite s | overwrite bytes | MERGE s | MERGE bytes | refresh s "
            "| (mint / write / append s) | refresh bytes | rows | files | refresh ÷ overwrite | refresh ÷ floor |")
    lines = [f"# Refresh vs overwrite vs MERGE (TPC-H SF{sf})", "",
             f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores; {platform.platform()}; "
             f"Python {platform.python_version()}; one warm in-process Spark local[2] for all strategies; "
             "single run per cell (noisy, shared machine).", "", head,
             "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['view']} | {float(r['rate']):.1%} | {float(r['floor_s']):.2f} | {float(r['overwrite_s']):.2f} | "
            f"{r['overwrite_bytes']} | {float(r['merge_s']):.2f} | {r['merge_bytes']} | {float(r['refresh_s']):.2f} | "
            f"{float(r['mint_s']):.3f} / {float(r['write_s']):.2f} / {float(r['append_s']):.3f} | {r['refresh_bytes']} | "
            f"{r['refresh_rows']} | {r['refresh_files']} | "
            f"{float(r['refresh_s']) / max(float(r['overwrite_s']), 1e-9):.2f} | "
            f"{float(r['refresh_s']) / max(float(r['floor_s']), 1e-9):.2f} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
