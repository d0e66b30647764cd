"""Issue 6, security: secret Spark settings (of the view and of the connection) reach Spark, but no log, XCom,
rendered field or metadata row holds them (`airflow dags test`)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import tempfile
from pathlib import Path

import pytest

from tests.support.airflow import AirflowHome
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, write_at
from tests.support.probes import PROBE_JOB, grep_files
from tests.support.viewfiles import write_view


@pytest.mark.airflow
@pytest.mark.slow
def test_secrets_reach_spark_but_no_log_xcom_or_metadata(tmp_path):
    tag = hashlib.sha1(os.urandom(8)).hexdigest()[:10]
    secrets = {
        "view spark.hadoop.fs.s3a.secret.key": f"VIEW-S3CRET-{tag}",
        "view spark.mvsink.probe.token": f"VIEW-T0KEN-{tag}",
        "connection spark.hadoop.fs.s3a.session.token": f"CONN-T0KEN-{tag}",
        "connection spark.mvsink.db.password": f"CONN-DBPASS-{tag}",
        "connection password": f"CONN-PASSW0RD-{tag}",
    }
    s = list(secrets.values())
    data = tmp_path / "data"
    data.mkdir()
    home = AirflowHome(tmp_path, data)
    write_at(str(data / "orders"), make_orders(random.Random(3), 0, 20), BASE)
    write_view(
        home.views,
        "sec",
        query=PROJECT,
        sources={"orders": "orders"},
        target="views/sec",
        as_of=BASE,
        spark_conf={
            "spark.hadoop.fs.s3a.secret.key": s[0],
            "spark.mvsink.probe.token": s[1],
            "spark.driver.memory": "1g",
        },
    )
    home.env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
        {
            "conn_type": "spark",
            "host": "local[2]",
            "password": s[4],
            "extra": {"spark_conf": {"spark.hadoop.fs.s3a.session.token": s[2], "spark.mvsink.db.password": s[3]}},
        }
    )
    probe_out = tmp_path / "probe.json"
    keys = [
        "spark.hadoop.fs.s3a.secret.key",
        "spark.mvsink.probe.token",
        "spark.hadoop.fs.s3a.session.token",
        "spark.mvsink.db.password",
    ]
    job = tmp_path / "probe_job.py"
    job.write_text(PROBE_JOB.format(keys=keys, out=str(probe_out)))
    home.env["MVSINK_SPARK_JOB"] = str(job)
    home.migrate()
    home.run("dags", "reserialize")
    outputs = []
    for conf in ({"dry_run": True}, {"dry_run": False}):
        proc = home.run(
            "dags", "test", "mv_sec", "2026-01-01T01:00:00+00:00", "-c", json.dumps({"refresh_time": "", **conf})
        )
        outputs.append(proc.stdout + proc.stderr)
    assert "dry run [" in outputs[0] and "appended [" in outputs[1], outputs[1][-3000:]
    cmd_lines = [ln for out in outputs for ln in out.splitlines() if "Spark-Submit cmd" in ln]
    assert len(cmd_lines) == 2 and all("--properties-file" in ln for ln in cmd_lines), cmd_lines
    assert all("spark.driver.memory=1g" in ln for ln in cmd_lines)  # public settings are still shown
    # the settings did reach Spark (compared by hash: the probe never writes a secret)
    seen = json.loads(probe_out.read_text())
    assert seen == {k: hashlib.sha256(v.encode()).hexdigest() for k, v in zip(keys, s[:4])}
    named = dict(zip(secrets, s))
    for i, out in enumerate(outputs):
        assert not [n for n, v in named.items() if v in out], f"secret in `airflow dags test` output #{i}"
    assert grep_files(home.home / "logs", named) == []  # task log files
    db = sqlite3.connect(home.home / "airflow.db")
    xcoms = db.execute("SELECT dag_id, task_id, key, value FROM xcom").fetchall()
    assert {(x[1], x[2]) for x in xcoms} >= {("mint", "description"), ("append", "summary"), ("append", "report")}
    assert not [x for x in xcoms if any(v in str(x[3]) for v in s)], "secret in an XCom value"
    rendered = db.execute("SELECT rendered_fields FROM rendered_task_instance_fields").fetchall()
    assert rendered and not [r for r in rendered if any(v in str(r[0]) for v in s)], "secret in rendered fields"
    db.close()
    assert grep_files(home.home, named) == []  # nowhere in AIRFLOW_HOME: metadata DB (serialized DAG), logs
    left = [
        p for p in Path(tempfile.gettempdir()).glob("mvsink-spark-*.properties") if any(v in p.read_text() for v in s)
    ]
    assert left == [], "a properties file with secrets was left behind"
