"""Demo: source tables with four days of history, two views refreshed at several times.

    python -m mvsink.devtools.demo [--data-root DIR] [--views-dir DIR] [--spark-submit]

Creates Delta tables ``demo/orders`` and ``demo/customers`` under the data root with
inserts, updates and deletes committed on 2026-11-01..04 (commit times set in the log),
then refreshes the example views of ``dags/views`` after each day and prints their
contents and status, plus a repeated refresh (up to date) and a no-change refresh.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import shutil
import sys
from decimal import Decimal
from pathlib import Path

from mvsink import settings
from mvsink.core.deltalog import set_commit_time
from mvsink.times import format_time, parse_time
from mvsink.write.runners import Runner

DAY = 86_400_000
START = parse_time("2026-11-01T00:00:00Z")


def build_sources(root: Path) -> list[tuple[int, str]]:
    """Write the demo's source history; returns (commit time, what changed)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    orders, customers = root / "demo" / "orders", root / "demo" / "customers"
    shutil.rmtree(root / "demo", ignore_errors=True)
    schema = pa.schema(
        [
            ("order_id", pa.int64()),
            ("customer_id", pa.int32()),
            ("status", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("order_date", pa.date32()),
        ]
    )

    def rows(*items: tuple) -> pa.Table:
        return pa.Table.from_pylist(
            [dict(zip(schema.names, (i, c, s, Decimal(a), _dt.date(2026, 11, d)))) for i, c, s, a, d in items],
            schema=schema,
        )

    log: list[tuple[int, str]] = []
    t = START + 2 * 3_600_000
    write_deltalake(
        str(customers), pa.table({"customer_id": pa.array([1, 2, 3], pa.int32()), "region": ["EMEA", "AMER", "APAC"]})
    )
    set_commit_time(str(customers), t)
    write_deltalake(
        str(orders),
        rows(
            (1, 1, "OPEN", "120.00", 1),
            (2, 2, "OPEN", "80.50", 1),
            (3, 3, "SHIPPED", "42.00", 1),
            (4, 1, "OPEN", "120.00", 1),
        ),
    )
    set_commit_time(str(orders), t + 1)
    log.append((t, "day 1: 3 customers, 4 orders (orders 1 and 4 identical but for the id)"))

    t = START + DAY + 3_600_000
    write_deltalake(str(orders), rows((5, 2, "OPEN", "300.00", 2), (6, 4, "OPEN", "15.25", 2)), mode="append")
    set_commit_time(str(orders), t)
    log.append((t, "day 2: orders 5 and 6 inserted (customer 4 is unknown)"))

    t = START + 2 * DAY + 3_600_000
    DeltaTable(str(orders)).update(updates={"status": "'SHIPPED'"}, predicate="order_id IN (1, 2)")
    set_commit_time(str(orders), t)
    write_deltalake(
        str(customers), pa.table({"customer_id": pa.array([4], pa.int32()), "region": ["EMEA"]}), mode="append"
    )
    set_commit_time(str(customers), t + 1)
    log.append((t, "day 3: orders 1 and 2 shipped; customer 4 added to EMEA"))

    t = START + 3 * DAY + 3_600_000
    DeltaTable(str(orders)).delete("order_id = 3")
    set_commit_time(str(orders), t)
    log.append((t, "day 4: order 3 deleted"))
    return log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mvsink.devtools.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=str(settings.data_root() or "data"))
    parser.add_argument("--views-dir", default=str(settings.views_dir()))
    parser.add_argument(
        "--spark-submit",
        action="store_true",
        help="run each write through spark-submit (as Airflow does) instead of one in-process Spark",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    root = Path(args.data_root).resolve()
    settings.export(settings.DATA_ROOT, str(root))  # the view files' relative paths resolve here
    settings.prepare_local_spark()

    from mvsink.cli.app import _print_rows
    from mvsink.definitions.catalog import Catalog
    from mvsink.readers.arrow import read_view
    from mvsink.readers.status import format_status, view_status
    from mvsink.write.runners import refresh

    print(f"== source history under {root / 'demo'}")
    for t, what in build_sources(root):
        print(f"  {format_time(t)}  {what}")
    catalog = Catalog(args.views_dir)
    views = [v for v in catalog.views.values() if "demo" in v.tags]
    spark = None
    if not args.spark_submit:
        from mvsink.write.runners import local_session

        spark = local_session()
        spark.sparkContext.setLogLevel("ERROR")
    runner: Runner = "submit" if args.spark_submit else "inprocess"
    times = [START + d * DAY + 12 * 3_600_000 for d in range(4)]
    for t in times:
        print(f"\n== refresh at {format_time(t)}")
        for view in views:
            print("  " + refresh(view, t, catalog=catalog, runner=runner, spark=spark).summary())
    print(f"\n== refresh again at {format_time(times[-1])} (nothing to do)")
    for view in views:
        print("  " + refresh(view, times[-1], catalog=catalog, runner=runner, spark=spark).summary())
    later = times[-1] + 6 * 3_600_000
    print(f"\n== refresh at {format_time(later)} (no source changed: no Spark job, no data file)")
    for view in views:
        print("  " + refresh(view, later, catalog=catalog, runner=runner, spark=spark).summary())
    for view in views:
        for t in (times[0], later):
            print(f"\n== {view.name} as of {format_time(t)}")
            _print_rows(read_view(view, as_of=t), "table")
        print(f"\n== mvsink status {view.name}")
        print(format_status(view_status(view, last=8)))
    print(f"\nTry: mvsink read revenue_by_region --as-of 2026-11-02T12:00:00Z   (with MVSINK_DATA_ROOT={root})")
    if spark is not None:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
