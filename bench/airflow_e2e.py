"""Refreshes end to end through Airflow: trigger -> success, through Spark Connect and through spark-submit.

    .venv/bin/python -m bench.airflow_e2e [--sf 0.1] [--runs 5] [--views 10] [--paths connect,submit]
                                          [--work DIR] [--out bench/reports/airflow.md] [--results bench/results]

(from the repository root, as ``make bench-airflow`` runs it: it imports the tests' helpers as ``tests.support``
and the TPC-H generator and change of ``bench/tpch_refresh.py``; it needs ``tpchgen-cli``).

On ``make airflow``'s setup (``mvsink.devtools.localairflow``: api-server, scheduler, dag-processor and
triggerer on 127.0.0.1, SQLite, LocalExecutor; with ``--paths connect`` a Spark Connect server started
beside it and the write tasks' connection of type ``spark_connect``, with ``submit`` the write tasks
spark-submit to ``local[2]``), for each path:

1. **one view**: the TPC-H ``wide`` view (orders x customer projection), ``--runs`` DAG runs triggered
   over the REST API one after the other, for a no-change refresh (no source commit since the last
   refresh) and for a 1 % change (orders updated, deleted and inserted); the time from the trigger (POST)
   to the run's success, and where it went, from the run's and task instances' times:
   the run's start after the trigger, and per task (mint, write, append) the wait before it was queued
   (scheduling), queued -> running (executor and task process start) and running (the task's work:
   for write the Spark step, for append the commit). The first refresh after the path starts (a warm-up:
   the Connect server's first refresh plans and loads classes) is reported apart.
2. **``--views`` views in one scheduler tick**: as many copies of ``wide`` (own tables), one 1 % change,
   then a run of each triggered at once; wall time from the first trigger to the last success, and the
   peak memory of the whole process tree (Airflow's components, their task processes, spark-submit JVMs,
   the Connect server), as the sum of the RSS of every process, sampled every 0.25 s; the idle sum
   before the trigger beside it. (The copies' first, full refreshes run the same way first, reported apart.)

Writes a Markdown report with the machine, versions and date, and the raw numbers as JSON beside it.
A benchmark, not a test: run it on a quiet machine (``--runs 1 --views 2 --sf 0.01`` is a quick trial).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil

from bench.layout import REPORTS, RESULTS, link, raw_name
from bench.tpch_refresh import VIEWS, change, generate
from mvsink.devtools.localairflow import LocalAirflow, free_port
from tests.support.airflow import DAG_FILE, wait_dags
from tests.support.viewfiles import write_view

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the sources' first commit
DAY = 86_400_000
HOUR = 3_600_000
TASKS = ("mint", "write", "append")


# ---------------------------------------------------------------- times


def _ts(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def _span(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 3)


class Client:
    """The REST calls of one installation, with one token (a token per call would load the api-server)."""

    def __init__(self, af: LocalAirflow) -> None:
        self.af = af
        self.token = af.token()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        status, out = self.af.api(method, path, body, token=self.token)
        if status == 401:
            self.token = self.af.token()
            status, out = self.af.api(method, path, body, token=self.token)
        if status not in (200, 201):
            raise RuntimeError(f"{method} {path}: {status} {out}")
        return out

    def trigger(self, dag_id: str, refresh_time: int) -> str:
        body = {"logical_date": None, "conf": {"refresh_time": str(refresh_time), "dry_run": False}}
        return str(self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)["dag_run_id"])

    def run_path(self, dag_id: str, run_id: str) -> str:
        return f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"

    def wait(
        self, dag_id: str, run_id: str, *, timeout: float = 1800, poll: float = 0.2
    ) -> tuple[dict[str, Any], float]:
        """The run's body once it finished, and when this client saw it finish."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.call("GET", self.run_path(dag_id, run_id))
            if body["state"] in ("success", "failed"):
                seen = time.time()
                if body["state"] != "success":
                    raise RuntimeError(f"{dag_id} run {run_id} failed; see {self.af.home}/logs")
                return body, seen
            time.sleep(poll)
        raise RuntimeError(f"{dag_id} run {run_id} did not finish in {timeout:.0f}s")

    def breakdown(self, dag_id: str, run: dict[str, Any], triggered: float, seen: float) -> dict[str, Any]:
        """Where the seconds of one run went (see the module docstring)."""
        tis = {
            t["task_id"]: t
            for t in self.call("GET", f"{self.run_path(dag_id, run['dag_run_id'])}/taskInstances")["task_instances"]
        }
        start, end = _ts(run.get("start_date")), _ts(run.get("end_date"))
        row: dict[str, Any] = {
            "total_s": _span(triggered, end),
            "observed_s": _span(triggered, seen),
            "trigger_to_run_start_s": _span(triggered, start),
        }
        prev = start
        for name in TASKS:
            ti = tis.get(name, {})
            if ti.get("state") != "success":
                row[f"{name}_ran"] = False
                continue
            queued, began, ended = _ts(ti.get("queued_when")), _ts(ti.get("start_date")), _ts(ti.get("end_date"))
            row.update(
                {
                    f"{name}_ran": True,
                    f"{name}_scheduling_s": _span(prev, queued),
                    f"{name}_queued_to_running_s": _span(queued, began),
                    f"{name}_running_s": _span(began, ended),
                }
            )
            prev = ended
        row["run_end_after_last_task_s"] = _span(prev, end)
        return row

    def xcom(self, dag_id: str, run_id: str, task: str, key: str) -> Any:
        status, body = self.af.api(
            "GET", f"{self.run_path(dag_id, run_id)}/taskInstances/{task}/xcomEntries/{key}", token=self.token
        )
        if status != 200:
            return None
        value = body["value"]
        return json.loads(value) if isinstance(value, str) and value[:1] in "{[" else value


# ---------------------------------------------------------------- memory


class TreeMemory:
    """Sum of the RSS of a process tree (the installation's components, the Connect server, all descendants)."""

    def __init__(self, af: LocalAirflow, interval: float = 0.25) -> None:
        self.af, self.interval = af, interval
        self.peak_mb = 0.0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def roots(self) -> list[int]:
        pids = [p.pid for p in self.af.procs.values()]
        if self.af.connect_server is not None:
            pids.append(self.af.connect_server.pid)
        return pids

    def sample(self) -> tuple[float, int]:
        seen: dict[int, int] = {}
        for pid in self.roots():
            try:
                root = psutil.Process(pid)
                for p in [root, *root.children(recursive=True)]:
                    try:
                        seen[p.pid] = p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
        return sum(seen.values()) / 2**20, len(seen)

    def _loop(self) -> None:
        while not self._stop.is_set():
            mb, n = self.sample()
            if mb > self.peak_mb:
                self.peak_mb, self.peak_procs = mb, n
            time.sleep(self.interval)

    def __enter__(self) -> TreeMemory:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


# ---------------------------------------------------------------- the benchmark


class Bench:
    def __init__(self, *, work: Path, sf: float, runs: int, n_views: int, connect_memory: str) -> None:
        self.work, self.sf, self.runs, self.n_views = work, sf, runs, n_views
        self.connect_memory = connect_memory
        self.root = work / "data"
        self.dags = work / "dags"
        self.t = T0 + DAY
        self.step = 0
        self.copies = [f"wide_c{i}" for i in range(n_views)]

    def setup(self) -> None:
        print(f"generating TPC-H SF{self.sf} under {self.root} ...", flush=True)
        generate(self.root, self.sf, T0, cdf=True)
        shutil.rmtree(self.root / "out", ignore_errors=True)
        shutil.rmtree(self.dags, ignore_errors=True)
        (self.dags / "views").mkdir(parents=True)
        shutil.copy(DAG_FILE, self.dags / "mvsink_views.py")
        sql, sources, key = VIEWS["wide"]
        for name in ("wide", *self.copies):
            write_view(
                self.dags / "views",
                name,
                query=sql,
                sources={s: f"src/{s}" for s in sources},
                target=f"out/{name}",
                as_of=T0,
                key=key,
                schedule="manual",
            )

    def next_time(self, rate: float) -> int:
        """The next refresh time; ``rate`` of the orders changed an hour before it (nothing if 0)."""
        self.t += DAY
        self.step += 1
        change(self.root, rate, self.step, self.t - HOUR)
        return self.t

    def installation(self, path: str) -> LocalAirflow:
        home = self.work / f"home-{path}"
        shutil.rmtree(home, ignore_errors=True)
        return LocalAirflow(
            home,
            self.dags,
            data_root=self.root,
            spark="connect" if path == "connect" else "submit",
            connect_port=free_port(),
            connect_conf={"spark.driver.memory": self.connect_memory},
            extra_env={
                "MVSINK_REPORTS_DIR": str(self.work / "reports"),
                "MVSINK_TASK_RETRIES": "0",  # a failure shows as one, not as a slow retried run
                "AIRFLOW__CORE__PARALLELISM": str(max(4, self.n_views)),
                "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "16",
            },
        )

    def one_run(self, c: Client, dag_id: str, rate: float) -> dict[str, Any]:
        t = self.next_time(rate)
        triggered = time.time()
        run_id = c.trigger(dag_id, t)
        run, seen = c.wait(dag_id, run_id)
        row = c.breakdown(dag_id, run, triggered, seen)
        write = c.xcom(dag_id, run_id, "write", "return_value") if row.get("write_ran") else None
        if isinstance(write, dict):
            row["spark_write_s"] = write.get("seconds")  # the write step inside the task (Connect path)
        summary = c.xcom(dag_id, run_id, "append", "summary") or c.xcom(dag_id, run_id, "mint", "summary") or {}
        row.update(status=summary.get("status"), mode=summary.get("mode"), rows=summary.get("rows_added"))
        return row

    def many_runs(self, af: LocalAirflow, c: Client, rate: float) -> dict[str, Any]:
        t = self.next_time(rate)
        idle_mb, idle_procs = TreeMemory(af).sample()
        with TreeMemory(af) as mem:
            triggered = time.time()
            ids = {f"mv_{v}": c.trigger(f"mv_{v}", t) for v in self.copies}
            ends = [c.wait(d, r)[0] for d, r in ids.items()]
        last = max(_ts(r["end_date"]) or 0.0 for r in ends)
        return {
            "views": len(ids),
            "wall_s": round(last - triggered, 3),
            "peak_rss_mb": round(mem.peak_mb),
            "peak_processes": mem.peak_procs,
            "idle_rss_mb": round(idle_mb),
            "idle_processes": idle_procs,
        }

    def path(self, path: str, *, rates: list[float]) -> dict[str, Any]:
        af = self.installation(path)
        print(f"[{path}] starting Airflow{' and a Spark Connect server' if path == 'connect' else ''} ...", flush=True)
        af.start()
        out: dict[str, Any] = {"path": path, "single": [], "warmup": None, "concurrent": None}
        try:
            wait_dags(af, [f"mv_{v}" for v in ("wide", *self.copies)], timeout=300)
            c = Client(af)
            out["warmup"] = self.one_run(c, "mv_wide", 0.01)  # first refresh on this path (full or warm-up)
            print(f"[{path}] warm-up: {json.dumps(out['warmup'])}", flush=True)
            for rate in rates:
                for i in range(self.runs):
                    row = {"rate": rate, "round": i, **self.one_run(c, "mv_wide", rate)}
                    out["single"].append(row)
                    print(f"[{path}] {json.dumps(row)}", flush=True)
            if self.n_views:
                out["concurrent_first"] = self.many_runs(af, c, 0.01)
                print(f"[{path}] {self.n_views} views, first refresh: {out['concurrent_first']}", flush=True)
                out["concurrent"] = self.many_runs(af, c, 0.01)
                print(f"[{path}] {self.n_views} views, 1 % change: {out['concurrent']}", flush=True)
        finally:
            af.stop()
        return out


# ---------------------------------------------------------------- report


def _med(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(vals), 2) if vals else None


def _range(rows: list[dict[str, Any]], key: str) -> str:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return f"{min(vals):.1f}-{max(vals):.1f}" if vals else "-"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def machine() -> dict[str, Any]:
    mem = next((ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")), 0)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    first = (java.stderr or java.stdout).splitlines()
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "cpus": os.cpu_count(),
        "memory_gib": round(int(mem) / 2**20, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": first[0] if first else "?",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": {
            p: version(p)
            for p in ("apache-airflow", "apache-airflow-providers-apache-spark", "pyspark", "deltalake", "tpchgen-cli")
        },
    }


def write_report(
    out: Path, results: list[dict[str, Any]], *, args: argparse.Namespace, info: dict[str, Any], raw: str = "?"
) -> None:
    lines = [
        "# Refreshes end to end through Airflow",
        "",
        *([f"**{args.note}**", ""] if getattr(args, "note", None) else []),
        f"`python -m bench.airflow_e2e --sf {args.sf} --runs {args.runs} --views {args.views} --paths {args.paths}` "
        f"on {info['date_utc']} UTC; {info['cpus']} cores, {info['memory_gib']} GiB, {info['platform']}; "
        f"Python {info['python']}, {info['java']}; "
        + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
        + f". Load average at the start: {info['load_average']}.",
        "",
        f"Raw rows: {raw}.",
        "",
        "Setup: `make airflow`'s (`mvsink.devtools.localairflow`: api-server, scheduler, dag-processor, triggerer on "
        "127.0.0.1, SQLite, LocalExecutor, parallelism "
        f"{max(4, args.views)}). **connect**: a Spark Connect server (`local[2]`, driver memory {args.connect_memory}) "
        "started beside Airflow, the write tasks' connection of type `spark_connect`. **submit**: the write tasks "
        "spark-submit to `local[2]` (`spark_default`). View: TPC-H `wide` (orders x customer projection, "
        f"key `o_orderkey`) at SF {args.sf}. Times from the REST trigger (POST) to the run's `end_date`; "
        "medians (min-max).",
        "",
        "## One view: trigger to success",
        "",
        "| path | change | runs | trigger -> success (s) | range | write ran | mode |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for res in results:
        for rate in sorted({r["rate"] for r in res["single"]}):
            rows = [r for r in res["single"] if r["rate"] == rate]
            lines.append(
                f"| {res['path']} | {'none' if rate == 0 else f'{rate:.0%}'} | {len(rows)} | "
                f"**{_fmt(_med(rows, 'total_s'))}** | {_range(rows, 'total_s')} | "
                f"{sum(bool(r.get('write_ran')) for r in rows)}/{len(rows)} | "
                f"{', '.join(sorted({str(r.get('mode') or 'no write (no source changed)') for r in rows}))} |"
            )
    lines += [
        "",
        "First refresh on each path (warm-up; for connect the server's first refresh plans and loads classes): "
        + "; ".join(
            f"{res['path']} {_fmt(res['warmup']['total_s'])} s" for res in results if res.get("warmup") is not None
        )
        + ".",
        "",
        "## Where the seconds go (medians, s)",
        "",
        "scheduling = previous step's end (the run's start for mint) -> the task queued; queued -> running = the "
        "executor starting the task's process until it reports running; running = the task's work (write: the "
        "Spark step; append: the commit); spark write = the write job itself inside the write task (reported by "
        "the Connect path only); a no-change refresh skips write.",
        "",
    ]
    cols = ["trigger_to_run_start_s"]
    for t in TASKS:
        cols += [f"{t}_scheduling_s", f"{t}_queued_to_running_s", f"{t}_running_s"]
    cols += ["spark_write_s", "run_end_after_last_task_s", "total_s"]
    lines.append("| path | change | " + " | ".join(c.removesuffix("_s").replace("_", " ") for c in cols) + " |")
    lines.append("| --- | --- | " + " | ".join("---" for _ in cols) + " |")
    for res in results:
        for rate in sorted({r["rate"] for r in res["single"]}):
            rows = [r for r in res["single"] if r["rate"] == rate]
            cells = " | ".join(_fmt(_med(rows, c)) for c in cols)
            lines.append(f"| {res['path']} | {'none' if rate == 0 else f'{rate:.0%}'} | {cells} |")
    conc = [r for r in results if r.get("concurrent")]
    if conc:
        lines += [
            "",
            f"## {args.views} views refreshed in the same scheduler tick (1 % change)",
            "",
            "Peak = the highest sum of the RSS of every process of the installation (Airflow's components and "
            "their task processes, spark-submit JVMs, the Connect server), sampled every 0.25 s; idle = the same "
            "sum just before the triggers.",
            "",
            "| path | views | wall, first trigger -> last success (s) | peak RSS (MB) | processes at peak | idle RSS (MB) "
            "| the round before (the copies' first on this path) wall (s) | its peak RSS (MB) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for res in conc:
            c, f = res["concurrent"], res.get("concurrent_first") or {}
            lines.append(
                f"| {res['path']} | {c['views']} | {c['wall_s']:.1f} | {c['peak_rss_mb']} | {c['peak_processes']} | "
                f"{c['idle_rss_mb']} | {_fmt(f.get('wall_s'))} | {f.get('peak_rss_mb', '-')} |"
            )
        by = {r["path"]: r["concurrent"] for r in conc}
        if {"connect", "submit"} <= set(by):
            a, b = by["connect"], by["submit"]
            lines += [
                "",
                f"Through Connect the peak was {a['peak_rss_mb'] - b['peak_rss_mb']:+d} MB against spark-submit "
                f"({a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x), and the wall time {a['wall_s'] / b['wall_s']:.2f}x.",
            ]
    lines += [
        "",
        "## Targets (issue 12)",
        "",
    ]
    by_path = {r["path"]: r for r in results}
    if "connect" in by_path:
        rows = by_path["connect"]["single"]
        one = _med([r for r in rows if r["rate"] == 0.01], "total_s")
        none = _med([r for r in rows if r["rate"] == 0], "total_s")
        lines.append(f"- connect, 1 % change of `wide`: {_fmt(one)} s (target <= 10 s at SF 0.1).")
        lines.append(f"- connect, no change: {_fmt(none)} s (target <= 5 s).")
    if {"connect", "submit"} <= set(by_path) and all(by_path[p].get("concurrent") for p in ("connect", "submit")):
        a, b = by_path["connect"]["concurrent"], by_path["submit"]["concurrent"]
        verdict = "less" if a["peak_rss_mb"] < b["peak_rss_mb"] else "not less"
        lines.append(
            f"- {args.views} concurrent refreshes: peak {a['peak_rss_mb']} MB through Connect against "
            f"{b['peak_rss_mb']} MB through spark-submit ({verdict}; target: less)."
        )
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.airflow_e2e", description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=5, help="runs per change rate (medians are reported)")
    ap.add_argument("--views", type=int, default=10, help="views refreshed in the same tick (0: skip)")
    ap.add_argument("--paths", default="connect,submit")
    ap.add_argument("--rates", default="0,0.01")
    ap.add_argument("--connect-memory", default="2g", help="driver memory of the Spark Connect server")
    ap.add_argument("--work", default="/tmp/mvsink-bench-airflow")
    ap.add_argument("--out", default=str(REPORTS / "airflow.md"), help="the report")
    ap.add_argument("--results", default=str(RESULTS), help="folder of the raw rows, one JSON file per run")
    ap.add_argument("--note", help="a line printed at the top of the report (e.g. the machine's state)")
    ap.add_argument("--rewrite", metavar="RAW_JSON", help="only rewrite --out from a run's raw rows")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.rewrite:
        raw = json.loads(Path(args.rewrite).read_text())
        saved = argparse.Namespace(**{**raw["args"], "note": args.note or raw["args"].get("note")})
        write_report(out, raw["results"], args=saved, info=raw["machine"], raw=link(args.rewrite, out))
        return 0
    info = machine()
    bench = Bench(
        work=Path(args.work), sf=args.sf, runs=args.runs, n_views=args.views, connect_memory=args.connect_memory
    )
    bench.setup()
    rates = [float(x) for x in args.rates.split(",")]
    results = [bench.path(p, rates=rates) for p in args.paths.split(",")]
    when = dt.datetime.strptime(info["date_utc"], "%Y-%m-%d %H:%M")
    raw_path = Path(args.results) / raw_name("airflow", when, f"sf{args.sf:g}")
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps({"args": vars(args), "machine": info, "results": results}, indent=1))
    print(f"wrote {raw_path}")
    write_report(out, results, args=args, info=info, raw=link(raw_path, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
