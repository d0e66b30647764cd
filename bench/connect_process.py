"""A new OS process per refresh through a running Spark Connect server (the Airflow task's path), against an
overwrite of the same query in a new process through the same server (TPC-H).

    python -m bench.connect_process [--sf 1] [--stream rf] [--pairs 1] [--repeat 3] [--warmup 1]
                                    [--views q1,q3,q5,wide,q10,q18] [--file-mb 32] [--root /tmp/mvsink-bench]
                                    [--out bench/reports/connect-sf<SF>-<stream>.md] [--results bench/results]
    python -m bench.connect_process --replot RAW.json       # rewrite the report from a run's raw rows

TPC-H at ``--sf`` (bench/tpch_refresh.py's ``generate``: tpchgen-cli's Parquet, cached under
``<root>/sf<SF>/raw``, written as Delta sources with Change Data Feed into a fresh work folder
``<root>/connect-sf<SF>``, so the cache stays as it is). One Spark Connect server (local[2], 6 GB driver) is
started once. The views are q1, q3, q5 and wide of bench/tpch_refresh.py plus TPC-H Q10 and Q18 without their
ORDER BY ... LIMIT (aggregates) (``--views distinct``: a DISTINCT over orders and lineitem; ``--views union``:
orders read twice in a UNION ALL; ``--views countdistinct,having,minmax,joinminmax``: aggregates no hidden state serves; ``--views q4,q13,q22``: TPC-H
Q4, Q13 and Q22, aggregates over an EXISTS, an outer join's aggregate and a NOT EXISTS; none in
the default run), in view files with the product's default settings (no MVSINK_INCREMENTAL_* guard set, unless ``--setting MVSINK_X=VALUE`` sets one for every refresh process: the report says so). Each view is refreshed once (not measured); then ``--warmup`` rounds (measured, dropped) and
``--repeat`` rounds: each commits one change of the stream (bench/streams.py; rf: ``--pairs`` RF1 + RF2
pairs) with delta-rs, then for each view, each in a new process:

  refresh    ``python -m mvsink refresh VIEW --at T --remote sc://... --json``: wall time from start to exit;
             the mode and the refresh's own phase timings from its JSON
  overwrite  ``python -m bench.connect_process --overwrite-one SPEC``: a Connect session, the sources read
             through Delta at their current version as temp views, the query written with
             ``.write.format("delta").mode("overwrite")``; wall time from start to exit
  no change  a second refresh at T + 10 min, no source commit in between

Raw rows (``"path": "connect-process"`` on each) go to ``bench/results/connect-<date>-sf<SF>-<stream>.json``,
the report to ``bench/reports/connect-sf<SF>-<stream>.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)
if not __package__:  # run as a script: import bench.* from the repository
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Only light imports here: the overwrite's child process (--overwrite-one) imports this module too.
from bench.layout import REPORTS, RESULTS, command, link, raw_name  # noqa: E402
from bench.rows import mode_name, read_stats  # noqa: E402
from bench.tpch22 import QUERIES as TPCH22  # noqa: E402

PATH = "connect-process"
REPO = Path(__file__).resolve().parent.parent
T0 = 1_767_225_600_000  # 2026-01-01, the sources' first commit and the views' as_of
NOCHANGE_MS = 600_000  # the no-change refresh: 10 minutes after the round's refresh
SERVER_CONF = {"spark.driver.memory": "6g"}
PHASES = ("mint", "write", "append", "write.plan", "write.corrections", "write.stage")

# (query, sources, key) as bench.tpch_refresh.VIEWS; TPC-H Q10 and Q18 with the specification's validation
# parameters, written with explicit joins and without ORDER BY ... LIMIT (a view is a multiset: aggregates)
EXTRA_VIEWS: dict[str, tuple[str, list[str], list[str]]] = {
    "q10": (
        """SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name,
       c_address, c_phone, c_comment
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey
JOIN nation ON c_nationkey = n_nationkey
WHERE o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01' AND l_returnflag = 'R'
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment""",
        ["customer", "orders", "lineitem", "nation"],
        ["c_custkey"],
    ),
    "q18": (
        """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) AS sum_qty
FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON o_orderkey = l_orderkey
WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice""",
        ["customer", "orders", "lineitem"],
        ["o_orderkey"],
    ),
    # TPC-H Q4, Q13 and Q22 (aggregates over an EXISTS, an outer join's aggregate, a NOT EXISTS: a partitioned
    # recompute where the change's keys skip files; not in the default run)
    "q4": (TPCH22[4][0], ["orders", "lineitem"], []),
    "q13": (TPCH22[13][0], ["customer", "orders"], []),
    "q22": (TPCH22[22][0], ["customer", "orders"], []),
    # a DISTINCT of columns over a join (refreshed from each row's count of input rows; not in the default run)
    "distinct": (
        """SELECT DISTINCT o_orderpriority, o_orderstatus, l_shipmode, l_returnflag
FROM orders JOIN lineitem ON l_orderkey = o_orderkey""",
        ["orders", "lineitem"],
        [],
    ),
    # orders read twice, in two branches of a UNION ALL (linear: refreshed from the change; not in the default run)
    "union": (
        """SELECT o_orderkey, o_custkey, o_totalprice, o_orderpriority AS tag FROM orders
WHERE o_orderpriority = '1-URGENT'
UNION ALL
SELECT o_orderkey, c_custkey, o_totalprice, c_mktsegment AS tag FROM orders JOIN customer ON c_custkey = o_custkey
WHERE c_mktsegment = 'BUILDING'""",
        ["orders", "customer"],
        [],
    ),
    # aggregates no hidden state serves (the affected groups, or the full diff; not in the default run)
    "countdistinct": (
        """SELECT o_custkey, count(DISTINCT o_orderpriority) AS priorities, count(*) AS n FROM orders GROUP BY o_custkey""",
        ["orders"],
        [],
    ),
    "having": (
        """SELECT l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 150""",
        ["lineitem"],
        [],
    ),
    "joinminmax": (
        """SELECT o_custkey, max(l_shipdate) AS last_ship, count(DISTINCT l_suppkey) AS suppliers
FROM orders JOIN lineitem ON l_orderkey = o_orderkey GROUP BY o_custkey""",
        ["orders", "lineitem"],
        [],
    ),
    "minmax": (
        """SELECT o_custkey, min(o_orderdate) AS first_order, max(o_totalprice) AS largest, count(*) AS n
FROM orders GROUP BY o_custkey""",
        ["orders"],
        [],
    ),
}
DEFAULT_VIEWS = ("q1", "q3", "q5", "wide", "q10", "q18")


def all_views() -> dict[str, tuple[str, list[str], list[str]]]:
    """bench.tpch_refresh's views and :data:`EXTRA_VIEWS`, by name."""
    from bench.tpch_refresh import VIEWS

    return {**VIEWS, **EXTRA_VIEWS}


# ---------------------------------------------------------------- the overwrite's process


def overwrite_one(spec: Mapping[str, Any]) -> dict[str, float]:
    """In this (new) process: a Connect session to ``spec["remote"]``, each of ``spec["sources"]`` ({name: path})
    a temp view read through Delta at its current version, ``spec["query"]`` written over the Delta table at
    ``spec["out"]``. Returns the seconds the session took to open, the sources' registration (Delta resolves each
    table's snapshot) and the query and write."""
    from mvsink.spark.connect import remote_session

    s = time.monotonic()
    spark = remote_session(str(spec["remote"]))
    session_s = time.monotonic() - s
    s = time.monotonic()
    for name, path in spec["sources"].items():
        spark.read.format("delta").load(str(path)).createOrReplaceTempView(name)
    register_s = time.monotonic() - s
    s = time.monotonic()
    spark.sql(str(spec["query"])).write.format("delta").mode("overwrite").save(str(spec["out"]))
    return {"session_s": session_s, "register_s": register_s, "write_s": time.monotonic() - s}


# ---------------------------------------------------------------- measuring (each a new process)


def _run(cmd: list[str], what: str) -> tuple[float, dict[str, Any]]:
    """Run ``cmd`` (a new Python process) from the repository root: its wall time (start to exit) and the JSON
    object its standard output ends with."""
    s = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - s
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}: {proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def refresh(view: str, at: int, *, remote: str, views_dir: Path) -> tuple[float, dict[str, Any]]:
    """``mvsink refresh VIEW --at AT --remote URL --json`` in a new process: wall seconds and its result."""
    cmd = [sys.executable, "-m", "mvsink", "refresh", view, "--at", str(at), "--remote", remote]
    return _run([*cmd, "--views-dir", str(views_dir), "--json"], f"refresh of {view}")


def overwrite(view: str, query: str, sources: Mapping[str, Path], out: Path, *, remote: str) -> tuple[float, Any]:
    """:func:`overwrite_one` in a new process: wall seconds and what it returned."""
    spec = {"remote": remote, "query": query, "sources": {k: str(v) for k, v in sources.items()}, "out": str(out)}
    cmd = [sys.executable, "-m", "bench.connect_process", "--overwrite-one", json.dumps(spec)]
    return _run(cmd, f"overwrite of {view}")


def reported_mode(res: Mapping[str, Any]) -> str:
    """The refresh's mode as its JSON reports it ("unchanged" for an append with no write step)."""
    return str(res.get("mode") or ("unchanged" if res.get("status") == "appended" else res.get("status", "?")))


def _inside(res: Mapping[str, Any]) -> float:
    """Seconds the refresh's own phases took (mint + write + append): its wall time less process start-up."""
    timings = res.get("timings") or {}
    return float(sum(timings.get(k, 0.0) for k in ("mint", "write", "append")))


def mode_reason(view: Any) -> str | None:
    """Why the view's last refresh took its mode, as its table's last commit records it (None if it does not)."""
    from mvsink.core.table import ViewTable

    history = ViewTable.open(view).history(limit=1)
    info = history[0].info if history else None
    return (info.mode_reason if info else None) or None


def make_row(
    view: str,
    rnd: int,
    *,
    refresh: tuple[float, Mapping[str, Any]],
    overwrite: tuple[float, Mapping[str, Any]],
    nochange: tuple[float, Mapping[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    """One raw row: a view's refresh, overwrite and no-change refresh of one round (each (wall s, its JSON))."""
    (r_s, res), (o_s, ow), (n_s, nc) = refresh, overwrite, nochange
    timings = res.get("timings") or {}
    b_read, f_read, per_source = read_stats(res)
    row: dict[str, Any] = {
        "path": PATH,
        "view": view,
        "round": rnd,
        **extra,
        "refresh_s": r_s,
        "overwrite_s": o_s,
        "ratio": r_s / o_s if o_s else None,
        "mode": mode_name(reported_mode(res)),
        "nochange_s": n_s,
        "nochange_mode": mode_name(reported_mode(nc)),
        "refresh_inside_s": _inside(res),
        "nochange_inside_s": _inside(nc),
        **{f"refresh_{k.replace('.', '_')}_s": timings.get(k) for k in PHASES},
        "refresh_jobs": res["spark_jobs"] if int(res.get("spark_jobs", -1)) >= 0 else None,  # -1: not known
        "reason": res.get("reason") or None,
        "refresh_rows": int(res.get("rows_added", 0)) + int(res.get("rows_retracted", 0)),
        "bytes_read": b_read,
        "files_read": f_read,
        "refresh_read": per_source,
        "overwrite_session_s": ow.get("session_s"),
        "overwrite_register_s": ow.get("register_s"),
        "overwrite_write_s": ow.get("write_s"),
    }
    return row


def measure(args: argparse.Namespace, date: dt.datetime) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The run (module docstring): its measured rows (warm-up rounds left out) and its metadata."""
    from bench.streams import make_stream
    from bench.tpch_refresh import DAY, _versions, compile_package, generate, initial_files, machine, write_view_file
    from mvsink.definitions.catalog import Catalog
    from mvsink.devtools.localairflow import free_port
    from mvsink.spark.connect import start_server

    views = all_views()
    names = args.views.split(",")
    started = time.monotonic()
    compile_package()
    work = Path(args.root) / f"connect-sf{args.sf}"
    cache = Path(args.root) / f"sf{args.sf}" / "raw"  # tpch_refresh's tpchgen-cli output, shared
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cache.mkdir(parents=True, exist_ok=True)
    (work / "raw").symlink_to(cache.resolve(), target_is_directory=True)
    print(f"generating TPC-H SF{args.sf} under {work} ...", flush=True)
    generate(work, args.sf, T0, cdf=True, file_mb=args.file_mb)
    stream = make_stream(args.stream, work, args.sf)
    rate = args.pairs / 1000 if args.stream == "rf" else args.rate
    os.environ["MVSINK_DATA_ROOT"] = str(work)  # the refresh processes resolve the views' relative paths in it
    views_dir = work / "views"
    views_dir.mkdir()
    for name in names:
        write_view_file(views_dir, name, views[name], as_of=T0)
    meta: dict[str, Any] = {
        "path": PATH,
        "stream": args.stream,
        "sf": args.sf,
        "pairs": args.pairs if args.stream == "rf" else None,
        "rate": rate,
        "change": stream.label(rate),
        "views": names,
        "repeat": args.repeat,
        "warmup": args.warmup,
        "file_mb": args.file_mb,
        "server_conf": SERVER_CONF,
        "date": f"{date:%Y-%m-%d %H:%M} UTC",
        "command": command("bench.connect_process"),
        "settings": dict(s.partition("=")[::2] for s in args.setting),
        "machine": machine(),
        "versions": _versions(),
        "source_files_at_start": initial_files(work),
    }
    port = args.port or free_port()
    remote = f"sc://127.0.0.1:{port}"
    catalog = Catalog(views_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run stops its server too (finally below)
    server = start_server(port=port, conf=SERVER_CONF, log_path=work / "connect-server.log")
    rows: list[dict[str, Any]] = []
    try:

        def overwrite_view(name: str) -> tuple[float, Any]:
            sql, sources, _key = views[name]
            srcs = {s: work / "src" / s for s in sources}
            return overwrite(name, sql, srcs, work / "overwrite" / name, remote=remote)

        t = T0 + DAY
        for name in names:  # the first refresh (the full diff) and the overwrite table's creation: not measured
            wall, res = refresh(name, t, remote=remote, views_dir=views_dir)
            print(f"initial refresh of {name}: {wall:.1f} s ({res.get('status')}, {res.get('mode')})", flush=True)
            overwrite_view(name)
        for step, rnd in enumerate([-1 - w for w in range(args.warmup)] + list(range(args.repeat)), start=1):
            t += DAY
            changed = stream.apply(rate, step, t - 3_600_000)
            for name in names:
                measured = refresh(name, t, remote=remote, views_dir=views_dir)
                why = mode_reason(catalog.get(name))  # before the no-change refresh commits
                row = make_row(
                    name,
                    rnd,
                    refresh=measured,
                    overwrite=overwrite_view(name),
                    nochange=refresh(name, t + NOCHANGE_MS, remote=remote, views_dir=views_dir),
                    pairs=meta["pairs"],
                    stream=args.stream,
                    sf=args.sf,
                    change=meta["change"],
                    changed=changed,
                )
                row["reason"] = row["reason"] or why
                print(json.dumps({k: v for k, v in row.items() if k not in ("changed", "refresh_read")}), flush=True)
                if rnd >= 0:
                    rows.append(row)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    meta["minutes"] = (time.monotonic() - started) / 60
    return rows, meta


# ---------------------------------------------------------------- report (pure but for writing the file)


def _vals(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if r.get(key) is not None]


def _med(rows: list[dict[str, Any]], key: str, digits: int = 2) -> str:
    """The median of ``key`` over the rows that have it; "–" when none has."""
    vals = _vals(rows, key)
    return f"{statistics.median(vals):.{digits}f}" if vals else "–"


def _span(rows: list[dict[str, Any]], key: str, digits: int = 2) -> str:
    """Median (min–max) of ``key``; "–" when no row has it."""
    vals = _vals(rows, key)
    if not vals:
        return "–"
    med = f"{statistics.median(vals):.{digits}f}"
    return med if min(vals) == max(vals) else f"{med} ({min(vals):.{digits}f}–{max(vals):.{digits}f})"


def _modes(rows: list[dict[str, Any]], key: str = "mode") -> str:
    return "/".join(sorted({str(r.get(key)) for r in rows}))


def by_view(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The rows of each view, in the order the views were first measured."""
    names = list(dict.fromkeys(str(r["view"]) for r in rows))
    return [(n, [r for r in rows if r["view"] == n]) for n in names]


def report_lines(rows: list[dict[str, Any]], *, raw: str, meta: Mapping[str, Any]) -> list[str]:
    """The report's Markdown lines."""
    sf, stream = meta.get("sf", "?"), meta.get("stream", "rf")
    chosen = dict(meta.get("settings") or {})
    settings = (
        "Settings of every refresh process: " + ", ".join(f"`{k}={v}`" for k, v in chosen.items()) + ". "
        if chosen
        else "View files with the product's default settings (no `MVSINK_INCREMENTAL_*` guard set). "
    )
    lines = [
        f"# New process per refresh through Spark Connect (TPC-H SF{sf}, stream `{stream}`)",
        "",
        f"{meta.get('date', '?')}; {meta.get('machine', '?')}; {meta.get('versions', '?')}.",
        "",
        *([f"Command: `{meta['command']}`.", ""] if meta.get("command") else []),
        "The path every Airflow task takes: one Spark Connect server (local[2], "
        f"{dict(meta.get('server_conf') or SERVER_CONF).get('spark.driver.memory', '?')} driver) started once; "
        "each refresh is a new `python -m mvsink refresh VIEW --remote sc://…` process, each overwrite a new "
        "Python process that opens a Connect session, reads the sources through Delta at their current version, "
        'computes the view\'s query and overwrites a Delta table with it (`mode("overwrite")`). Times are wall '
        "seconds from the process's start to its exit.",
        "",
        f"Each round commits one change of the stream ({meta.get('change', '?')}) with delta-rs, then every view "
        "is refreshed, overwritten, and refreshed again 10 minutes later with no source commit in between (the "
        f"no-change refresh). {meta.get('warmup', 0)} warm-up round(s) measured and dropped, then "
        f"{meta.get('repeat', 0)} round(s); medians (min–max; refresh ÷ overwrite: of each round's ratio). "
        + settings
        + f"Whole run: {float(meta.get('minutes', 0)):.1f} min. Raw rows: {raw}.",
        "",
        "| view | mode | refresh s | overwrite s | refresh ÷ overwrite | no-change refresh s (mode) |",
        "|---|---|---|---|---|---|",
    ]
    for view, g in by_view(rows):
        lines.append(
            f"| {view} | {_modes(g)} | {_span(g, 'refresh_s')} | {_span(g, 'overwrite_s')} | {_span(g, 'ratio')} | "
            f"{_span(g, 'nochange_s')} ({_modes(g, 'nochange_mode')}) |"
        )
    lines += [
        "",
        "The overwrite writes with Delta's own Spark writer (`write.format(\"delta\")`); bench/tpch_refresh.py's "
        "overwrite writes Parquet from Spark and commits it with delta-rs, so the two benchmarks' overwrite figures "
        "measure different writers.",
        "",
        "## Where the time goes",
        "",
        "Medians. Start-up: a process's wall time less the phases it timed itself (Python, imports; for the "
        "refresh also reading its view file). Refresh: its phases as its `--json` output reports them (`mint`; "
        "`write`, which opens the Connect session first, then `plan`, `corrections`, `stage`; `append`) and the "
        "Spark jobs its write step ran (– where the refresh does not know them). Overwrite: the Connect session "
        "opened, the sources registered (Delta resolves each snapshot), the query computed and the table written.",
        "",
        "| view | refresh start-up s | mint / write / append s | write: plan / corrections / stage s | Spark jobs "
        "| no-change start-up / inside s | overwrite start-up s | overwrite session / register / query + write s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for view, g in by_view(rows):
        lines.append(
            f"| {view} | {_med(_rest(g, 'refresh_s', 'refresh_inside_s'), 'x')} | {_med(g, 'refresh_mint_s')} / "
            f"{_med(g, 'refresh_write_s')} / {_med(g, 'refresh_append_s')} | {_med(g, 'refresh_write_plan_s')} / "
            f"{_med(g, 'refresh_write_corrections_s')} / {_med(g, 'refresh_write_stage_s')} | "
            f"{_med(g, 'refresh_jobs', 0)} | {_med(_rest(g, 'nochange_s', 'nochange_inside_s'), 'x')} / "
            f"{_med(g, 'nochange_inside_s')} | "
            f"{_med(_rest(g, 'overwrite_s', 'overwrite_session_s', 'overwrite_register_s', 'overwrite_write_s'), 'x')}"
            f" | {_med(g, 'overwrite_session_s')} / {_med(g, 'overwrite_register_s')} / {_med(g, 'overwrite_write_s')} |"
        )
    reasons = {view: [str(r["reason"]) for r in g if r.get("reason")] for view, g in by_view(rows)}
    if any(reasons.values()):
        lines += ["", "Why each view's refresh took its mode (the last round's, as its table's commit records it):", ""]
        lines += [f"- {view}: {_cut(why[-1])}" for view, why in reasons.items() if why]
    return lines


def _cut(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rest(rows: list[dict[str, Any]], total: str, *parts: str) -> list[dict[str, Any]]:
    """Per row, ``{"x": total - sum(parts)}`` (the rows that have them all)."""
    keys = (total, *parts)
    return [
        {"x": float(r[total]) - sum(float(r[k]) for k in parts)}
        for r in rows
        if all(r.get(k) is not None for k in keys)
    ]


def write_report(out: Path, rows: list[dict[str, Any]], *, raw: str, meta: Mapping[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(report_lines(rows, raw=raw, meta=meta)) + "\n")
    print(f"wrote {out}")


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--stream", choices=("rf", "rf3", "scattered"), default="rf", help="bench/streams.py")
    ap.add_argument("--pairs", type=int, default=1, help="rf: RF1 + RF2 pairs per round")
    ap.add_argument("--rate", type=float, default=0.001, help="rf3, scattered: fraction of the orders per round")
    ap.add_argument("--repeat", type=int, default=3, help="measured rounds (medians are reported)")
    ap.add_argument("--warmup", type=int, default=1, help="rounds measured first and dropped")
    ap.add_argument("--views", default=",".join(DEFAULT_VIEWS))
    ap.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="MVSINK_X=VALUE",
        help="an mvsink setting for every refresh process (e.g. MVSINK_INCREMENTAL_GROUPS=true; the report says so)",
    )
    ap.add_argument("--file-mb", type=float, default=32, help="size of the sources' files (0: one file per table)")
    ap.add_argument("--root", default="/tmp/mvsink-bench")
    ap.add_argument("--port", type=int, default=0, help="the Connect server's port (default: a free one)")
    ap.add_argument("--out", help="the report (default: bench/reports/connect-sf<SF>-<stream>.md)")
    ap.add_argument("--results", default=str(RESULTS), help="folder of the raw rows, one JSON file per run")
    ap.add_argument("--replot", metavar="RAW_JSON", help="only rewrite --out from a run's raw rows")
    ap.add_argument("--overwrite-one", metavar="SPEC_JSON", help=argparse.SUPPRESS)  # the overwrite's process
    args = ap.parse_args(argv)
    if args.overwrite_one:
        print(json.dumps(overwrite_one(json.loads(args.overwrite_one))))
        return 0
    if args.replot:
        raw = json.loads(Path(args.replot).read_text())
        out = Path(args.out or REPORTS / f"connect-sf{raw['sf']:g}-{raw['stream']}.md")
        write_report(out, raw["rows"], raw=link(args.replot, out), meta=raw)
        return 0
    unknown = sorted(set(args.views.split(",")) - set(all_views()))
    if unknown:
        ap.error(f"unknown views {unknown}: of {', '.join(all_views())}")
    for setting in args.setting:
        key, sep, value = setting.partition("=")
        if not sep or not key.startswith("MVSINK_"):
            ap.error(f"--setting {setting!r}: expected MVSINK_NAME=VALUE")
        os.environ[key] = value  # (the refresh processes inherit it)
    date = dt.datetime.now(dt.UTC)
    rows, meta = measure(args, date)
    out = Path(args.out or REPORTS / f"connect-sf{args.sf:g}-{args.stream}.md")
    raw_path = Path(args.results) / raw_name("connect", date, f"sf{args.sf:g}-{args.stream}")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({**meta, "rows": rows}, indent=1, default=str))
    print(f"wrote {raw_path}")
    write_report(out, rows, raw=link(raw_path, out), meta=meta)
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
