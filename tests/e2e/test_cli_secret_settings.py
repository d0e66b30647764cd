"""`mvsink refresh --spark-conf` with a secret: Spark gets it, no command line and no output shows it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.probes import PROBE_JOB, process_tree
from tests.support.viewfiles import write_view


@pytest.mark.slow
def test_cli_refresh_passes_secret_settings_to_spark_off_the_command_line(env, tmp_path):
    """``mvsink refresh --spark-conf`` with a secret: Spark gets it, argv and output never show it."""

    data, views = env
    write_at(str(data / "orders"), make_orders(random.Random(8), 0, 15), BASE)
    secret = f"CLI-T0KEN-{hashlib.sha1(os.urandom(8)).hexdigest()[:10]}"
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    probe_out = tmp_path / "probe.json"
    job = tmp_path / "probe_job.py"
    job.write_text(PROBE_JOB.format(keys=["spark.mvsink.api.token"], out=str(probe_out)))
    env_vars = {**os.environ, "MVSINK_SPARK_JOB": str(job), "MVSINK_DATA_ROOT": str(data)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mvsink",
            "refresh",
            "proj",
            "--at",
            str(BASE + HOUR),
            "--views-dir",
            str(views),
            "--spark-conf",
            f"spark.mvsink.api.token={secret}",
            "--json",
        ],
        env=env_vars,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    argvs = []
    while proc.poll() is None:  # every command line of the refresh's process tree, while it runs
        for pid in process_tree(proc.pid) - {proc.pid}:
            try:
                argvs.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                pass
        time.sleep(0.2)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out)["status"] == "appended"
    assert any("--properties-file" in a for a in argvs), argvs  # the spark-submit was seen
    assert not [a for a in argvs if secret in a]
    assert secret not in out and secret not in err
    assert json.loads(probe_out.read_text()) == {"spark.mvsink.api.token": hashlib.sha256(secret.encode()).hexdigest()}
