"""A throw-away Airflow installation for tests: its own AIRFLOW_HOME, SQLite DB and DAGs folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


class AirflowHome:
    def __init__(self, root: Path, data_root: Path):
        self.root = root
        self.home = root / "airflow"
        self.dags = root / "dags"
        self.views = self.dags / "views"
        self.data = data_root
        self.views.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "dags" / "mvsink_views.py", self.dags / "mvsink_views.py")
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "MVSINK_DATA_ROOT": str(data_root),
            "MVSINK_REPORTS_DIR": str(root / "reports"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.env.pop("SPARK_HOME", None)
        self.env.pop("MVSINK_FAIL_POINTS", None)

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None,
            timeout: int = 600) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(BIN / "airflow"), *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        return proc

    def migrate(self) -> None:
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
