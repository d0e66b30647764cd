"""The cost model's acceptance stream (issue 37): how often its choice is the cheapest mode.

    python -m bench.costmodel [--sf 0.1] [--queries 1,3,4,5,6,9,10,12,13,14,17,19]
                              [--rounds rf,scattered,none,rf3,dims,rf,edit,scattered,none,rf,rf,scattered,rf,dims,rf,scattered]
                              [--delete-history-at N] [--out bench/reports/costmodel-sf<SF>.md]

TPC-H views of different shapes (bench/tpch22.py's queries and sources: one-source aggregates Q1 and Q6, join
aggregates Q5, Q9, Q12, Q14, Q19, top-k Q3 and Q10, Q4's EXISTS and Q17's correlated subquery under an aggregate,
Q13's outer join under two aggregates) in one warm in-process Spark (local[2]), refreshed once (the full diff), then
through a mixed stream, one change per round (bench/streams.py: ``rf`` an RF1 + RF2 pair, ``scattered`` 0.1 % of
the orders scattered over every file, ``rf3`` a 10 % bulk price update, ``dims`` a price list update of parts,
partsupp and suppliers (a dimension move), ``edit`` an RF pair and a hand edit of 0.1 % of every view's table (a
foreign append just below the view's upper, as bench/full_diff_connect.py's: the full diff repairs it), ``none`` no change).

Each round, before a view's refresh, its table is copied once per variant; the view refreshes with the cost model
on (``main``: the model's choice), and each copy with one mode forced where it applies: ``incr`` the scan guards
opened (``MVSINK_INCREMENTAL_MAX_SCAN_RATIO=1e9``: the change terms, or the partitioned recompute), ``groups`` the
same with the aggregate state off (affected groups; run only where ``incr`` took the aggregate state), ``full``
(``MVSINK_INCREMENTAL_MAX_FRACTION=0``: the full diff), and ``guard`` the model off (the scan guard alone: the
choice before the model). A round where the forced copies took fewer than two modes (one applicable mode) or no
source changed is left out of the hit rate; else the choice is a hit when the write step of the copy of its mode
took at most 10 % more than the cheapest copy's. ``--delete-history-at N`` deletes every view's ``_mv_history/``
before round N: the report says, per view, whether its choices fell back to the prior and from which judged refresh
after it they were hits again (recovered within 3). The ``rf`` and ``scattered`` rounds compare the model's write
step with the guard's (no view slower than before). Each main refresh is checked exact against DuckDB over the
same snapshot. Writes a Markdown table and the raw rows (JSON). A smoke at SF 0.1 on a shared machine (one run:
the times are noisy); the acceptance run is SF 1 on a quiet machine.
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

from bench.full_diff_connect import hand_edit  # noqa: E402
from bench.layout import REPORTS, RESULTS, command, link, raw_name  # noqa: E402
from bench.streams import make_stream  # noqa: E402
from bench.tpch22 import QUERIES, _close, generate, oracle_rows, query_text, sources_of, view_rows  # noqa: E402
from bench.tpch_refresh import _versions  # noqa: E402

DEFAULT_QUERIES = "1,3,4,5,6,9,10,12,13,14,17,19"
DEFAULT_ROUNDS = "rf,scattered,none,rf3,dims,rf,edit,scattered,none,rf,rf,scattered,rf,dims,rf,scattered"
RATES = {"rf": 0.001, "scattered": 0.001, "rf3": 0.1, "dims": 0.001, "edit": 0.001}
EDIT_RATE = 0.001  # an ``edit`` round's hand edit: this fraction of each view's table appended again
TOLERANCE = 0.10  # a choice within 10 % of the cheapest mode's time counts as a hit
RECOVER_WITHIN = 3  # judged refreshes after the history's deletion within which the choices must be hits again
VARIANTS = {
    "main": {"MVSINK_COST_MODEL": "true"},
    "guard": {"MVSINK_COST_MODEL": "false"},
    "incr": {"MVSINK_COST_MODEL": "false", "MVSINK_INCREMENTAL_MAX_SCAN_RATIO": "1e9"},
    "groups": {
        "MVSINK_COST_MODEL": "false",
        "MVSINK_INCREMENTAL_MAX_SCAN_RATIO": "1e9",
        "MVSINK_INCREMENTAL_AGGREGATE": "false",
    },
    "full": {"MVSINK_COST_MODEL": "false", "MVSINK_INCREMENTAL_MAX_FRACTION": "0"},
}
FORCED = ("incr", "groups", "full")  # the copies that know each applicable mode's time


def kind(mode: str) -> str:
    """``full``, ``unchanged`` or ``incremental`` (any incremental mode)."""
    return mode if mode in ("full", "unchanged", "") else "incremental"


def copies(row: dict[str, Any]) -> dict[str, float]:
    """Each mode the forced copies took (not ``unchanged``), with its write-step seconds (the fastest copy of it)."""
    out: dict[str, float] = {}
    for v in FORCED:
        mode = row.get(f"{v}_mode")
        if mode and mode != "unchanged":
            out[mode] = min(out.get(mode, float("inf")), float(row[f"{v}_s"]))
    return out


def judge(row: dict[str, Any]) -> bool | None:
    """Was the main refresh's choice the cheapest mode, or within :data:`TOLERANCE` of it? None where the copies took
    fewer than two modes (one applicable) or no source changed. The choice's time is its mode's copy's (the main
    refresh's own where no copy took its mode)."""
    times = copies(row)
    if len(times) < 2 or row["mode"] in ("unchanged", ""):
        return None
    mine = times[row["mode"]] if row["mode"] in times else float(row["main_s"])
    return bool(mine <= (1 + TOLERANCE) * min(times.values()))


def cheapest(row: dict[str, Any]) -> str:
    times = copies(row)
    return min(times, key=lambda m: times[m]) if times else "-"


def recovery(rows: list[dict[str, Any]], at: int) -> dict[str, dict[str, Any]]:
    """Per view, after the histories were deleted before round ``at``: the basis of its first refresh the model
    weighed (``prior`` where it fell back), and from which judged refresh on its choices were all hits
    (``recovered_at``, 1-based; None where the last was a miss)."""
    out: dict[str, dict[str, Any]] = {}
    for view in dict.fromkeys(r["view"] for r in rows):
        after = [r for r in rows if r["view"] == view and r["round"] >= at]
        weighed = [r for r in after if r.get("basis")]
        judged = [r for r in after if r["hit"] is not None]
        k = len(judged)
        while k > 0 and judged[k - 1]["hit"]:
            k -= 1
        out[view] = {
            "first_basis": weighed[0]["basis"] if weighed else None,
            "judged": len(judged),
            "recovered_at": (k + 1) if k < len(judged) else None,
        }
    return out


def _stream_of(stream: str) -> str:
    """The change stream of a round (an ``edit`` round's change is an RF pair)."""
    return "rf" if stream == "edit" else stream


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
    ap.add_argument("--rounds", default=DEFAULT_ROUNDS, help="comma-separated: rf, scattered, rf3, dims, edit, none")
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
    started = time.monotonic()
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
        changed = (
            {}
            if stream == "none"
            else make_stream(_stream_of(stream), root, args.sf).apply(RATES[stream], i, t - 60_000)
        )
        for n in numbers:
            name = f"q{n}"
            if stream == "edit":  # a foreign append below the view's upper (the last refresh's time; the copies
                # carry it too), as bench.full_diff_connect's: the next full diff retracts it
                edited = hand_edit(root / "out" / "main" / name, EDIT_RATE, t - hour - 1000)
                changed[f"{name} hand-edited rows"] = edited
            for variant in VARIANTS:  # the copies start from the main table as it is now
                if variant != "main":
                    dest = root / "out" / variant / name
                    shutil.rmtree(dest, ignore_errors=True)
                    shutil.copytree(root / "out" / "main" / name, dest)
            s = time.monotonic()
            main_res = refresh("main", name, t)
            main_wall = time.monotonic() - s
            got = {v: refresh(v, name, t) for v in ("guard", "incr")}
            if got["incr"]["mode"] == "incremental:aggregate":  # (else affected groups would take the same mode)
                got["groups"] = refresh("groups", name, t)
            got["full"] = refresh("full", name, t)
            view = catalogs["main"].get(name)
            exact = _close(view_rows(view, t), oracle_rows(view.query, root, sources_of(view.query), t))
            cost = main_res["cost"]
            row: dict[str, Any] = {
                "view": name,
                "round": i,
                "stream": stream,
                "changed": changed,
                "mode": main_res["mode"],
                "engine": cost.get("engine"),
                "main_s": main_res["write_s"],
                "main_wall_s": main_wall,
                "estimates": cost.get("estimates"),
                "basis": cost.get("basis"),
                "picked": cost.get("picked"),
                "guard": cost.get("guard"),
                "recheck": cost.get("recheck"),
                "exact": exact,
            }
            for v, res in got.items():
                row[f"{v}_mode"], row[f"{v}_s"] = res["mode"], res["write_s"]
            row["hit"] = judge(row)
            rows.append(row)
            others = ", ".join(f"{v} {got[v]['mode']} {got[v]['write_s']:.2f}s" for v in got)
            print(
                f"round {i} {stream} {name}: {row['mode']} {row['main_s']:.2f}s ({row['basis']}"
                f"{', re-check' if row['recheck'] else ''}); {others}; hit={row['hit']} exact={exact}",
                flush=True,
            )
    args.wall_s = time.monotonic() - started
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
        "wall_s": round(getattr(args, "wall_s", 0.0), 1),
    }
    raw_path = Path(args.results) / raw_name("costmodel", date, f"sf{args.sf:g}")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({**meta, "rows": rows}, indent=1, default=str))
    lines = [
        f"# The cost model's choices on a mixed stream (SF {args.sf:g}, {len({r['view'] for r in rows})} views)",
        "",
        f"{meta['date']}, {meta['machine']}; {meta['versions']}. `{meta['command']}`. One warm in-process Spark; "
        f"one run; the stream took {meta['wall_s']:.0f} s. Raw rows: " + link(raw_path, out) + ".",
        "",
        *summary(rows, delete_at=args.delete_history_at),
        "",
        "| view | round | stream | chosen | basis | write s | guard alone | aggregate state / other incremental | "
        "affected groups | full diff | cheapest | hit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def cell(r: dict[str, Any], v: str) -> str:
        return "-" if f"{v}_mode" not in r else f"{r[f'{v}_s']:.2f} ({r[f'{v}_mode']})"

    for r in rows:
        hit = "-" if r["hit"] is None else ("yes" if r["hit"] else "**no**")
        basis = (r["basis"] or "-") + (f", re-check: {r['recheck'].get('ran')} ran" if r.get("recheck") else "")
        lines.append(
            f"| {r['view']} | {r['round']} | {r['stream']} | {r['mode']} | {basis} | {r['main_s']:.2f} | "
            f"{cell(r, 'guard')} | {cell(r, 'incr')} | {cell(r, 'groups')} | {cell(r, 'full')} | "
            f"{cheapest(r) if r['hit'] is not None else '-'} | {hit} |"
        )
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(summary(rows, delete_at=args.delete_history_at)), flush=True)
    print(f"wrote {raw_path} and {out}", flush=True)
    return 0 if all(r["exact"] for r in rows) else 1


def summary(rows: list[dict[str, Any]], *, delete_at: int = 0) -> list[str]:
    """The acceptance's figures, as report lines: the hit rate (all judged refreshes, and without the re-checks),
    the fall-back and recovery after the histories' deletion, and the model against the guard alone on the ``rf``
    and ``scattered`` rounds (no view slower than before)."""
    judged = [r for r in rows if r["hit"] is not None]
    hits = sum(1 for r in judged if r["hit"])
    plain = [r for r in judged if not r.get("recheck") or r["recheck"].get("kind") != "alternative"]
    by_basis: dict[str, list[bool]] = {}
    for r in judged:
        by_basis.setdefault(r["basis"] or "no estimate (a mode the model does not weigh)", []).append(bool(r["hit"]))
    out = [
        f"**{hits} of {len(judged)}** judged refreshes ({hits / max(len(judged), 1):.0%}) chose the cheapest mode or "
        f"one within {TOLERANCE:.0%} of it; {sum(1 for r in plain if r['hit'])} of {len(plain)} without the "
        f"re-checks that ran the alternative ({len(rows) - len(judged)} had one applicable mode, or no change; "
        f"{sum(1 for r in rows if r['exact'])} of {len(rows)} exact). By basis: "
        + "; ".join(f"{b}: {sum(h)} of {len(h)}" for b, h in sorted(by_basis.items()))
        + ".",
    ]
    if delete_at:
        rec = recovery(rows, delete_at)
        fell = [v for v, x in rec.items() if x["first_basis"] == "prior"]
        ok = [v for v, x in rec.items() if x["recovered_at"] is not None and x["recovered_at"] <= RECOVER_WITHIN]
        none = [v for v, x in rec.items() if not x["judged"]]
        out += [
            "",
            f"Histories deleted before round {delete_at}: {len(fell)} of {len(rec)} views' next weighed choice fell "
            f"back to the prior; {len(ok)} of {len(rec) - len(none)} views with a judged refresh after it chose "
            f"right from at most the {RECOVER_WITHIN}rd judged refresh on ("
            + ", ".join(f"{v}: {x['recovered_at'] or 'not'} of {x['judged']}" for v, x in rec.items() if x["judged"])
            + ").",
        ]
    ratios = []
    for view in dict.fromkeys(r["view"] for r in rows):
        sel = [r for r in rows if r["view"] == view and r["stream"] in ("rf", "scattered") and "guard_s" in r]
        model, guard = sum(r["main_s"] for r in sel), sum(r["guard_s"] for r in sel)
        if guard > 0:
            ratios.append(f"{view} {model / guard:.2f}")
    out += [
        "",
        "The model's write steps against the guard alone's on the `rf` and `scattered` rounds (sum over the rounds, "
        "ratio; one run, noisy): " + ", ".join(ratios) + ".",
        "",
        "The same by the choices (:func:`by_choice`: each round's model and guard choice timed by the one forced copy "
        "of its mode, so two refreshes that chose alike count alike; slower: over 1.10): "
        + ", ".join(f"{v} {x:.2f}" + (" **slower**" if x > 1 + TOLERANCE else "") for v, x in by_choice(rows).items())
        + ".",
    ]
    return out


def by_choice(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per view, over the ``rf`` and ``scattered`` rounds: the forced copies' write steps of the modes the model chose,
    summed, over those of the modes the guard alone chose (rounds where a copy took each of the two modes; a mode
    no copy took, ``unchanged`` included, is left out). Where both chose alike the round adds the same time to
    both, so the ratio measures the choices, not the noise between two runs of one mode."""
    out: dict[str, float] = {}
    for view in dict.fromkeys(r["view"] for r in rows):
        model = guard = 0.0
        for r in rows:
            if r["view"] != view or r["stream"] not in ("rf", "scattered"):
                continue
            times = copies(r)
            if r["mode"] in times and r.get("guard_mode") in times:
                model += times[r["mode"]]
                guard += times[r["guard_mode"]]
        if guard > 0:
            out[view] = model / guard
    return out


if __name__ == "__main__":
    sys.exit(main())
