"""A throw-away Airflow installation for tests: its own AIRFLOW_HOME, SQLite DB and DAGs folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mvsink.devtools.localairflow import LocalAirflow

REPO = Path(__file__).resolve().parents[1]


class AirflowHome(LocalAirflow):
    """LocalAirflow's environment without starting servers (DagBag, `airflow dags test`)."""

    def __init__(self, root: Path, data_root: Path):
        self.views = root / "dags" / "views"
        self.views.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "dags" / "mvsink_views.py", root / "dags" / "mvsink_views.py")
        super().__init__(root / "airflow", root / "dags", data_root=data_root,
                         extra_env={"MVSINK_REPORTS_DIR": str(root / "reports")})
        self.data = data_root
        self.env.pop("MVSINK_FAIL_POINTS", None)

    def migrate(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.run("db", "migrate")

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                              timeout=300)

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
            "print('DAGBAG ' + json.dumps({'dags': sorted(b.dags), 'errors': b.import_errors, 'info': info}))\n")
        line = next((x for x in proc.stdout.splitlines() if x.startswith("DAGBAG ")), None)
        assert line, proc.stderr[-3000:]
        return json.loads(line[len("DAGBAG "):])


def trigger_run(af: LocalAirflow, dag_id: str, conf: dict[str, Any]) -> str:
    """Trigger a run over the REST API; its run id."""
    status, body = af.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf},
                          token=af.token())
    assert status in (200, 201), body
    return str(body["dag_run_id"])


def wait_run(af: LocalAirflow, dag_id: str, run_id: str, *, timeout: float = 300, poll: float = 2,
             on_poll: Callable[[], None] | None = None) -> dict[str, Any]:
    """Poll a run until it succeeds or fails; its REST body."""
    deadline = time.monotonic() + timeout
    body: Any = None
    while time.monotonic() < deadline:
        if on_poll:
            on_poll()
        status, body = af.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token=af.token())
        if status == 200 and body["state"] in ("success", "failed"):
            return dict(body)
        time.sleep(poll)
    raise AssertionError(f"{dag_id} run {run_id} did not finish: {body}")
