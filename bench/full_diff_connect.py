"""The full diff on the users' path (issue 38): views of bench/tpch_refresh.py and bench/connect_process.py (``wide``
by default; ``--views wide,q1,q3,q5,q10``) with ``incremental: false``, their first build, their full diff after an
RF change (``--rate``: 0.001 is one pair, 0.01 ten) and (``--edit RATE``) after a hand edit of RATE of the table's
rows (copies of them appended, as a foreign writer might), computed by DuckDB in the refreshing process and by Spark (``MVSINK_DUCKDB_FULL_DIFF=false``), each
a new ``mvsink refresh --remote`` process through one Spark Connect server, against an overwrite of the same query in
a new process through the same server (bench.connect_process's). Each refresh's peak RSS is its process's
(``ru_maxrss`` from ``wait4``). Rounds alternate the two engines; each round's ratios are against that round's
overwrite.

    python -m bench.full_diff_connect ROOT [--rounds 2] [--views wide] [--rate 0.001] [--edit 0.001]
                                      [--engines duckdb,spark] [--with-state]
                                      [--out bench/results/full-diff-connect-<date>.json]

ROOT is a bench.tpch22 or bench.connect_process work folder (the TPC-H tables under ``src/`` as Delta tables) at
scale factor ``--sf`` (1 by default: ``--rate 0.001`` is then one RF pair of 1,500 orders; at ``--sf 10`` 15,000); the
RF pairs are committed to its orders and lineitem.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from bench.connect_process import REPO, SERVER_CONF, all_views, overwrite
from bench.layout import RESULTS, command
from bench.streams import make_stream
from bench.tpch_refresh import machine

T0 = 1_767_225_600_000
DAY = 86_400_000


def refresh(view: str, at: int, *, remote: str, views_dir: Path) -> tuple[float, dict[str, Any], float]:
    """``mvsink refresh VIEW --at AT --remote URL --json`` in a new process: wall seconds, its result and its peak
    RSS in MB (the process's own ``ru_maxrss``, from ``wait4``)."""
    import subprocess
    import tempfile
    import time

    cmd = [sys.executable, "-m", "mvsink", "refresh", view, "--at", str(at), "--remote", remote]
    cmd += ["--views-dir", str(views_dir), "--json"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        s = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - s
        proc.returncode = os.waitstatus_to_exitcode(status)  # (reaped here: Popen does not wait again)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"refresh of {view} exited {proc.returncode}: {err.read()[-3000:]}")
        return wall, json.loads(out.read().strip().splitlines()[-1]), usage.ru_maxrss / 1024  # (KB on Linux)


def hand_edit(target: Path, rate: float, at: int) -> int:
    """Copies of ``rate`` of the table's rows (at least one) appended below the next batch (``_mv_time`` ``at``),
    as a foreign writer might: the next full diff retracts them. Returns how many."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    rows = DeltaTable(str(target)).to_pyarrow_table()
    n = max(1, int(rows.num_rows * rate))
    picked = rows.take(list(range(0, rows.num_rows, max(1, rows.num_rows // n)))[:n])
    picked = picked.set_column(picked.column_names.index("_mv_time"), "_mv_time", pa.array([at] * n, pa.int64()))
    write_deltalake(str(target), picked, mode="append")
    return n


def main() -> int:
    from mvsink.devtools.localairflow import free_port
    from mvsink.spark.connect import start_server

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("root", help="a bench.tpch22 work folder at SF 1 (e.g. /tmp/mvsink-tpch22/sf1.0)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sf", type=float, default=1.0, help="the work folder's scale factor (the RF pairs' size)")
    ap.add_argument("--views", default="wide", help="comma-separated views (bench.connect_process's names)")
    ap.add_argument("--rate", type=float, default=0.001, help="the round's RF change (0.001: one pair, 0.1 %%)")
    ap.add_argument("--edit", type=float, default=0.0, help="a hand edit of this fraction of the rows (0: none)")
    ap.add_argument(
        "--engines", default="duckdb,spark", help="comma-separated: duckdb (the default path), spark (the twin)"
    )
    ap.add_argument(
        "--with-state",
        action="store_true",
        help="aggregate views with their hidden state (incremental: true; the aggregate and affected-groups modes "
        "turned off, so every refresh is a full diff over the visible and the state columns)",
    )
    ap.add_argument("--out", help="the raw rows (default: bench/results/full-diff-connect-<date>.json)")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if not engines or set(engines) - {"duckdb", "spark"}:
        ap.error(f"--engines: duckdb and/or spark, not {args.engines!r}")
    root = Path(args.root)
    date = dt.datetime.now(dt.UTC)
    specs = all_views()
    names = [v for v in args.views.split(",") if v]
    port = free_port()
    remote = f"sc://127.0.0.1:{port}"
    server = start_server(port=port, conf=SERVER_CONF, log_path=root / "full-diff-connect-server.log")
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    if args.with_state:  # (the state kept, every refresh a full diff: the modes that would use it are off)
        os.environ["MVSINK_INCREMENTAL_AGGREGATE"] = "false"
        os.environ["MVSINK_INCREMENTAL_GROUPS"] = "false"
    stream = make_stream("rf", root, args.sf)
    rows = []
    try:
        sql, sources, _ = specs[names[0]]
        srcs = {s: root / "src" / s for s in sources}
        overwrite(names[0], sql, srcs, root / "ow" / names[0], remote=remote)  # (the server's warm-up: not measured)
        for r in range(args.rounds):
            t = T0 + (10 + 4 * r) * DAY
            got: dict[tuple[str, str], dict[str, Any]] = {}
            for name in names:  # the first builds, before the round's change
                sql, sources, _ = specs[name]
                for engine in engines:
                    views = root / f"full-diff-views-{engine}"
                    views.mkdir(parents=True, exist_ok=True)
                    target = f"full-diff-{engine}-{name}"
                    shutil.rmtree(root / target, ignore_errors=True)
                    doc = {"name": name, "query": sql, "sources": {s: f"src/{s}" for s in sources}, "target": target}
                    doc |= {"as_of": T0, "incremental": bool(args.with_state)}
                    (views / f"{name}.yaml").write_text(yaml.safe_dump(doc))
                    os.environ["MVSINK_DUCKDB_FULL_DIFF"] = "true" if engine == "duckdb" else "false"
                    first, res, rss = refresh(name, t, remote=remote, views_dir=views)
                    got[name, engine] = {"first_build_s": first, "first_build_rss_mb": rss, "first": res}
            stream.apply(args.rate, 100 + r, t + DAY - 3_600_000)  # (one change per round, every view over it)
            for name in names:
                sql, sources, _ = specs[name]
                srcs = {s: root / "src" / s for s in sources}
                ow, _ = overwrite(name, sql, srcs, root / "ow" / name, remote=remote)
                for engine in engines:
                    views = root / f"full-diff-views-{engine}"
                    os.environ["MVSINK_DUCKDB_FULL_DIFF"] = "true" if engine == "duckdb" else "false"
                    diff, res, rss = refresh(name, t + DAY, remote=remote, views_dir=views)
                    row = {"round": r, "view": name, "engine": engine, "with_state": bool(args.with_state)}
                    row |= {**got[name, engine], "overwrite_s": ow}
                    first = row.pop("first")
                    row |= {
                        "full_diff_s": diff,
                        "full_diff_rss_mb": rss,
                        "first_build_ratio": row["first_build_s"] / ow,
                        "full_diff_ratio": diff / ow,
                        "rows": int(first.get("rows_added", 0)),
                        "corrections": int(res.get("rows_added", 0)) + int(res.get("rows_retracted", 0)),
                        "first_reason": first.get("mode_reason", ""),
                        "reason": res.get("mode_reason", ""),
                    }
                    if args.edit:
                        edited = hand_edit(root / f"full-diff-{engine}-{name}", args.edit, t + DAY - 1000)
                        fix, res, rss = refresh(name, t + 2 * DAY, remote=remote, views_dir=views)
                        row |= {
                            "edited_rows": edited,
                            "after_edit_s": fix,
                            "after_edit_rss_mb": rss,
                            "after_edit_ratio": fix / ow,
                            "edit_corrections": int(res.get("rows_added", 0)) + int(res.get("rows_retracted", 0)),
                            "edit_reason": res.get("mode_reason", ""),
                        }
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    out = Path(args.out or RESULTS / f"full-diff-connect-{date:%Y%m%dT%H%MZ}-sf{args.sf:g}.json")
    meta = {"date": f"{date:%Y-%m-%d %H:%M} UTC", "command": command("bench.full_diff_connect"), "machine": machine()}
    out.write_text(json.dumps({**meta, "sf": args.sf, "path": "connect-process", "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
