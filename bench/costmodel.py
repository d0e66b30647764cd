"""The cost model's acceptance stream (issue 37): how often its choice is the cheaper mode.

    python -m bench.costmodel [--sf 0.1] [--queries 1,4,5,6,7,8,9,12,14,19]
                              [--rounds rf,scattered,none,rf3,dims,rf,scattered,none,rf,rf]
                              [--delete-history-at N] [--out bench/reports/costmodel-sf<SF>.md]

TPC-H views (bench/tpch22.py's queries and sources) in one warm in-process Spark (local[2]), refreshed once (the
full diff), then through a mixed stream, one change per round (bench/streams.py: ``rf`` an RF1 + RF2 pair,
``scattered`` 0.1 % of the orders scattered over every file, ``rf3`` a 10 % bulk price update, ``dims`` a price
list update of parts, partsupp and suppliers, ``none`` no change). Each round, before a view's refresh, its table is
copied twice; the view refreshes with ``MVSINK_COST_MODEL=true`` (the model's choice), one copy with the scan guard
opened (``MVSINK_INCREMENTAL_MAX_SCAN_RATIO=1e9``: the change terms wherever a mode applies) and one with
``MVSINK_INCREMENTAL_MAX_FRACTION=0`` (every change takes the full diff). A round where both copies took the same
mode had one applicable mode (or none the model weighs) and is left out of the hit rate; else the choice is a hit
when the write step of the copy of its kind (incremental or full) took at most 10 % more than the cheaper copy's.
``--delete-history-at N`` deletes every view's ``_mv_history/`` before round N (choices then fall back to the
prior). Each main refresh is checked exact against DuckDB over the same snapshot. Writes a Markdown table and the
raw rows (JSON). Run at SF 0.1 on a shared machine (a smoke: one run, so the times are noisy).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)

import yaml  # noqa: E402

from bench.layout import REPORTS, RESULTS, command, link, raw_name  # noqa: E402
from bench.streams import make_stream  # noqa: E402
from bench.tpch22 import QUERIES, _close, generate, oracle_rows, query_text, sources_of, view_rows  # noqa: E402
from bench.tpch_refresh import _versions  # noqa: E402

DEFAULT_QUERIES = "1,4,5,6,7,8,9,12,14,19"
DEFAULT_ROUNDS = "rf,scattered,none,rf3,dims,rf,scattered,none,rf,rf"
RATES = {"rf": 0.001, "scattered": 0.001, "rf3": 0.1, "dims": 0.001}
TOLERANCE = 0.10  # a choice within 10 % of the cheaper mode's time counts as a hit
VARIANTS = {
    "main": {"MVSINK_COST_MODEL": "true"},
    "incr": {"MVSINK_COST_MODEL": "false", "MVSINK_INCREMENTAL_MAX_SCAN_RATIO": "1e9"},
    "full": {"MVSINK_COST_MODEL": "false", "MVSINK_INCREMENTAL_MAX_FRACTION": "0"},
}


def kind(mode: str) -> str:
    """``full``, ``unchanged`` or ``incremental`` (any incremental mode)."""
    return mode if mode in ("full", "unchanged", "") else "incremental"


def judge(row: dict[str, Any]) -> bool | None:
    """Was the main refresh's choice the cheaper mode, within :data:`TOLERANCE`? None where the copies took the
    same kind of mode (one applicable) or no source changed."""
    incr, full = row["incr_mode"], row["full_mode"]
    if kind(incr) == kind(full) or kind(row["mode"]) not in ("incremental", "full"):
        return None
    times = {"incremental": float(row["incr_s"]), "full": float(row["full_s"])}
    return bool(times[kind(row["mode"])] <= (1 + TOLERANCE) * min(times.values()))


def _write_views(views_root: Path, numbers: list[int], sf: float, t0: int) -> None:
    """One views folder per variant, the same view names (a table's upper is kept under its view's name), each
    variant's tables under its own folder."""
    for variant in VARIANTS:
        folder = views_root / variant
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for n in numbers:
            sql, key = query_text(n, sf), QUERIES[n][1]
            doc: dict[str, Any] = {
                "name": f"q{n}",
                "query": sql,
                "sources": {s: f"src/{s}" for s in sources_of(sql)},
                "target": f"out/{variant}/q{n}",
                "as_of": t0,
            }
            if key:
                doc["key"] = key
            (folder / f"q{n}.yaml").write_text(yaml.safe_dump(doc))


def _with_env(env: dict[str, str]) -> dict[str, str | None]:
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return before


def _restore(before: dict[str, str | None]) -> None:
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--queries", default=DEFAULT_QUERIES)
    ap.add_argument("--rounds", default=DEFAULT_ROUNDS, help="comma-separated: rf, scattered, rf3, dims, none")
    ap.add_argument("--delete-history-at", type=int, default=0, help="delete the views' histories before round N")
    ap.add_argument("--root", default="/tmp/mvsink-costmodel")
    ap.add_argument("--out", help="the report (default: bench/reports/costmodel-sf<SF>.md)")
    ap.add_argument("--results", default=str(RESULTS), help="folder of the raw rows, one JSON file per run")
    args = ap.parse_args()
    numbers = [int(q) for q in args.queries.split(",")]
    rounds = [r.strip() for r in args.rounds.split(",") if r.strip()]
    root = Path(args.root) / f"sf{args.sf}"
    t0, day, hour = 1_767_225_600_000, 86_400_000, 3_600_000
    date = dt.datetime.now(dt.UTC)
    print(f"generating TPC-H SF{args.sf} (8 tables) under {root} ...", flush=True)
    generate(root, args.sf, t0)
    os.environ["MVSINK_DATA_ROOT"] = str(root)
    os.environ["MVSINK_INCREMENTAL_GROUPS"] = "true"
    shutil.rmtree(root / "out", ignore_errors=True)
    _write_views(root / "views", numbers, args.sf, t0)

    from mvsink.core.costrecord import FOLDER
    from mvsink.core.table import ViewTable
    from mvsink.definitions.catalog import Catalog
    from mvsink.write.runners import local_session
    from mvsink.write.runners import refresh as refresh_in

    catalogs = {v: Catalog(root / "views" / v) for v in VARIANTS}
    spark = local_session(conf={"spark.driver.memory": "4g"})
    spark.sparkContext.setLogLevel("ERROR")

    def refresh(variant: str, name: str, t: int) -> dict[str, Any]:
        before = _with_env(VARIANTS[variant])
        try:
            cat = catalogs[variant]
            res = refresh_in(cat.get(name), t, catalog=cat, runner="inprocess", spark=spark, run_id=f"{variant}-{t}")
        finally:
            _restore(before)
        info = ViewTable.open(cat.get(name)).history(limit=1)[0].info
        cost = (info.cost if info is not None else None) or {}
        return {"mode": res.mode or "unchanged", "write_s": res.timings.get("write", 0.0), "cost": cost}

    t = t0 + day
    for n in numbers:
        res = refresh("main", f"q{n}", t)
        print(f"q{n}: initial {res['mode']}", flush=True)
    rows: list[dict[str, Any]] = []
    for i, stream in enumerate(rounds, start=1):
        t += hour
        if args.delete_history_at and i == args.delete_history_at:
            for n in numbers:
                shutil.rmtree(root / "out" / "main" / f"q{n}" / FOLDER, ignore_errors=True)
            print(f"round {i}: the histories deleted", flush=True)
        changed = {} if stream == "none" else make_stream(stream, root, args.sf).apply(RATES[stream], i, t - 60_000)
        for n in numbers:
            name = f"q{n}"
            for variant in ("incr", "full"):  # the copies start from the main table as it is now
                dest = root / "out" / variant / name
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(root / "out" / "main" / name, dest)
            s = time.monotonic()
            main_res = refresh("main", name, t)
            main_wall = time.monotonic() - s
            incr = refresh("incr", name, t)
            full = refresh("full", name, t)
            view = catalogs["main"].get(name)
            exact = _close(view_rows(view, t), oracle_rows(view.query, root, sources_of(view.query), t))
            cost = main_res["cost"]
            row = {
                "view": name,
                "round": i,
                "stream": stream,
                "changed": changed,
                "mode": main_res["mode"],
                "engine": cost.get("engine"),
                "main_s": main_res["write_s"],
                "main_wall_s": main_wall,
                "incr_mode": incr["mode"],
                "incr_s": incr["write_s"],
                "full_mode": full["mode"],
                "full_s": full["write_s"],
                "estimates": cost.get("estimates"),
                "basis": cost.get("basis"),
                "picked": cost.get("picked"),
                "guard": cost.get("guard"),
                "exact": exact,
            }
            row["hit"] = judge(row)
            rows.append(row)
            print(
                f"round {i} {stream} {name}: {row['mode']} {row['main_s']:.2f}s; incr copy {row['incr_mode']} "
                f"{row['incr_s']:.2f}s, full copy {row['full_s']:.2f}s; hit={row['hit']} exact={exact}",
                flush=True,
            )
    spark.stop()
    return _report(args, rows, date, root)


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], date: dt.datetime, root: Path) -> int:
    out = Path(args.out or REPORTS / f"costmodel-sf{args.sf:g}.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": date.isoformat(timespec="seconds"),
        "command": command("bench.costmodel"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "versions": _versions(),
        "sf": args.sf,
        "rounds": args.rounds,
        "delete_history_at": args.delete_history_at,
    }
    raw_path = Path(args.results) / raw_name("costmodel", date, f"sf{args.sf:g}")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({**meta, "rows": rows}, indent=1, default=str))
    judged = [r for r in rows if r["hit"] is not None]
    hits = sum(1 for r in judged if r["hit"])
    lines = [
        f"# The cost model's choices on a mixed stream (SF {args.sf:g}, {len({r['view'] for r in rows})} views)",
        "",
        f"{meta['date']}, {meta['machine']}; {meta['versions']}. `{meta['command']}`. One warm in-process Spark; "
        "one run (a smoke on a shared machine: times are noisy). Raw rows: " + link(raw_path, out) + ".",
        "",
        f"**{hits} of {len(judged)}** judged refreshes chose the cheaper mode or one within {TOLERANCE:.0%} of it "
        f"({len(rows) - len(judged)} had one applicable mode, or no change); "
        f"{sum(1 for r in rows if r['exact'])} of {len(rows)} exact.",
        "",
        "| view | round | stream | chosen | basis | write s | incremental copy s | full copy s | cheapest | hit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cheapest = "-" if r["hit"] is None else ("incremental" if r["incr_s"] <= r["full_s"] else "full")
        hit = "-" if r["hit"] is None else ("yes" if r["hit"] else "**no**")
        lines.append(
            f"| {r['view']} | {r['round']} | {r['stream']} | {r['mode']} | {r['basis'] or '-'} | {r['main_s']:.2f} | "
            f"{r['incr_s']:.2f} ({r['incr_mode']}) | {r['full_s']:.2f} | {cheapest} | {hit} |"
        )
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {raw_path} and {out}", flush=True)
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
