"""Concurrency soak: independent Airflow installations plus manual CLI refreshes race on one view.

    .venv/bin/python -m bench.soak --rounds 12 --homes 2 --report bench/reports/soak.md [--work DIR] [--seed N]

(from the repository root, as ``make soak`` runs it: it imports the tests' helpers as ``tests.support``).

Starts ``--homes`` LocalAirflow installations (own AIRFLOW_HOME, SQLite DB and port on 127.0.0.1;
the same DAGs folder and data root), then for every round: makes a random change to the source
(insert, delete, update, or none), and for refresh time ``R = BASE + round hours`` triggers a run
on every installation and one ``mvsink refresh`` CLI call at once. When every run (including the
runs that reschedules start) has finished it checks, and records in the report:

- contents at ``R`` == the DuckDB oracle over the source as of ``R``;
- exactly one append commit for ``R`` (no duplicate), and no failed run;
- orphans: staged manifests and never-committed batch folders left behind (must be 0);
- counts: appends (data, or upper-only when nothing changed), reschedules (upper mismatches:
  DAG reschedule runs and CLI results), no-ops (runs that found the view up to date).

Not part of the default test run (``tests/e2e/test_soak.py`` runs a 2-round version).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mvsink.core.table import ViewTable
from mvsink.definitions.catalog import Catalog
from mvsink.devtools.localairflow import LocalAirflow
from mvsink.readers.arrow import read_view
from tests.support.airflow import DAG_FILE, runs, trigger_run, wait_dags, xcom
from tests.support.data import SOAK_QUERY as QUERY
from tests.support.data import soak_change, soak_orders
from tests.support.delta import BASE, HOUR, staged_leftovers, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view


class Soak:
    def __init__(self, work: Path, *, homes: int = 2, seed: int = 6, cli: bool = True, log: Any = print) -> None:
        self.work, self.n_homes, self.cli, self.log = work, homes, cli, log
        self.rng = random.Random(seed)
        self.data, self.dags = work / "data", work / "dags"
        self.views = self.dags / "views"
        self.orders = str(self.data / "orders")
        self.next_id = [0]
        self.homes: list[LocalAirflow] = []
        self.seen: list[set[str]] = []
        self.rounds: list[dict[str, Any]] = []

    # -- setup -------------------------------------------------------------------------------------
    def setup(self) -> None:
        self.views.mkdir(parents=True)
        self.data.mkdir(parents=True)
        shutil.copy(DAG_FILE, self.dags / "mvsink_views.py")
        write_at(self.orders, soak_orders(self.rng, 0, 40), BASE - HOUR)
        self.next_id = [40]
        write_view(
            self.views,
            "soak",
            query=QUERY,
            sources={"orders": "orders"},
            target="views/soak",
            as_of=BASE,
            schedule="manual",
        )
        os.environ["MVSINK_DATA_ROOT"] = str(self.data)
        self.view = Catalog(self.views).get("soak")
        for i in range(self.n_homes):
            af = LocalAirflow(
                self.work / f"home{i}",
                self.dags,
                data_root=self.data,
                extra_env={"MVSINK_REPORTS_DIR": str(self.work / "reports"), "MVSINK_TASK_RETRY_DELAY_SECONDS": "2"},
            )
            af.env.pop("MVSINK_FAIL_POINTS", None)
            self.homes.append(af)
            self.seen.append(set())
        for af in self.homes:  # one at a time: db migrate and start-up are CPU-heavy
            af.start()
            wait_dags(af, {"mv_soak"}, timeout=240)
            self.log(f"airflow {af.home.name} up at {af.url}")

    def stop(self) -> None:
        for af in self.homes:
            af.stop()

    # -- one round ---------------------------------------------------------------------------------
    def change_source(self, when: int) -> str:
        return soak_change(self.rng, self.orders, self.next_id, when)

    def _home_of(self, run_id: str) -> str:
        for i, seen in enumerate(self.seen):
            if run_id in seen:
                return f"airflow home{i}"
        return "airflow"

    def _wait_quiet(self, timeout: float = 1200) -> list[list[dict[str, Any]]]:
        """Every run of every installation finished, twice in a row 4 s apart (reschedules included)."""
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline:
            all_runs = [runs(af, "mv_soak", limit=1000) for af in self.homes]
            if all(x["state"] in ("success", "failed") for rs in all_runs for x in rs):
                quiet += 1
                if quiet >= 2:
                    return all_runs
            else:
                quiet = 0
            time.sleep(4)
        raise RuntimeError("runs did not finish in time")

    def round(self, k: int) -> dict[str, Any]:
        t0 = time.monotonic()
        r = BASE + k * HOUR
        change = self.change_source(r - 20 * 60_000)
        cli = None
        racers: list[Any] = [*self.homes, *(["cli"] if self.cli else [])]
        self.rng.shuffle(racers)  # who starts first, and with what head start, varies by round
        for racer in racers:
            time.sleep(self.rng.choice([0, 0, 1, 3]))
            if racer == "cli":
                cli = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "mvsink",
                        "refresh",
                        "soak",
                        "--at",
                        str(r),
                        "--json",
                        "--run-id",
                        f"soak-cli-{k}",
                        "--views-dir",
                        str(self.views),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={k_: v for k_, v in os.environ.items() if k_ != "MVSINK_FAIL_POINTS"},
                )
            else:
                trigger_run(racer, "mv_soak", {"refresh_time": str(r)})
        outcomes: Counter[str] = Counter()
        problems: list[str] = []
        if cli is not None:
            out, err = cli.communicate(timeout=1200)
            if cli.returncode != 0:
                problems.append(f"CLI refresh failed: {err[-500:]}")
            else:
                outcomes[f"cli {json.loads(out)['status']}"] += 1
        all_runs = self._wait_quiet()
        failed = 0
        for i, (af, home_runs) in enumerate(zip(self.homes, all_runs)):
            for run in home_runs:
                rid = run["dag_run_id"]
                if rid in self.seen[i]:
                    continue
                self.seen[i].add(rid)
                if run["state"] != "success":
                    failed += 1
                    problems.append(f"{af.home.name} run {rid} {run['state']}")
                    continue
                summary = (
                    xcom(af, "mv_soak", rid, "append", "summary", missing_ok=True)
                    or xcom(af, "mv_soak", rid, "mint", "summary", missing_ok=True)
                    or {}
                )
                status = summary.get("status", "unknown")
                outcomes[f"dag {status}"] += 1
                if (run.get("conf") or {}).get("attempt"):
                    outcomes["dag reschedule runs"] += 1
        hist = [
            h.info
            for h in ViewTable.open(self.view, check=False).history()
            if h.info is not None and h.info.operation == "append" and h.info.refresh_time == r
        ]
        got = multiset(read_view(self.view, as_of=r))
        want = oracle(QUERY, {"orders": self.orders}, r)
        leftovers = staged_leftovers(self.view.target)
        if got != want:
            problems.append(f"contents != oracle at {r}: {sum(got.values())} rows vs {sum(want.values())}")
        if len(hist) != 1:
            problems.append(f"{len(hist)} append commits for refresh time {r}")
        if leftovers:
            problems.append(f"orphans: {leftovers}")
        mode = (hist[0].mode or "") if hist else ""
        winner = (hist[0].run_id or "") if hist else ""
        res = {
            "round": k,
            "refresh_time": r,
            "change": change,
            "rows": sum(want.values()),
            "oracle_ok": got == want,
            "appends": len(hist),
            "append_mode": mode,
            "winner": "cli" if winner.startswith("soak-cli") else self._home_of(winner),
            "reschedules": outcomes["dag rescheduled"] + outcomes["cli rescheduled"],
            "no_ops": outcomes["dag up_to_date"] + outcomes["cli up_to_date"],
            "failed_runs": failed,
            "orphans": len(leftovers),
            "outcomes": dict(outcomes),
            "seconds": round(time.monotonic() - t0, 1),
            "problems": problems,
        }
        self.rounds.append(res)
        self.log(
            f"round {k}: {change}; {res['rows']} rows, oracle {'ok' if res['oracle_ok'] else 'MISMATCH'}, "
            f"appends {res['appends']} ({mode}, by {res['winner']}), reschedules {res['reschedules']}, "
            f"no-ops {res['no_ops']}, failed {failed}, orphans {res['orphans']}, {res['seconds']} s"
            + (f"; PROBLEMS {problems}" if problems else "")
        )
        return res


def totals(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rounds": len(rounds),
        "oracle_ok_rounds": sum(r["oracle_ok"] for r in rounds),
        "appends": sum(r["appends"] for r in rounds),
        "appends_upper_only": sum(r["appends"] for r in rounds if r["append_mode"] == "unchanged"),
        "reschedules": sum(r["reschedules"] for r in rounds),
        "no_ops": sum(r["no_ops"] for r in rounds),
        "failed_runs": sum(r["failed_runs"] for r in rounds),
        "orphans": sum(r["orphans"] for r in rounds),
        "won_by": dict(Counter(r["winner"] for r in rounds)),
        "problems": [p for r in rounds for p in r["problems"]],
    }


def write_report(path: Path, soak: Soak, tot: dict[str, Any], wall: float, args: argparse.Namespace) -> None:
    lines = [
        "# Concurrency soak",
        "",
        f"`python -m bench.soak --rounds {args.rounds} --homes {args.homes} --seed {args.seed}`"
        f"{'' if args.cli else ' --no-cli'}: {args.homes} independent Airflow 3.3 installations (own "
        "AIRFLOW_HOME, SQLite DB, api-server/scheduler/dag-processor/triggerer on 127.0.0.1, LocalExecutor, "
        "spark-submit `local[2]`)"
        + (" plus one manual `mvsink refresh` CLI call" if args.cli else "")
        + " refresh the same view at the same refresh time every round, after a random change to its source. "
        f"Run on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}.",
        "",
        "| rounds | contents == oracle | appends (upper-only) | reschedules | no-ops | failed runs | orphans | "
        "winners | wall time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {tot['rounds']} | {tot['oracle_ok_rounds']}/{tot['rounds']} | {tot['appends']} "
        f"({tot['appends_upper_only']}) | {tot['reschedules']} | {tot['no_ops']} | {tot['failed_runs']} | "
        f"{tot['orphans']} | {', '.join(f'{k}: {v}' for k, v in sorted(tot['won_by'].items()))} | {wall / 60:.1f} min |",
        "",
        "- appends: append commits in the view's Delta log for the round's refresh time (exactly one per round "
        "means no duplicate); upper-only: the no-change shortcut (no Spark job, only the upper moved).",
        "- reschedules: upper mismatches (an Airflow run whose append lost and started a reschedule run, or a "
        "CLI refresh that reported `rescheduled`); no-ops: runs that minted nothing (up to date), mostly the "
        "reschedule runs and late racers.",
        "- orphans: staged manifests plus batch folders no append commit names, after the round "
        "(`tests/support/delta.staged_leftovers`).",
        "",
        "| round | source change | rows | oracle | append (mode, winner) | reschedules | no-ops | failed | orphans "
        "| seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in soak.rounds:
        lines.append(
            f"| {r['round']} | {r['change']} | {r['rows']} | {'ok' if r['oracle_ok'] else 'MISMATCH'} | "
            f"{r['appends']} ({r['append_mode']}, {r['winner']}) | {r['reschedules']} | {r['no_ops']} | "
            f"{r['failed_runs']} | {r['orphans']} | {r['seconds']} |"
        )
    if tot["problems"]:
        lines += ["", "Problems:", *[f"- {p}" for p in tot["problems"]]]
    path.write_text("\n".join(lines) + "\n")


def run(args: argparse.Namespace, log: Any = print) -> dict[str, Any]:
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="mvsink-soak-"))
    t0 = time.monotonic()
    soak = Soak(work, homes=args.homes, seed=args.seed, cli=args.cli, log=log)
    try:
        soak.setup()
        for k in range(1, args.rounds + 1):
            soak.round(k)
    finally:
        soak.stop()
    wall = time.monotonic() - t0
    tot = totals(soak.rounds)
    tot["wall_seconds"] = round(wall, 1)
    if args.report:
        write_report(Path(args.report), soak, tot, wall, args)
    if not args.work and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return tot


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--homes", type=int, default=2, help="independent Airflow installations")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--no-cli", dest="cli", action="store_false", help="no manual CLI refresh in the race")
    ap.add_argument("--report", help="write the Markdown report here (make soak: bench/reports/soak.md)")
    ap.add_argument("--work", help="working folder (default: a temporary one, removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary working folder")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    tot = run(args, log=lambda m: print(m, flush=True))
    print(json.dumps(tot, indent=1))
    ok = tot["oracle_ok_rounds"] == tot["rounds"] and tot["appends"] == tot["rounds"] and not tot["problems"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
