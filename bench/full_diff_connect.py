"""The full diff on the users' path (issue 38): the ``wide`` view of bench/tpch_refresh.py with ``incremental: false``,
its first build and its full diff after one RF pair, computed by DuckDB in the refreshing process and by Spark
(``MVSINK_DUCKDB_FULL_DIFF=false``), each a new ``mvsink refresh --remote`` process through one Spark Connect server,
against an overwrite of the same query in a new process through the same server (bench.connect_process's). Rounds
alternate the two engines; each round's ratios are against that round's overwrite.

    python -m bench.full_diff_connect ROOT [--rounds 2] [--out bench/results/full-diff-connect-<date>.json]

ROOT is a bench.tpch22 work folder at SF 1 (``<root>/sf1.0``: ``src/orders`` and ``src/customer`` as Delta tables);
the RF pairs are committed to its orders and lineitem.
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

import yaml

from bench.connect_process import SERVER_CONF, overwrite, refresh
from bench.layout import RESULTS, command
from bench.streams import make_stream
from bench.tpch_refresh import VIEWS, machine

T0 = 1_767_225_600_000
DAY = 86_400_000


def main() -> int:
    from mvsink.devtools.localairflow import free_port
    from mvsink.spark.connect import start_server

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("root", help="a bench.tpch22 work folder at SF 1 (e.g. /tmp/mvsink-tpch22/sf1.0)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", help="the raw rows (default: bench/results/full-diff-connect-<date>.json)")
    args = ap.parse_args()
    root = Path(args.root)
    date = dt.datetime.now(dt.UTC)
    sql, sources, _ = VIEWS["wide"]
    srcs = {s: root / "src" / s for s in sources}
    port = free_port()
    remote = f"sc://127.0.0.1:{port}"
    server = start_server(port=port, conf=SERVER_CONF, log_path=root / "full-diff-connect-server.log")
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    stream = make_stream("rf", root, 1.0)
    rows = []
    try:
        overwrite("wide", sql, srcs, root / "ow" / "wide", remote=remote)  # (the server's warm-up: not measured)
        for r in range(args.rounds):
            t = T0 + (10 + 3 * r) * DAY
            for engine in ("duckdb", "spark"):
                views = root / f"full-diff-views-{engine}"
                shutil.rmtree(views, ignore_errors=True)
                views.mkdir(parents=True)
                target = f"full-diff-{engine}"
                shutil.rmtree(root / target, ignore_errors=True)
                doc = {"name": "wide", "query": sql, "sources": {s: f"src/{s}" for s in sources}, "target": target}
                (views / "wide.yaml").write_text(yaml.safe_dump({**doc, "as_of": T0, "incremental": False}))
                os.environ["MVSINK_DUCKDB_FULL_DIFF"] = "true" if engine == "duckdb" else "false"
                first, _ = refresh("wide", t, remote=remote, views_dir=views)
                if engine == "duckdb":  # (one RF pair per round, both engines refresh over it)
                    stream.apply(0.001, 100 + r, t + DAY - 3_600_000)
                diff, res = refresh("wide", t + DAY, remote=remote, views_dir=views)
                ow, _ = overwrite("wide", sql, srcs, root / "ow" / "wide", remote=remote)
                row = {
                    "round": r,
                    "engine": engine,
                    "first_build_s": first,
                    "full_diff_s": diff,
                    "overwrite_s": ow,
                    "first_build_ratio": first / ow,
                    "full_diff_ratio": diff / ow,
                    "corrections": int(res.get("rows_added", 0)) + int(res.get("rows_retracted", 0)),
                    "reason": res.get("mode_reason", ""),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    out = Path(args.out or RESULTS / f"full-diff-connect-{date:%Y%m%dT%H%MZ}-sf1.json")
    meta = {"date": f"{date:%Y-%m-%d %H:%M} UTC", "command": command("bench.full_diff_connect"), "machine": machine()}
    out.write_text(json.dumps({**meta, "path": "connect-process", "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
