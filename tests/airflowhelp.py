"""A throw-away Airflow installation for tests: its own AIRFLOW_HOME, SQLite DB and DAGs folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from mvsink.localairflow import LocalAirflow

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
