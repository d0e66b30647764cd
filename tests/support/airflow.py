"""One Airflow client for the tests and the soak.

- ``AirflowHome``: a throw-away installation without servers (DagBag, ``airflow dags test``);
- ``dags_folder`` + ``running_airflow``: a DAGs folder with the project's DAG file, and a running
  installation (api-server, scheduler, dag-processor, triggerer on 127.0.0.1) that has parsed the DAGs;
- REST calls every cluster test makes: ``trigger_run``, ``wait_run``, ``runs``, ``xcom``,
  ``task_instance``, ``task_states``, ``task_log``, ``backfills``; and ``wait_for``, the one polling loop.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from mvsink.devtools.localairflow import CONNECT_CONN_ID, LocalAirflow
from mvsink.spark.connect import address
from tests.support import REPO

T = TypeVar("T")
DAG_FILE = REPO / "dags" / "mvsink_views.py"


@functools.cache
def migrated_home() -> Path:
    """An Airflow home migrated once per test process (``airflow db migrate``); every installation of the tests
    starts from a copy of its database and configuration (``LocalAirflow(migrated_home=...)``)."""
    home = Path(tempfile.mkdtemp(prefix="mvsink-airflow-home-"))
    LocalAirflow(home, home / "dags").migrate()
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


class AirflowHome(LocalAirflow):
    """LocalAirflow's environment without starting servers (DagBag, `airflow dags test`)."""

    def __init__(self, root: Path, data_root: Path):
        self.views = root / "dags" / "views"
        self.views.mkdir(parents=True, exist_ok=True)
        shutil.copy(DAG_FILE, root / "dags" / "mvsink_views.py")
        super().__init__(
            root / "airflow",
            root / "dags",
            data_root=data_root,
            extra_env={"MVSINK_REPORTS_DIR": str(root / "reports")},
            migrated_home=migrated_home(),
        )
        self.data = data_root
        self.env.pop("MVSINK_FAIL_POINTS", None)

    def use_connect(self, url: str) -> None:
        """Write tasks through the Spark Connect server at ``url`` (the test run's), as ``make airflow``'s do."""
        host, port = address(url)
        self.env[f"AIRFLOW_CONN_{CONNECT_CONN_ID.upper()}"] = json.dumps(
            {"conn_type": "spark_connect", "host": host, "port": port}
        )
        self.env["MVSINK_SPARK_CONN_ID"] = CONNECT_CONN_ID

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=300)

    def dagbag(self) -> dict[str, object]:
        """DAG ids and import errors as the DAG processor's DagBag sees the DAGs folder."""
        proc = self.python(
            "import json\n"
            "from airflow.dag_processing.dagbag import DagBag\n"
            f"b = DagBag(dag_folder={str(self.dags)!r})\n"
            "info = {i: {'timetable': type(d.timetable).__name__, 'summary': str(getattr(d.timetable, 'summary', None) or getattr(d.timetable, '_expression', None) or d.timetable),\n"
            "            'start': str(d.start_date), 'end': str(d.end_date), 'tags': sorted(d.tags),\n"
            "            'max_active_runs': d.max_active_runs, 'tasks': sorted(t.task_id for t in d.tasks),\n"
            "            'params': sorted(d.params), 'doc': d.doc_md or ''} for i, d in b.dags.items()}\n"
            "print('DAGBAG ' + json.dumps({'dags': sorted(b.dags), 'errors': b.import_errors, 'info': info}))\n"
        )
        line = next((x for x in proc.stdout.splitlines() if x.startswith("DAGBAG ")), None)
        assert line, proc.stderr[-3000:]
        return json.loads(line[len("DAGBAG ") :])


# --------------------------------------------------------------------------- a running installation


def dags_folder(root: Path) -> tuple[Path, Path]:
    """``(root/data, root/dags)``: an empty data root, and a DAGs folder with ``views/`` and the project's DAG file."""
    data, dags = root / "data", root / "dags"
    (dags / "views").mkdir(parents=True)
    data.mkdir()
    shutil.copy(DAG_FILE, dags / "mvsink_views.py")
    return data, dags


def wait_for(what: str, probe: Callable[[], T], *, timeout: float, poll: float = 3) -> T:
    """Poll ``probe()`` until it returns a truthy value, and return it; fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {value!r}")
        time.sleep(poll)


def dag_ids(af: LocalAirflow) -> set[str]:
    """The DAGs the installation has parsed (none while the API is not answering)."""
    status, body = af.api("GET", "/api/v2/dags?limit=100", token=af.token())
    return {d["dag_id"] for d in body.get("dags", [])} if status == 200 else set()


def wait_dags(af: LocalAirflow, wanted: Iterable[str], *, timeout: float = 120) -> None:
    """Wait until the installation has parsed every DAG in ``wanted``."""
    want = set(wanted)
    wait_for(f"DAGs {sorted(want)} parsed by {af.url}", lambda: want <= dag_ids(af) and want, timeout=timeout, poll=2)


@contextmanager
def running_airflow(
    root: Path,
    dags: Path,
    data: Path,
    *,
    wanted: Iterable[str],
    extra_env: dict[str, str] | None = None,
    timeout: float = 120,
    connect_url: str | None = None,
) -> Iterator[LocalAirflow]:
    """A LocalAirflow at ``root/home`` for ``dags``, started and with ``wanted`` parsed; stopped afterwards.

    With ``connect_url`` (the test run's server, fixture ``connect_url``) the write tasks run through that Spark
    Connect server, as ``make airflow``'s do; without it they spark-submit (``local[2]``).
    """
    af = LocalAirflow(
        root / "home",
        dags,
        data_root=data,
        extra_env={"MVSINK_REPORTS_DIR": str(root / "reports"), **(extra_env or {})},
        spark="connect" if connect_url else "submit",
        connect_url=connect_url,
        migrated_home=migrated_home(),
    )
    af.start()
    try:
        wait_dags(af, wanted, timeout=timeout)
        yield af
    finally:
        af.stop()


# --------------------------------------------------------------------------- REST calls


def _run_path(dag_id: str, run_id: str) -> str:
    return f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"


def _get(af: LocalAirflow, path: str) -> Any:
    status, body = af.api("GET", path, token=af.token())
    assert status == 200, (path, status, body)
    return body


def post_run(af: LocalAirflow, dag_id: str, conf: dict[str, Any]) -> tuple[int, Any]:
    """POST a new run with ``conf``; (status, body), whatever the answer."""
    return af.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf}, token=af.token())


def trigger_run(af: LocalAirflow, dag_id: str, conf: dict[str, Any]) -> str:
    """Trigger a run over the REST API; its run id."""
    status, body = post_run(af, dag_id, conf)
    assert status in (200, 201), (dag_id, status, body)
    return str(body["dag_run_id"])


def wait_run(
    af: LocalAirflow,
    dag_id: str,
    run_id: str,
    *,
    timeout: float = 300,
    poll: float = 2,
    on_poll: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Poll a run until it succeeds or fails; its REST body."""
    deadline = time.monotonic() + timeout
    body: Any = None
    while time.monotonic() < deadline:
        if on_poll:
            on_poll()
        status, body = af.api("GET", _run_path(dag_id, run_id), token=af.token())
        if status == 200 and body["state"] in ("success", "failed"):
            return dict(body)
        time.sleep(poll)
    raise AssertionError(f"{dag_id} run {run_id} did not finish in {timeout:.0f}s: {body}")


def runs(af: LocalAirflow, dag_id: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """The DAG's runs, oldest first."""
    return list(_get(af, f"/api/v2/dags/{dag_id}/dagRuns?limit={limit}&order_by=run_after")["dag_runs"])


def finished(rs: list[dict[str, Any]]) -> bool:
    return all(x["state"] in ("success", "failed") for x in rs)


def xcom(af: LocalAirflow, dag_id: str, run_id: str, task: str, key: str, *, missing_ok: bool = False) -> Any:
    """A task's XCom value (JSON objects decoded); None when ``missing_ok`` and there is none."""
    status, body = af.api(
        "GET", f"{_run_path(dag_id, run_id)}/taskInstances/{task}/xcomEntries/{key}", token=af.token()
    )
    if status != 200 and missing_ok:
        return None
    assert status == 200, (dag_id, run_id, task, key, status, body)
    value = body["value"]
    return json.loads(value) if isinstance(value, str) and value.startswith("{") else value


def task_instance(af: LocalAirflow, dag_id: str, run_id: str, task: str) -> dict[str, Any]:
    return dict(_get(af, f"{_run_path(dag_id, run_id)}/taskInstances/{task}"))


def task_states(af: LocalAirflow, dag_id: str, run_id: str) -> dict[str, str]:
    """task id -> state of every task instance of the run."""
    body = _get(af, f"{_run_path(dag_id, run_id)}/taskInstances")
    return {t["task_id"]: t["state"] for t in body["task_instances"]}


def task_log(af: LocalAirflow, dag_id: str, run_id: str, task: str, try_number: int = 1) -> Any:
    """A task try's whole log, as the REST API returns it."""
    return _get(af, f"{_run_path(dag_id, run_id)}/taskInstances/{task}/logs/{try_number}?full_content=true")


def backfills(af: LocalAirflow, dag_id: str) -> list[dict[str, Any]]:
    """Every backfill of the DAG, closed or not (REST bodies)."""
    return list(_get(af, f"/api/v2/backfills?dag_id={dag_id}")["backfills"])


def create_backfill(af: LocalAirflow, dag_id: str, *args: str, attempts: int = 4, pause: float = 5) -> dict[str, Any]:
    """``airflow backfill create --dag-id <dag_id> <args>``, tried again while SQLite reports "database is locked";
    the REST body of the backfill it made.

    Airflow commits the backfill's row before it creates the backfill's runs, and a lock error between the
    two leaves that row behind when its best-effort clean-up fails too; a retry would then meet it as
    "another backfill is running". Before a retry, such a leftover without runs is cancelled through the REST
    API, which closes it at once (the scheduler would close it only after two minutes); one with runs is waited
    for until they finish. A leftover stays in the DAG's list of backfills, so callers follow the returned
    backfill by its id, never by counting.
    """
    command = ("backfill", "create", "--dag-id", dag_id, *args)
    known = {b["id"] for b in backfills(af, dag_id)}
    for attempt in range(1, attempts + 1):
        proc = af.run(*command, check=False)
        if proc.returncode == 0:
            made = [b for b in backfills(af, dag_id) if b["id"] not in known]
            assert made, f"airflow {' '.join(command)} succeeded but no new backfill of {dag_id} is listed"
            return max(made, key=lambda b: b["id"])
        if "database is locked" not in proc.stderr or attempt == attempts:
            raise RuntimeError(f"airflow {' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        for left in backfills(af, dag_id):
            if left["id"] not in known and not left.get("completed_at") and not _backfill_runs(af, left["id"]):
                status, body = af.api("PUT", f"/api/v2/backfills/{left['id']}/cancel", token=af.token())
                assert status == 200, (left, status, body)
        wait_for(  # a leftover with runs (never seen so far) closes once they finish
            f"a backfill of {dag_id} left by a failed create to close",
            lambda seen=frozenset(known): all(b.get("completed_at") or b["id"] in seen for b in backfills(af, dag_id)),
            timeout=300,
        )
        known = {b["id"] for b in backfills(af, dag_id)}
        time.sleep(pause)
    raise AssertionError("unreachable")


def _backfill_runs(af: LocalAirflow, backfill_id: int) -> int:
    """How many runs a backfill has, from the installation's SQLite database (the REST API does not say)."""
    with closing(sqlite3.connect(f"file:{af.home / 'airflow.db'}?mode=ro", uri=True, timeout=60)) as db:
        (n,) = db.execute("SELECT count(*) FROM backfill_dag_run WHERE backfill_id = ?", (backfill_id,)).fetchone()
    return int(n)


def backfill(af: LocalAirflow, dag_id: str, backfill_id: int) -> dict[str, Any]:
    """One backfill's REST body."""
    return next(b for b in backfills(af, dag_id) if b["id"] == backfill_id)
