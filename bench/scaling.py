"""Cost as the table grows: the same absolute change at several TPC-H scale factors (issue 12).

    python -m bench.scaling [--sfs 0.1,1,3] [--stream rf|rf3|scattered] [--orders-changed 1500] [--repeat 3]
                            [--warmup 1] [--file-mb 32] [--out bench/reports/scaling-<stream>.md]
                            [--results bench/results]

For each scale factor, in its own child process (a fresh JVM, so one SF's heap never carries over to
the next) with one warm in-process Spark local[2] (6 GB driver):
  - TPC-H is generated with ``bench.tpch_refresh.generate`` into ``<root>/sf<SF>`` (sources with
    Change Data Feed), the views q1, q3, q5 and wide written as ``bench/tpch_refresh.py`` writes them
    (incremental) and refreshed once (not measured); ``MVSINK_INCREMENTAL_AGGREGATE=true``, so the
    aggregates refresh from their hidden state;
  - then ``--warmup`` rounds (measured like the others and dropped: the JVM's first incremental refresh,
    overwrite and floor pay class loading and code generation) and ``--repeat`` rounds: one change of the
    ``--stream`` (``bench/streams.py``) of the same absolute size at every SF, about ``--orders-changed``
    orders (rf: half inserted by RF1, half deleted by RF2; rf3: the lineitems of that many recent orders
    updated; scattered: a third each updated, deleted and inserted; the exact numbers are reported), and
    per view, as ``bench.tpch_refresh.measure`` does:
      floor      evaluate the view, noop sink
      overwrite  Spark computes the view, replaces a Delta table (Parquet + delta-rs overwrite commit)
      refresh    this project (mint, write, append), with the write step's phases and Spark job count.
    MERGE and ``incremental: false`` are not measured here (they do not bear on the question and
    cost most of the time at large SFs): ``make bench-inprocess SF=...`` has them.
Writes a Markdown report (medians, min–max, growth from the smallest to the largest SF), the raw
numbers as JSON and a log–log chart (time against the largest source's rows) beside it.
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
os.environ["MVSINK_INCREMENTAL_AGGREGATE"] = "true"

import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402

from bench.layout import REPORTS, RESULTS, command, link, raw_name  # noqa: E402
from bench.streams import STREAMS, make_stream  # noqa: E402
from bench.tpch_refresh import DAY, VIEWS, _java, _mb, _med, _span_opt, _versions, generate, measure  # noqa: E402

NAMES = ("q1", "q3", "q5", "wide")
T0 = 1_767_225_600_000
STRATEGIES = ("refresh", "overwrite", "floor")
STYLES = {"refresh": "-", "overwrite": "--", "floor": ":"}
COLORS = {"q1": "tab:blue", "q3": "tab:orange", "q5": "tab:red", "wide": "tab:green"}


def sf_root(root: Path, sf: float) -> Path:
    return root / f"sf{float(sf)}"  # the folder bench/tpch_refresh.py uses for the same SF


def source_rows(root: Path) -> dict[str, int]:
    """Rows of each generated TPC-H table (before any change)."""
    return {p.stem: pq.ParquetFile(p).metadata.num_rows for p in sorted((root / "raw").glob("*.parquet"))}


def run_sf(
    sf: float,
    *,
    root: Path,
    stream_name: str,
    orders_changed: int,
    repeat: int,
    warmup: int,
    file_mb: float,
    part: Path,
) -> None:
    """One scale factor in this process (one Spark); rows to ``part`` as JSON."""
    root = sf_root(root, sf)
    print(f"generating TPC-H SF{sf} under {root} ...", flush=True)
    generate(root, sf, T0, cdf=True, file_mb=file_mb)
    stream = make_stream(stream_name, root, sf)
    counts = source_rows(root)
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    views_dir = root / "scaling" / "views"
    shutil.rmtree(root / "scaling", ignore_errors=True)
    views_dir.mkdir(parents=True)
    for name in NAMES:
        sql, sources, key = VIEWS[name]
        (views_dir / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {
                    "name": name,
                    "query": sql,
                    "sources": {s: f"src/{s}" for s in sources},
                    "target": f"scaling/out/{name}",
                    "as_of": T0,
                    "key": key,
                    "incremental": True,
                }
            )
        )
    # the same absolute number of orders at every SF: rf inserts and deletes rate * orders each (half the
    # target each); scattered touches rate / 3 of the orders three times (update, delete, insert)
    rate = min(1.0, orders_changed / (2 if stream_name == "rf" else 1) / counts["orders"])

    from mvsink.definitions.catalog import Catalog
    from mvsink.write.runners import local_session, refresh

    spark = local_session(conf={"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    catalog = Catalog(views_dir)
    t = T0 + DAY
    for name in NAMES:  # initial load (not measured)
        s = time.monotonic()
        res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark)
        print(f"initial {name}: {res.status} {res.mode or ''} {time.monotonic() - s:.1f} s", flush=True)
    rows: list[dict[str, object]] = []
    for rep in range(-warmup, repeat):  # warm-up rounds (negative) are measured the same way, then dropped
        step = rep + warmup + 1
        t += DAY
        changed = stream.apply(rate, step, t - 3_600_000)
        for name in NAMES:
            sources = VIEWS[name][1]
            largest = max(sources, key=lambda s: counts[s])
            row = measure(
                spark,
                catalog.get(name),
                name,
                [],
                root,
                t,
                step,
                jvm_pid,
                catalog,
                strategies=("floor", "overwrite", "refresh"),
                out_dir=root / "scaling" / "out",
            )
            row.update(
                stream=stream_name,
                view=name,
                sf=sf,
                round=rep,
                rate=rate,
                change=stream.label(rate),
                changed=changed,
                largest_source=largest,
                source_rows=counts[largest],
                orders_rows=counts["orders"],
                orders_changed=sum(int(changed.get(f"orders_{k}", 0)) for k in ("updated", "deleted", "inserted")),
                **{f"orders_{k}": int(changed.get(f"orders_{k}", 0)) for k in ("updated", "deleted", "inserted")},
            )
            if rep >= 0:
                rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("_mem")}), flush=True)
    spark.stop()
    part.write_text(json.dumps(rows))


# ---------------------------------------------------------------- report


def _span(g: list[dict[str, object]], key: str) -> str:
    vals = [float(r[key]) for r in g]  # type: ignore[arg-type]
    return f"{_med(g, key):.2f} ({min(vals):.2f}–{max(vals):.2f})" if len(vals) > 1 else f"{vals[0]:.2f}"


def _by(rows: list[dict[str, object]], view: str) -> list[tuple[float, list[dict[str, object]]]]:
    sfs = sorted({float(r["sf"]) for r in rows if r["view"] == view})  # type: ignore[arg-type]
    return [(sf, [r for r in rows if r["view"] == view and float(r["sf"]) == sf]) for sf in sfs]  # type: ignore[arg-type]


def write_report(
    out: Path,
    rows: list[dict[str, object]],
    *,
    target: int,
    repeat: int,
    warmup: int,
    minutes: float,
    stream: str = "scattered",
    file_mb: float | None = None,
    raw: str = "?",
    date: str | None = None,
    machine: str | None = None,
    cmd: str | None = None,
) -> None:
    sfs = sorted({float(r["sf"]) for r in rows})  # type: ignore[arg-type]
    lines = [
        "# Cost as the table grows (TPC-H SF " + ", ".join(f"{s:g}" for s in sfs) + f", stream `{stream}`)",
        "",
        f"{date or 'date not recorded'}; {machine or 'machine not recorded'}.",
        "",
        *([f"Command: `{cmd}`.", ""] if cmd else []),
        f"Per scale factor one process with one warm in-process Spark local[2] (6 GB driver; {warmup} warm-up "
        f"round(s) measured first and dropped); views written "
        f"incremental, `MVSINK_INCREMENTAL_AGGREGATE=true`; sources with Change Data Feed. {repeat} round(s) per "
        f"SF, each on a new source change of the `{stream}` stream (`bench/streams.py`) of the same absolute size "
        f"(target {target:,} orders updated + deleted + inserted, with their lineitems; the rate passed to the "
        f"stream is that over the orders row count{', halved: RF1 and RF2 take as many each' if stream == 'rf' else ''}). "
        f"Sources in files of about {file_mb if file_mb is not None else '?'} MB. "
        f"Times are medians (min–max) in seconds. `floor`: the view evaluated into a noop sink; `overwrite`: "
        f"computed and written as a new Delta table version; `refresh`: this project. MERGE and "
        f"`incremental: false` are not measured here (`make bench-inprocess`). Whole run: {minutes:.1f} min. Raw numbers: "
        f"{raw}; chart: `{out.with_suffix('.png').name}`.",
        "",
        "## Change per round",
        "",
        "| SF | orders rows | rate passed to the stream | orders changed (updated / deleted / inserted), per round |",
        "|---|---|---|---|",
    ]
    for sf in sfs:
        g = [r for r in rows if float(r["sf"]) == sf and r["view"] == rows[0]["view"]]  # type: ignore[arg-type]
        per = ", ".join(
            f"{r['orders_changed']:,} ({r['orders_updated']} / {r['orders_deleted']} / {r['orders_inserted']})"
            for r in g
        )
        lines.append(f"| {sf:g} | {int(g[0]['orders_rows']):,} | {float(g[0]['rate']):.3g} | {per} |")  # type: ignore[call-overload,arg-type]
    growth: list[str] = []
    for view in dict.fromkeys(str(r["view"]) for r in rows):
        by = _by(rows, view)
        lines += [
            "",
            f"## {view} (largest source: {by[0][1][0]['largest_source']})",
            "",
            "| SF | source rows | refresh s (mode) | overwrite s | floor s | refresh ÷ overwrite "
            "| write plan / corrections / stage s | Spark jobs | refresh rows | bytes (files) read | peak py / JVM MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for sf, g in by:
            modes = "/".join(sorted({str(r["refresh_mode"]) for r in g}))
            lines.append(
                f"| {sf:g} | {int(g[0]['source_rows']):,} | {_span(g, 'refresh_s')} ({modes}) | "  # type: ignore[call-overload]
                f"{_span(g, 'overwrite_s')} | {_span(g, 'floor_s')} | "
                f"{_med(g, 'refresh_s') / max(_med(g, 'overwrite_s'), 1e-9):.2f} | "
                f"{_med(g, 'refresh_write_plan_s'):.2f} / {_med(g, 'refresh_write_corrections_s'):.2f} / "
                f"{_med(g, 'refresh_write_stage_s'):.2f} | {_med(g, 'refresh_jobs'):.0f} | "
                f"{_med(g, 'refresh_rows'):,.0f} | {_span_opt(g, 'bytes_read', _mb)} ({_span_opt(g, 'files_read')}) | "
                f"{_span_opt(g, 'peak_py_mb')} / {_span_opt(g, 'peak_jvm_mb')} |"
            )
        if len(by) > 1:
            g0, g1 = by[0][1], by[-1][1]
            table = float(g1[0]["source_rows"]) / float(g0[0]["source_rows"])  # type: ignore[arg-type]
            f = {k: _med(g1, f"{k}_s") / max(_med(g0, f"{k}_s"), 1e-9) for k in STRATEGIES}
            growth.append(
                f"| {view} | {table:.1f}× | {f['refresh']:.2f}× | {'yes' if f['refresh'] <= 2 else 'no'} | "
                f"{f['overwrite']:.2f}× | {f['floor']:.2f}× |"
            )
    if growth:
        lines += [
            "",
            f"## Growth from SF {sfs[0]:g} to SF {sfs[-1]:g}",
            "",
            "Ratio of the medians at the largest SF to those at the smallest. The issue's target: the incremental "
            "refresh grows at most 2× from SF 0.1 to SF 3 while the overwrite grows with the table.",
            "",
            "| view | table | refresh | refresh ≤ 2× | overwrite | floor |",
            "|---|---|---|---|---|---|",
            *growth,
        ]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def write_chart(path: Path, rows: list[dict[str, object]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(8, 6))
    for view in dict.fromkeys(str(r["view"]) for r in rows):
        by = _by(rows, view)
        xs = [float(g[0]["source_rows"]) for _, g in by]  # type: ignore[arg-type]
        for s in STRATEGIES:
            ax.plot(
                xs,
                [_med(g, f"{s}_s") for _, g in by],
                marker="o",
                linestyle=STYLES[s],
                color=COLORS.get(view),
                label=f"{view} {s}",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows of the view's largest source")
    ax.set_ylabel("wall time, s (median)")
    sfs = sorted({float(r["sf"]) for r in rows})  # type: ignore[arg-type]
    ax.set_title("Same absolute change, growing table (TPC-H SF " + ", ".join(f"{s:g}" for s in sfs) + ")")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sfs", default="0.1,1,3", help="scale factors, comma-separated")
    ap.add_argument("--stream", choices=STREAMS, default="rf", help="the source change (bench/streams.py)")
    ap.add_argument("--orders-changed", type=int, default=1500, help="orders updated + deleted + inserted per round")
    ap.add_argument("--file-mb", type=float, default=32, help="size of the sources' files (0: one file per table)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per scale factor (medians are reported)")
    ap.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="rounds per SF measured first and dropped (the JVM's first incremental runs)",
    )
    ap.add_argument("--root", default="/tmp/mvsink-bench")
    ap.add_argument("--out", help="the report (default: bench/reports/scaling-<stream>.md; its chart beside it)")
    ap.add_argument("--results", default=str(RESULTS), help="folder of the raw rows, one JSON file per run")
    ap.add_argument("--replot", metavar="RAW_JSON", help="only redraw the report and chart from a run's raw rows")
    ap.add_argument("--one-sf", type=float, help=argparse.SUPPRESS)  # internal: run one SF in this process
    ap.add_argument("--part", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out or REPORTS / f"scaling-{args.stream}.md")
    if args.one_sf is not None:
        run_sf(
            args.one_sf,
            root=Path(args.root),
            stream_name=args.stream,
            file_mb=args.file_mb,
            orders_changed=args.orders_changed,
            repeat=args.repeat,
            warmup=args.warmup,
            part=Path(args.part),
        )
        return 0
    if args.replot:
        raw = json.loads(Path(args.replot).read_text())
        if not args.out:
            out = REPORTS / f"scaling-{raw.get('stream', 'scattered')}.md"
        write_report(
            out,
            raw["rows"],
            target=raw["orders_changed"],
            repeat=raw["repeat"],
            warmup=raw.get("warmup", 0),
            minutes=raw["minutes"],
            stream=raw.get("stream", "scattered"),
            file_mb=raw.get("file_mb"),
            raw=link(args.replot, out),
            date=raw.get("date"),
            machine=raw.get("machine"),
            cmd=raw.get("command"),
        )
        write_chart(out.with_suffix(".png"), raw["rows"])
        return 0
    started = time.monotonic()
    date = dt.datetime.now(dt.UTC)
    rows: list[dict[str, object]] = []
    for sf in (float(x) for x in args.sfs.split(",")):
        part = sf_root(Path(args.root), sf) / "scaling-rows.json"
        part.parent.mkdir(parents=True, exist_ok=True)
        part.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "bench.scaling", "--one-sf", str(sf), "--part", str(part)]
        cmd += ["--root", args.root, "--orders-changed", str(args.orders_changed), "--repeat", str(args.repeat)]
        cmd += ["--warmup", str(args.warmup), "--stream", args.stream, "--file-mb", str(args.file_mb)]
        subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parent.parent)
        rows += json.loads(part.read_text())
    minutes = (time.monotonic() - started) / 60
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = {
        "date": f"{date:%Y-%m-%d %H:%M} UTC",
        "machine": f"{os.cpu_count()} cores; {platform.platform()}; Python {platform.python_version()}; "
        f"Java {_java()}; {_versions()}",
        "command": command("bench.scaling"),
        "stream": args.stream,
        "file_mb": args.file_mb,
        "sfs": args.sfs,
        "orders_changed": args.orders_changed,
        "repeat": args.repeat,
        "warmup": args.warmup,
        "minutes": minutes,
    }
    variant = "-".join(f"{float(s):g}" for s in args.sfs.split(","))
    raw_path = Path(args.results) / raw_name("scaling", date, f"sf{variant}-{args.stream}")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({**raw, "rows": rows}, indent=1))
    print(f"wrote {raw_path}")
    write_report(
        out,
        rows,
        target=args.orders_changed,
        repeat=args.repeat,
        warmup=args.warmup,
        minutes=minutes,
        stream=args.stream,
        file_mb=args.file_mb,
        raw=link(raw_path, out),
        date=raw["date"],
        machine=raw["machine"],
        cmd=raw["command"],
    )
    write_chart(out.with_suffix(".png"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
