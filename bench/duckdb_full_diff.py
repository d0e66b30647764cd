"""Throwaway measurement (issue 38; not part of ``make bench``): the full diff of the TPC-H ``wide`` view computed by
DuckDB in the refreshing process against Spark's full diff and an overwrite, warm, classic Spark local[2] in-process.

It copies the ``orders`` and ``customer`` sources of an existing benchmark run (read only: ``--from``, default
``/tmp/mvsink-bench/connect-sf1.0/src``) under ``--root``, builds two twin views of ``wide`` (``incremental: false``):
one whose full diffs run in DuckDB, one in Spark (``MVSINK_DUCKDB_FULL_DIFF=false``), then per round appends a 1 %
change to ``orders`` (new orders: copies of existing rows under new keys) and times each refresh and an overwrite
(Spark computes the view into Parquet, delta-rs overwrites a Delta table with it). A last round hand-edits 0.1 % of
each table's rows (deleted) with no source change beyond a small append. Prints one line per measurement.

    PYTHONPATH=plugins .venv/bin/python bench/duckdb_full_diff.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tpch_refresh import VIEWS  # noqa: E402
from mvsink.core.deltalog import set_commit_time  # noqa: E402

MINUTE = 60_000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="src", default="/tmp/mvsink-bench/connect-sf1.0/src")
    p.add_argument("--root", default="/tmp/mvsink-duckfull-bench")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    root = Path(args.root)
    shutil.rmtree(root, ignore_errors=True)
    (root / "src").mkdir(parents=True)
    for t in ("orders", "customer"):
        shutil.copytree(Path(args.src) / t, root / "src" / t)
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    t0 = max(int(DeltaTable(str(root / "src" / t)).history(1)[0]["timestamp"]) for t in ("orders", "customer"))
    query, sources, _ = VIEWS["wide"]
    views = root / "views"
    views.mkdir()
    for name in ("wide_duck", "wide_spark"):
        doc = {
            "name": name,
            "query": query,
            "sources": {s: f"src/{s}" for s in sources},
            "target": f"out/{name}",
            "as_of": t0,
            "incremental": False,
        }
        (views / f"{name}.yaml").write_text(yaml.safe_dump(doc))

    from mvsink.definitions.catalog import Catalog
    from mvsink.write.runners import local_session, refresh

    spark = local_session("local[2]", {"spark.driver.memory": "4g"})
    catalog = Catalog(views)
    orders = root / "src" / "orders"
    sample = pq.read_table(DeltaTable(str(orders)).file_uris()[0]).slice(0, 15_000)  # ~1 % of SF 1's orders

    def timed(name: str, t: int, label: str) -> None:
        os.environ["MVSINK_DUCKDB_FULL_DIFF"] = "true" if name == "wide_duck" else "false"
        s = time.monotonic()
        res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"{name}{t}")
        took = time.monotonic() - s
        stage = res.timings.get("write.corrections", 0.0) + res.timings.get("write.stage", 0.0)
        reason = DeltaTable(str(root / "out" / name)).history(1)[0].get("mvsink.mode_reason", "")
        print(f"{label:12} {name:11} {took:6.2f} s (corrections+stage {stage:5.2f} s) rows={res.rows_added} {reason}")

    def overwrite(label: str) -> None:
        s = time.monotonic()
        for src in sources:  # the sources as they are now (Delta's reader)
            spark.read.format("delta").load(str(root / "src" / src)).createOrReplaceTempView(src)
        spark.sql(query).write.mode("overwrite").parquet(str(root / "ow" / "stage"))
        write_deltalake(str(root / "ow" / "delta"), pa.table(pq.read_table(root / "ow" / "stage")), mode="overwrite")
        print(f"{label:12} {'overwrite':11} {time.monotonic() - s:6.2f} s")

    overwrite("warm-up")
    t = t0 + MINUTE
    for name in ("wide_duck", "wide_spark"):
        timed(name, t, "first build")
    for r in range(args.rounds + 1):
        keys = pc.add(sample.column("o_orderkey"), pa.scalar(10_000_000 * (r + 1), sample.column("o_orderkey").type))
        write_deltalake(str(orders), sample.set_column(0, "o_orderkey", keys), mode="append")
        set_commit_time(str(orders), t + 10)
        t += MINUTE
        label = f"1% change {r}" if r < args.rounds else "hand edit"
        if r == args.rounds:  # 0.1 % of each table's rows deleted by hand
            for name in ("wide_duck", "wide_spark"):
                DeltaTable(str(root / "out" / name)).delete("o_orderkey % 1000 = 7")
        overwrite(label)
        for name in ("wide_duck", "wide_spark"):
            timed(name, t, label)
    spark.stop()


if __name__ == "__main__":
    main()
