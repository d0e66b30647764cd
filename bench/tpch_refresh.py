"""Warm, in-process: refresh cost against full overwrite, MERGE on key and the compute-only floor (TPC-H).

    python -m bench.tpch_refresh [--sf 0.1] [--stream rf|rf3|scattered] [--rates 0,0.001,0.01,0.1]
                                 [--pairs 1,10,100] [--repeat 3] [--warmup 1] [--file-mb 32]
                                 [--out bench/reports/tpch-sf<SF>-<stream>.md] [--results bench/results]

For each view (Q1-style aggregate, Q3-style join + aggregate, Q5's six-way join, a top-100, an
orders x customer projection) and change rate, in one warm in-process Spark (local[2]), `--repeat`
rounds (each round commits a new change of that rate, then measures every strategy), after
``--warmup`` rounds of a 1 % change measured the same way and dropped (the JVM's first refreshes,
overwrites and floors pay class loading and code generation; without them the first rate measured pays it):
  floor         evaluate the view, noop sink
  overwrite     Spark computes the view and replaces a Delta table (Parquet + delta-rs overwrite commit)
  merge         Spark computes the view, delta-rs MERGE on the view's key (matched update,
                not matched insert, not matched by source delete)
  refresh       this project: mint, write (corrections), append (incremental when the query allows)
  refresh_full  the same view with `incremental: false` (always the full diff against the table)
Source changes are committed with delta-rs between refreshes, from one of the change streams of
``bench/streams.py`` (``--stream``):
  rf         (default) TPC-H's refresh functions: RF1 inserts new orders with their lineitems, RF2 deletes
             old ones, with dbgen's order keys (narrow, advancing bands); a rate of 0.001 is one RF1 + RF2
             pair (SF * 1,500 orders inserted and as many deleted), 0.01 ten pairs (``--pairs`` says it
             in pairs)
  rf3        the prices of the lineitems of the most recent ``rate`` of the orders UPDATEd
  scattered  ``rate`` of the orders updated, deleted and inserted, picked by ``o_orderkey % m``: keys
             scattered over every file (the adversarial case)
The sources are written from tpchgen-cli's Parquet in key order, in files of about ``--file-mb`` MB
(one Delta commit), and have Change Data Feed on unless --no-cdf.
Then, once: one refresh through spark-submit, through a running Spark Connect server and in a
warm in-process Spark (the start-up cost a user pays per refresh with each).
Writes the raw rows (one JSON file per run, ``bench/results/tpch-<date>-sf<SF>-<stream>.json``) and the
variant's current report, ``bench/reports/tpch-sf<SF>-<stream>.md`` (medians, min-max) with its PNG chart.
``make bench-inprocess`` runs it; ``make bench``'s headline is bench/connect_process.py (a new process per refresh
through a Spark Connect server, what an Airflow task runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)
if not __package__:  # run as a script (python bench/tpch_refresh.py): import bench.streams from the repository
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402
from deltalake import DeltaTable, convert_to_deltalake, write_deltalake  # noqa: E402

from bench.layout import REPORTS, RESULTS, command, link  # noqa: E402
from bench.rows import mode_name, read_stats  # noqa: E402
from bench.streams import STREAMS, Stream, make_stream, scattered_change  # noqa: E402
from mvsink.core.deltalog import is_delta_table, set_commit_time  # noqa: E402

VIEWS = {
    "q1": (
        """SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus""",
        ["lineitem"],
        ["l_returnflag", "l_linestatus"],
    ),
    "q3": (
        """SELECT l_orderkey, o_orderdate, o_shippriority, sum(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey
WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority""",
        ["customer", "orders", "lineitem"],
        ["l_orderkey"],
    ),
    # TPC-H Q5: a six-way join under one aggregate (the dimension tables change rarely; lineitem and orders do)
    "q5": (
        """SELECT n_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, count(*) AS lines
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey
JOIN supplier ON l_suppkey = s_suppkey AND c_nationkey = s_nationkey
JOIN nation ON s_nationkey = n_nationkey JOIN region ON n_regionkey = r_regionkey
WHERE r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1995-01-01'
GROUP BY n_name""",
        ["customer", "orders", "lineitem", "supplier", "nation", "region"],
        ["n_name"],
    ),
    # top-k: the 100 largest orders (no incremental mode for ORDER BY ... LIMIT yet: the full diff)
    "topk": (
        """SELECT o_orderkey, o_custkey, o_totalprice FROM orders ORDER BY o_totalprice DESC, o_orderkey LIMIT 100""",
        ["orders"],
        ["o_orderkey"],
    ),
    "wide": (
        """SELECT o_orderkey, o_orderstatus, o_totalprice, o_orderdate, o_orderpriority, c_name, c_nationkey,
       c_mktsegment, c_acctbal FROM orders JOIN customer ON o_custkey = c_custkey""",
        ["orders", "customer"],
        ["o_orderkey"],
    ),
}
DAY = 86_400_000


def write_view_file(
    views_dir: Path, name: str, view: tuple[str, list[str], list[str]], *, as_of: int, incremental: bool = True
) -> None:
    """The view file ``views_dir/<name>.yaml`` of ``view`` (query, sources, key as in :data:`VIEWS`): the sources
    ``src/<table>`` and the target ``out/<name>`` under the data root, with the product's default settings
    but ``incremental``."""
    sql, sources, key = view
    doc = {
        "name": name,
        "query": sql,
        "sources": {s: f"src/{s}" for s in sources},
        "target": f"out/{name}",
        "as_of": as_of,
        "key": key,
        "incremental": incremental,
    }
    (views_dir / f"{name}.yaml").write_text(yaml.safe_dump(doc))


def stamp(path: Path, ts: int) -> None:
    set_commit_time(str(path), ts)


def generate(root: Path, sf: float, t0: int, *, cdf: bool, file_mb: float = 32) -> None:
    """TPC-H SF ``sf`` from tpchgen-cli (cached under ``root/raw``) into Delta sources under ``root/src``:
    each table's rows in tpchgen's order (key order for orders and lineitem) in files of about ``file_mb``
    MB (0: one file), committed as one version dated ``t0``."""
    raw = root / "raw"
    tables = ("lineitem", "orders", "customer", "supplier", "nation", "region")
    if not all((raw / f"{t}.parquet").exists() for t in tables):
        raw.mkdir(parents=True, exist_ok=True)
        tool = Path(sys.executable).parent / "tpchgen-cli"
        if not tool.exists():
            raise SystemExit(f"no {tool}: pip install tpchgen-cli==4.0.0 (the make bench targets install it)")
        subprocess.run(
            [
                str(tool),
                "parquet",
                "-s",
                str(sf),
                "--tables",
                ",".join(tables),
                "--output-dir",
                str(raw),
            ],
            check=True,
        )
    for t in tables:
        shutil.rmtree(root / "src" / t, ignore_errors=True)
        write_source(raw / f"{t}.parquet", root / "src" / t, file_mb=file_mb, cdf=cdf)
        stamp(root / "src" / t, t0)


def write_source(raw: Path, dest: Path, *, file_mb: float, cdf: bool) -> int:
    """One tpchgen-cli Parquet file as a Delta table at ``dest``: its row groups, in order, cut into files
    of about ``file_mb`` MB (by the row groups' compressed size), then one commit adding them all (so
    each file's min/max statistics cover a narrow, disjoint key range). Returns the number of files."""
    pf = pq.ParquetFile(raw)
    schema = pa.schema(
        [pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in pf.schema_arrow]
    )
    dest.mkdir(parents=True)
    limit = file_mb * (1 << 20) if file_mb > 0 else float("inf")
    files, writer, size = 0, None, 0.0
    for i in range(pf.metadata.num_row_groups):
        meta = pf.metadata.row_group(i)
        if writer is None or size >= limit:
            if writer is not None:
                writer.close()
            writer = pq.ParquetWriter(dest / f"part-{files:05d}.snappy.parquet", schema, compression="snappy")
            files, size = files + 1, 0.0
        writer.write_table(pf.read_row_group(i).cast(schema))
        size += sum(meta.column(c).total_compressed_size for c in range(meta.num_columns))
    if writer is not None:
        writer.close()
    convert_to_deltalake(str(dest), configuration={"delta.enableChangeDataFeed": str(cdf).lower()})
    return files


def change(root: Path, rate: float, step: int, ts: int) -> None:
    """The ``scattered`` change (``bench.streams.scattered_change``; kept for bench/sdp.py and bench/airflow_e2e.py)."""
    scattered_change(root, rate, step, ts)


def dir_bytes(paths: list[str]) -> int:
    return sum(os.path.getsize(p.removeprefix("file://")) for p in paths)


# ---------------------------------------------------------------- memory


def _clear_peak(pid: int) -> None:
    """Reset the process's peak RSS (VmHWM) to its current RSS (Linux clear_refs 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Peak:
    """Peak RSS of the Python driver and of the Spark JVM (driver + executors in local mode) during a
    block, and its growth over the RSS at the start (memory a step newly needed)."""

    def __init__(self, jvm_pid: int) -> None:
        self.pids = {"py": os.getpid(), "jvm": jvm_pid}
        self.start: dict[str, float] = {}
        self.mb: dict[str, float] = {}

    def __enter__(self) -> Peak:
        for k, pid in self.pids.items():
            _clear_peak(pid)
            self.start[k] = _status_mb(pid, "VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        for k, pid in self.pids.items():
            peak = _status_mb(pid, "VmHWM")
            self.mb[k] = peak
            self.mb[k + "_growth"] = max(0.0, peak - self.start[k])


# ---------------------------------------------------------------- strategies


def measure(
    spark: object,
    view: object,
    name: str,
    key: list[str],
    root: Path,
    t: int,
    step: int,
    jvm_pid: int,
    catalog: object,
    *,
    strategies: tuple[str, ...] = ("floor", "overwrite", "merge", "refresh", "refresh_full"),
    out_dir: Path | None = None,
) -> dict[str, object]:
    """One row of figures of ``view`` for each of ``strategies`` (see the module docstring); the overwrite and
    MERGE tables go under ``out_dir`` (default ``root/out``)."""
    from mvsink.core.mint import mint
    from mvsink.core.refresh import run_refresh
    from mvsink.spark.sources import register_sources
    from mvsink.write.runners import write_step

    row: dict[str, object] = {}
    desc = mint(view, t, catalog=catalog, run_id="bench-probe", dry_run=True)  # type: ignore[arg-type]
    register_sources(spark, view, desc)  # type: ignore[arg-type]
    out_dir = out_dir or root / "out"
    inner = write_step(runner="inprocess", spark=spark)  # type: ignore[arg-type]
    reports: list[object] = []

    def write(vw: object, d: object) -> object:  # runners.refresh's write step, keeping its report
        reports.append(inner(vw, d))  # type: ignore[arg-type]
        return reports[-1]

    if "floor" in strategies:
        with Peak(jvm_pid) as pk:
            s = time.monotonic()
            spark.sql(view.query).write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]
            row["floor_s"] = time.monotonic() - s
        row["floor_mem"] = pk.mb
    if "overwrite" in strategies:
        row.update(_overwrite(spark, view, out_dir / f"{name}_overwrite", jvm_pid))
    if "merge" in strategies:
        row.update(_merge(spark, view, out_dir / f"{name}_merge", key, jvm_pid))
    for strategy in ("refresh", "refresh_full"):
        if strategy not in strategies:
            continue
        v = view if strategy == "refresh" else catalog.get(f"{name}_full")  # type: ignore[attr-defined]
        reports.clear()
        with Peak(jvm_pid) as pk:
            s = time.monotonic()
            res = run_refresh(v, t, write=write, catalog=catalog, run_id=f"bench-{step}")  # type: ignore[arg-type]
            row[f"{strategy}_s"] = time.monotonic() - s
        row[f"{strategy}_mem"] = pk.mb
        report = dataclasses.asdict(reports[-1]) if reports else None  # type: ignore[call-overload]
        b_read, f_read, per_source = read_stats(res.to_dict(), report)
        row[f"{strategy}_bytes_read"] = b_read
        row[f"{strategy}_files_read"] = f_read
        row[f"{strategy}_read"] = per_source
        row[f"{strategy}_bytes"] = res.bytes
        row[f"{strategy}_files"] = res.files
        row[f"{strategy}_rows"] = res.rows_added + res.rows_retracted
        row[f"{strategy}_mode"] = res.mode or ("unchanged" if res.status == "appended" else res.status)
        for k in ("mint", "write", "append", "write.plan", "write.corrections", "write.stage"):
            row[f"{strategy}_{k.replace('.', '_')}_s"] = res.timings.get(k, 0.0)
        row[f"{strategy}_jobs"] = res.spark_jobs
    if "refresh" in strategies:  # the fields every raw row carries (with stream, sf, view from the caller)
        row["mode"] = mode_name(str(row["refresh_mode"]))
        row["bytes_read"] = row["refresh_bytes_read"]
        row["files_read"] = row["refresh_files_read"]
        row["peak_py_mb"] = row["refresh_mem"]["py"]  # type: ignore[index]
        row["peak_jvm_mb"] = row["refresh_mem"]["jvm"]  # type: ignore[index]
    return row


def _overwrite(spark: object, view: object, ow_path: Path, jvm_pid: int) -> dict[str, object]:
    """Spark computes the view and replaces a Delta table with it (Parquet, then a delta-rs overwrite commit)."""
    row: dict[str, object] = {}
    with Peak(jvm_pid) as pk:
        s = time.monotonic()
        spark.sql(view.query).write.mode("overwrite").parquet(str(ow_path / "stage"))  # type: ignore[attr-defined]
        table = pa.table(pq.read_table(ow_path / "stage"))
        write_deltalake(str(ow_path / "delta"), table, mode="overwrite")
        row["overwrite_s"] = time.monotonic() - s
    del table
    row["overwrite_mem"] = pk.mb
    ow_dt = DeltaTable(str(ow_path / "delta"))
    row["overwrite_bytes"] = dir_bytes(ow_dt.file_uris())
    row["overwrite_files"] = len(ow_dt.file_uris())
    return row


def _merge(spark: object, view: object, mg_path: Path, key: list[str], jvm_pid: int) -> dict[str, object]:
    """Spark computes the view; delta-rs MERGEs it into a table on ``key`` (insert, update, delete by source)."""
    row: dict[str, object] = {}
    with Peak(jvm_pid) as pk:
        s = time.monotonic()
        src = pa.table(spark.sql(view.query).toArrow())  # type: ignore[attr-defined]
        if not is_delta_table(str(mg_path)):
            write_deltalake(str(mg_path), src)
            added = DeltaTable(str(mg_path)).file_uris()
        else:
            mdt = DeltaTable(str(mg_path))
            before = set(mdt.file_uris())
            pred = " AND ".join(f"t.{k} = s.{k}" for k in key)
            (
                mdt.merge(src, predicate=pred, source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete()
                .execute()
            )
            added = sorted(set(DeltaTable(str(mg_path)).file_uris()) - before)
        row["merge_s"] = time.monotonic() - s
    del src
    row["merge_mem"] = pk.mb
    row["merge_bytes"] = dir_bytes(added)
    row["merge_files"] = len(added)
    return row


def startup_comparison(
    root: Path, views_dir: Path, t: int, rate: float, step: int, *, repeat: int, stream: Stream
) -> list[dict[str, object]]:
    """One refresh of `wide` per runner, each a separate `mvsink refresh` process (what a DAG task runs)."""
    from mvsink.spark.connect import start_server

    port = 15_202
    out: list[dict[str, object]] = []
    log_path = root / "connect-server.log"
    server = start_server(port=port, conf={"spark.driver.memory": "4g"}, log_path=log_path)
    try:
        cli = [str(Path(sys.executable).parent / "mvsink"), "refresh", "wide", "--views-dir", str(views_dir), "--json"]
        for runner, extra in (
            ("spark-submit", []),
            ("Spark Connect", ["--remote", f"sc://127.0.0.1:{port}"]),
            ("in-process (new Spark per process)", ["--in-process"]),
        ):
            # the server's first refresh plans and loads classes (measured, reported apart)
            for rep in range(-1 if runner == "Spark Connect" else 0, repeat):
                t += DAY
                step += 1
                stream.apply(rate, step, t - 3_600_000)
                s = time.monotonic()
                proc = subprocess.run(cli + ["--at", str(t)] + extra, capture_output=True, text=True)
                wall = time.monotonic() - s
                if proc.returncode != 0:
                    raise RuntimeError(f"{runner}: {proc.stderr[-2000:]}")
                res = json.loads(proc.stdout)
                out.append(
                    {
                        "runner": runner if rep >= 0 else "Spark Connect, first refresh after server start",
                        "round": rep,
                        "wall_s": wall,
                        "write_s": res["timings"]["write"],
                        "mode": res.get("mode", ""),
                        "rows": res["rows_added"] + res["rows_retracted"],
                    }
                )
                print(json.dumps(out[-1]), flush=True)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--stream", choices=STREAMS, default="rf", help="the source change (bench/streams.py)")
    ap.add_argument(
        "--rates", default="0,0.001,0.01,0.1", help="fraction of the orders each round changes (rf: 0.001 = 1 pair)"
    )
    ap.add_argument("--pairs", help="rf: RF1 + RF2 pairs per round, comma-separated (sets --rates to pairs / 1000)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per change rate (medians are reported)")
    ap.add_argument("--warmup", type=int, default=1, help="1 %% change rounds measured first and dropped")
    ap.add_argument("--views", default=",".join(VIEWS))
    ap.add_argument("--file-mb", type=float, default=32, help="size of the sources' files (0: one file per table)")
    ap.add_argument("--no-cdf", dest="cdf", action="store_false", help="sources without Change Data Feed")
    ap.add_argument(
        "--no-startup",
        dest="startup",
        action="store_false",
        help="skip the spark-submit / Spark Connect / in-process comparison",
    )
    ap.add_argument(
        "--strategies",
        default="floor,overwrite,merge,refresh,refresh_full",
        help="what to measure (refresh and overwrite always; merge and refresh_full cost most of the time at SF 10)",
    )
    ap.add_argument("--root", default="/tmp/mvsink-bench")
    ap.add_argument("--out", help="the report (default: bench/reports/tpch-sf<SF>-<stream>.md; its chart beside it)")
    ap.add_argument("--results", default=str(RESULTS), help="folder of the raw rows, one JSON file per run")
    ap.add_argument("--replot", metavar="RAW_JSON", help="only rewrite --out and its chart from a run's raw rows")
    args = ap.parse_args()
    if args.replot:
        raw = json.loads(Path(args.replot).read_text())
        out = Path(args.out or REPORTS / f"tpch-sf{raw['sf']:g}-{raw.get('stream', 'scattered')}.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_report(out, raw["rows"], raw.get("startup", []), raw=link(args.replot, out), meta=raw)
        write_chart(out.with_suffix(".png"), raw["rows"], sf=raw["sf"], stream=raw.get("stream", "scattered"))
        return 0
    out = Path(args.out or REPORTS / f"tpch-sf{args.sf:g}-{args.stream}.md")
    if args.pairs:
        if args.stream != "rf":
            ap.error("--pairs is for --stream rf (use --rates)")
        args.rates = ",".join(str(float(p) / 1000) for p in args.pairs.split(","))
    names = args.views.split(",")
    strategies = tuple(dict.fromkeys(["refresh", "overwrite", *args.strategies.split(",")]))
    root = Path(args.root) / f"sf{args.sf}"
    t0 = 1_767_225_600_000
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC)
    print(f"generating TPC-H SF{args.sf} under {root} ...", flush=True)
    generate(root, args.sf, t0, cdf=args.cdf, file_mb=args.file_mb)
    stream = make_stream(args.stream, root, args.sf)
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    views_dir = root / "views"
    shutil.rmtree(views_dir, ignore_errors=True)
    shutil.rmtree(root / "out", ignore_errors=True)
    views_dir.mkdir(parents=True)
    for name in names:
        for suffix, incremental in (("", True), ("_full", False)):
            write_view_file(views_dir, f"{name}{suffix}", VIEWS[name], as_of=t0, incremental=incremental)

    from mvsink.definitions.catalog import Catalog
    from mvsink.write.runners import local_session, refresh

    spark = local_session(conf={"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    catalog = Catalog(views_dir)
    rows: list[dict[str, object]] = []
    rates = [float(x) for x in args.rates.split(",")]
    t = t0 + DAY
    for name in names:  # initial load of every view (not measured)
        for v in (name, f"{name}_full") if "refresh_full" in strategies else (name,):
            refresh(catalog.get(v), t, catalog=catalog, runner="inprocess", spark=spark)
    step = 0
    rounds = [(0.01, -1 - w) for w in range(args.warmup)] + [(r, rep) for r in rates for rep in range(args.repeat)]
    for rate, rep in rounds:  # warm-up rounds (negative) are measured the same way, then dropped
        step += 1
        t += DAY
        changed = stream.apply(rate, step, t - 3_600_000)
        files = source_files(root, ("orders", "lineitem"))
        for name in names:
            row = measure(
                spark, catalog.get(name), name, VIEWS[name][2], root, t, step, jvm_pid, catalog, strategies=strategies
            )
            row.update(
                stream=args.stream,
                sf=args.sf,
                view=name,
                rate=rate,
                change=stream.label(rate),
                round=rep,
                changed=changed,
                source_files=files,
            )
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("_mem")}), flush=True)
            if rep >= 0:
                rows.append(row)
    spark.stop()
    startup: list[dict[str, object]] = []
    if args.startup and "wide" in names:
        startup = startup_comparison(root, views_dir, t, 0.01, step, repeat=args.repeat, stream=stream)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "stream": args.stream,
        "sf": args.sf,
        "cdf": args.cdf,
        "file_mb": args.file_mb,
        "rates": rates,
        "strategies": list(strategies),
        "repeat": args.repeat,
        "warmup": args.warmup,
        "date": f"{date:%Y-%m-%d %H:%M} UTC",
        "command": command("bench.tpch_refresh"),
        "minutes": (time.monotonic() - started) / 60,
        "machine": machine(),
        "versions": _versions(),
        "source_files_at_start": initial_files(root),
    }
    raw_path = Path(args.results) / f"tpch-{date:%Y%m%dT%H%MZ}-sf{args.sf:g}-{args.stream}.json"
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({**meta, "rows": rows, "startup": startup}, indent=1, default=str))
    print(f"wrote {raw_path}")
    write_report(out, rows, startup, raw=link(raw_path, out), meta=meta)
    write_chart(out.with_suffix(".png"), rows, sf=args.sf, stream=args.stream)
    return 0


def source_files(root: Path, tables: tuple[str, ...]) -> dict[str, int]:
    """Data files in each source table's current snapshot."""
    return {t: len(DeltaTable(str(root / "src" / t)).file_uris()) for t in tables}


def initial_files(root: Path) -> dict[str, int]:
    """Data files of each source as generated (version 0)."""
    names = sorted(p.name for p in (root / "src").iterdir() if p.is_dir())
    return {n: len(DeltaTable(str(root / "src" / n), version=0).file_uris()) for n in names}


# ---------------------------------------------------------------- report

STRATEGIES = ("floor", "overwrite", "merge", "refresh", "refresh_full")
COLORS = {
    "floor": "tab:gray",
    "overwrite": "tab:blue",
    "merge": "tab:orange",
    "refresh": "tab:green",
    "refresh_full": "tab:red",
}


def _med(rows: list[dict[str, object]], key: str) -> float:
    """The median of ``key`` over ``rows`` (NaN when a row lacks it: a strategy not measured, ``--strategies``)."""
    if any(r.get(key) is None for r in rows):
        return float("nan")
    vals = sorted(float(r[key]) for r in rows)  # type: ignore[arg-type]
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def _span(rows: list[dict[str, object]], key: str) -> str:
    if any(r.get(key) is None for r in rows):
        return "–"
    vals = [float(r[key]) for r in rows]  # type: ignore[arg-type]
    return f"{_med(rows, key):.2f} ({min(vals):.2f}–{max(vals):.2f})" if len(vals) > 1 else f"{vals[0]:.2f}"


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} KB" if n else "0"


def _groups(rows: list[dict[str, object]]) -> list[tuple[str, float, list[dict[str, object]]]]:
    keys: list[tuple[str, float]] = []
    for r in rows:
        k = (str(r["view"]), float(r["rate"]))  # type: ignore[arg-type]
        if k not in keys:
            keys.append(k)
    return [(v, rate, [r for r in rows if r["view"] == v and r["rate"] == rate]) for v, rate in keys]


def _label(g: list[dict[str, object]]) -> str:
    """The change of a group of rows as the run labelled it (older raw files: the rate)."""
    return str(g[0].get("change") or f"{float(g[0]['rate']):.1%}")  # type: ignore[arg-type]


def _span_opt(rows: list[dict[str, object]], key: str, fmt: Any = None) -> str:
    """Median (min–max) of a field that may be missing (None): "–" when no row has it."""
    vals = sorted(float(r[key]) for r in rows if r.get(key) is not None)  # type: ignore[arg-type]
    if not vals:
        return "–"
    f = fmt or (lambda x: f"{x:.0f}")
    n = len(vals)
    med = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    return f(med) if vals[0] == vals[-1] else f"{f(med)} ({f(vals[0])}–{f(vals[-1])})"


def _versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("pyspark", "deltalake", "pyarrow", "duckdb", "tpchgen-cli"))


STREAM_TEXT = {
    "rf": "TPC-H's refresh functions (`--stream rf`): each pair inserts SF × 1,500 new orders with 1–7 lineitems "
    "each (RF1, appended as new files) and deletes SF × 1,500 of the oldest orders with their lineitems (RF2), "
    "on dbgen's narrow, advancing bands of order keys; a rate of 0.1 % is one pair",
    "rf3": "price updates (`--stream rf3`): `l_extendedprice` and `l_discount` of every lineitem of the most "
    "recent orders (the highest keys; the rate is the fraction of the orders) UPDATEd in one commit",
    "scattered": "the scattered change (`--stream scattered`): the rate's orders updated, deleted (with their "
    "lineitems) and inserted as copies under new keys, picked by `o_orderkey % m`, so every file changes",
}


def write_report(
    out: Path,
    rows: list[dict[str, object]],
    startup: list[dict[str, object]],
    *,
    raw: str,
    meta: Mapping[str, Any],
) -> None:
    sf, cdf, repeat, warmup = meta["sf"], meta.get("cdf", True), meta.get("repeat", 0), meta.get("warmup", 0)
    stream = str(meta.get("stream", "scattered"))
    files = ", ".join(f"{t} {n}" for t, n in (meta.get("source_files_at_start") or {}).items())
    lines = [
        f"# Warm, in-process: refresh vs overwrite vs MERGE vs the compute floor (TPC-H SF{sf}, stream `{stream}`)",
        "",
        f"{meta.get('date', '?')}; {meta.get('machine', '?')}; {meta.get('versions', '?')}.",
        "",
        *([f"Command: `{meta['command']}`.", ""] if meta.get("command") else []),
        f"Source change: {STREAM_TEXT.get(stream, stream)}. Sources written in key order in files of about "
        f"{meta.get('file_mb', '?')} MB ({files or '?'} files at the start) "
        f"{'with' if cdf else 'without'} Change Data Feed.",
        "",
        f"One warm in-process Spark local[2] (6 GB driver) for all strategies; {warmup} warm-up round(s) of a 1 % "
        f"change first (measured and dropped), then {repeat} round(s) per change rate, "
        f"each on a new source change; times are medians (min–max) in seconds. Whole run: "
        f"{float(meta.get('minutes', 0)):.1f} min. Raw rows: {raw}; chart: `{out.with_suffix('.png').name}`.",
        "",
        "`refresh` is this project (incremental when the query allows, else the full diff); `refresh_full` is "
        "the same view with `incremental: false`. Ratios are of medians from the same run.",
        "",
        "## Summary",
        "",
        "| view | change | mode | refresh s | overwrite s | refresh ÷ overwrite | bytes read | files read "
        "| peak py / JVM MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for view, _rate, g in _groups(rows):
        modes = "/".join(sorted({str(r.get("mode", r["refresh_mode"])) for r in g}))
        lines.append(
            f"| {view} | {_label(g)} | {modes} | {_span(g, 'refresh_s')} | {_span(g, 'overwrite_s')} | "
            f"{_med(g, 'refresh_s') / max(_med(g, 'overwrite_s'), 1e-9):.2f} | "
            f"{_span_opt(g, 'bytes_read', _mb)} | {_span_opt(g, 'files_read')} | "
            f"{_span_opt(g, 'peak_py_mb')} / {_span_opt(g, 'peak_jvm_mb')} |"
        )
    lines += [
        "",
        "## Time",
        "",
        "| view | change | floor | overwrite | MERGE | refresh (mode) | mint / write / append | refresh_full "
        "| refresh ÷ overwrite | refresh ÷ floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for view, _rate, g in _groups(rows):
        modes = sorted({str(r["refresh_mode"]) for r in g})
        lines.append(
            f"| {view} | {_label(g)} | {_span(g, 'floor_s')} | {_span(g, 'overwrite_s')} | {_span(g, 'merge_s')} | "
            f"{_span(g, 'refresh_s')} ({'/'.join(modes)}) | {_med(g, 'refresh_mint_s'):.3f} / "
            f"{_med(g, 'refresh_write_s'):.2f} / {_med(g, 'refresh_append_s'):.3f} | {_span(g, 'refresh_full_s')} | "
            f"{_med(g, 'refresh_s') / max(_med(g, 'overwrite_s'), 1e-9):.2f} | "
            f"{_med(g, 'refresh_s') / max(_med(g, 'floor_s'), 1e-9):.2f} |"
        )
    lines += [
        "",
        "## What a refresh read",
        "",
        "Bytes and files each refresh read from its sources (medians, min–max), per source as the refresh "
        "report gives them (– where it does not), and the data files of orders and lineitem after the round's "
        "change.",
        "",
        "| view | change | refresh reads | refresh_full reads | orders / lineitem files |",
        "|---|---|---|---|---|",
    ]
    for view, _rate, g in _groups(rows):
        cells = []
        for s in ("refresh", "refresh_full"):
            per: dict[str, list[dict[str, object]]] = {}
            for r in g:
                for src, x in (r.get(f"{s}_read") or {}).items():  # type: ignore[attr-defined]
                    per.setdefault(str(src), []).append(x)
            if per:
                cells.append(
                    "; ".join(
                        f"{src} {_span_opt(xs, 'bytes_read', _mb)} ({_span_opt(xs, 'files_read')})"
                        for src, xs in per.items()
                    )
                )
            else:
                cells.append(f"{_span_opt(g, f'{s}_bytes_read', _mb)} ({_span_opt(g, f'{s}_files_read')})")
        sfiles = [r.get("source_files") or {} for r in g]
        lines.append(
            f"| {view} | {_label(g)} | {cells[0]} | {cells[1]} | "
            f"{_span_opt([{'n': x.get('orders')} for x in sfiles], 'n')} / "  # type: ignore[attr-defined]
            f"{_span_opt([{'n': x.get('lineitem')} for x in sfiles], 'n')} |"  # type: ignore[attr-defined]
        )
    per_round: dict[str, dict[object, Any]] = {}
    for r in rows:  # one change per round, shared by the round's views
        per_round.setdefault(_label([r]), {}).setdefault(r["round"], r.get("changed"))
    if any(c for rounds in per_round.values() for c in rounds.values()):
        lines += [
            "",
            "## The change of each round",
            "",
            "| change | each round's change (orders / lineitems inserted, deleted, updated; key ranges) |",
            "|---|---|",
        ]
        for lbl, rounds in per_round.items():
            items = [
                ", ".join(f"{k} {v}" for k, v in (c or {}).items() if v not in (0, None)) or "nothing"
                for c in rounds.values()
            ]
            lines.append(f"| {lbl} | {' · '.join(items)} |")
    lines += [
        "",
        "## Where a refresh's write step spends its time",
        "",
        "Medians in seconds of the write step's phases (`plan`: the sources registered and the query analysed; "
        "`corrections`: the change sets read and, in modes that compute eagerly, the corrections computed; "
        "`stage`: the corrections written as the batch's Parquet, where a lazy mode's Spark work happens) and "
        "the number of Spark jobs the step ran.",
        "",
        "| view | change | refresh mode | plan / corrections / stage | Spark jobs | refresh_full plan / corrections / "
        "stage | Spark jobs |",
        "|---|---|---|---|---|---|---|",
    ]
    for view, rate, g in _groups(rows):
        if rate == 0:
            continue
        modes = sorted({str(r["refresh_mode"]) for r in g})
        cells = []
        for s in ("refresh", "refresh_full"):
            cells.append(
                f"{_med(g, f'{s}_write_plan_s'):.2f} / {_med(g, f'{s}_write_corrections_s'):.2f} / "
                f"{_med(g, f'{s}_write_stage_s'):.2f} | {_med(g, f'{s}_jobs'):.0f}"
            )
        lines.append(f"| {view} | {_label(g)} | {'/'.join(modes)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Data written",
        "",
        "| view | change | overwrite bytes (files) | MERGE bytes (files) | refresh bytes (files) | refresh rows "
        "| refresh ÷ overwrite bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    for view, _rate, g in _groups(rows):
        ob, rb = _med(g, "overwrite_bytes"), _med(g, "refresh_bytes")
        lines.append(
            f"| {view} | {_label(g)} | {_mb(ob)} ({_med(g, 'overwrite_files'):.0f}) | "
            f"{_mb(_med(g, 'merge_bytes'))} ({_med(g, 'merge_files'):.0f}) | {_mb(rb)} "
            f"({_med(g, 'refresh_files'):.0f}) | {_med(g, 'refresh_rows'):.0f} | {rb / max(ob, 1):.2%} |"
        )
    lines += [
        "",
        "## Driver memory (MB)",
        "",
        "Growth of resident memory during each strategy over its start (peak RSS − RSS before; the largest "
        "of the rounds): the Python driver process (where data collected to the driver lands) and the "
        "Spark JVM (in local mode driver and executors at once; its heap is sized once and reused, so it "
        "rarely grows). Last column: the Python driver's peak RSS during the refresh.",
        "",
        "| view | change | " + " | ".join(f"{s} py / jvm" for s in STRATEGIES) + " | refresh py peak |",
        "|---|---|" + "---|" * (len(STRATEGIES) + 1),
    ]
    for view, _rate, g in _groups(rows):
        cells = []
        for s in STRATEGIES:
            py = max(float(r[f"{s}_mem"]["py_growth"]) for r in g)  # type: ignore[index]
            jvm = max(float(r[f"{s}_mem"]["jvm_growth"]) for r in g)  # type: ignore[index]
            cells.append(f"+{py:.0f} / +{jvm:.0f}")
        peak = max(float(r["refresh_mem"]["py"]) for r in g)  # type: ignore[index]
        lines.append(f"| {view} | {_label(g)} | " + " | ".join(cells) + f" | {peak:.0f} |")
    if startup:
        lines += [
            "",
            f"## Spark start-up per refresh (view `wide`, 1 % change of the `{stream}` stream, one `mvsink refresh` "
            "process each)",
            "",
            "What a DAG task pays per refresh. Medians (min–max) of the rounds; the Connect server was started "
            "once, before the first of its refreshes (which is shown apart).",
            "",
            "| runner | wall s (whole process) | write step s | diff mode |",
            "|---|---|---|---|",
        ]
        for runner in dict.fromkeys(str(r["runner"]) for r in startup):
            g = [r for r in startup if r["runner"] == runner]
            lines.append(
                f"| {runner} | {_span(g, 'wall_s')} | {_span(g, 'write_s')} | "
                f"{'/'.join(sorted({str(r['mode']) for r in g}))} |"
            )
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def compile_package() -> None:
    """Compile the package's modules to bytecode, as a pip install does, so each measured process loads them
    instead of compiling them again (an editable install under ``PYTHONDONTWRITEBYTECODE=1`` never writes them:
    0.14 s of every refresh's process)."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "plugins" / "mvsink"), quiet=1)


def machine() -> str:
    """Cores, OS, Python and Java of this machine (a report's machine line)."""
    return f"{os.cpu_count()} cores; {platform.platform()}; Python {platform.python_version()}; Java {_java()}"


def _java() -> str:
    proc = subprocess.run(["java", "-version"], capture_output=True, text=True)
    first = (proc.stderr or proc.stdout).splitlines()
    return first[0].split('"')[1] if first and '"' in first[0] else "?"


def write_chart(path: Path, rows: list[dict[str, object]], *, sf: float, stream: str = "rf") -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)")
        return
    views = list(dict.fromkeys(str(r["view"]) for r in rows))
    fig, axes = plt.subplots(2, len(views), figsize=(5 * len(views), 8), squeeze=False)
    for i, view in enumerate(views):
        g = [(rate, rs) for v, rate, rs in _groups(rows) if v == view]
        xs = [max(rate, 0.0003) for rate, _ in g]  # 0 % drawn at the left edge of the log axis
        for s in STRATEGIES:
            axes[0][i].plot(xs, [_med(rs, f"{s}_s") for _, rs in g], marker="o", label=s, color=COLORS[s])
        for s in ("overwrite", "merge", "refresh"):  # 0 bytes drawn as 1 on the log axis
            axes[1][i].plot(xs, [max(_med(rs, f"{s}_bytes"), 1) for _, rs in g], marker="o", label=s, color=COLORS[s])
        axes[0][i].set_title(f"{view} (SF{sf}, {stream})")
        axes[0][i].set_ylabel("wall time, s (median)")
        axes[1][i].set_ylabel("data bytes written")
        for ax in (axes[0][i], axes[1][i]):
            ax.set_xscale("log")
            ax.set_xlabel("change rate (0 % drawn at 0.03 %)")
            ax.grid(True, which="both", alpha=0.3)
        axes[1][i].set_yscale("log")
        axes[0][i].legend(fontsize=8)
        axes[1][i].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
