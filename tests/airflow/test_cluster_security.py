"""Issue 6, security of a running installation: every listener on loopback, the API refuses unauthenticated and
forged calls, hostile run params fail at mint and write nothing."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mvsink.devtools.localairflow import LocalAirflow, free_port
from mvsink.spark.connect import start_server
from tests.support.airflow import (
    dags_folder,
    migrated_home,
    post_run,
    runs,
    task_log,
    task_states,
    trigger_run,
    wait_dags,
    wait_run,
)
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, write_at
from tests.support.probes import listening_sockets, process_tree
from tests.support.viewfiles import write_view

LOOPBACK = ("127.0.0.1", "::1")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, spark):
    """Local Airflow (4 components), a Spark Connect server and the local Spark session, all running."""
    root = tmp_path_factory.mktemp("sec_cluster")
    data, dags = dags_folder(root)
    write_at(str(data / "orders"), make_orders(random.Random(7), 0, 20), BASE)
    write_view(dags / "views", "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    saved = os.environ.pop("SPARK_LOCAL_IP", None)  # the project must bind loopback by itself
    try:
        af = LocalAirflow(
            root / "home",
            dags,
            data_root=data,
            extra_env={"MVSINK_REPORTS_DIR": str(root / "reports")},
            migrated_home=migrated_home(),
        )
        af.env.pop("SPARK_LOCAL_IP", None)
        port = free_port()
        server = start_server(port=port, log_path=root / "connect.log")
    finally:
        if saved is not None:
            os.environ["SPARK_LOCAL_IP"] = saved
    try:
        af.start()
        wait_dags(af, {"mv_proj"})
        yield SimpleNamespace(af=af, data=data, server=server, connect_port=port, spark=spark)
    finally:
        af.stop()
        os.killpg(server.pid, subprocess.signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.airflow
@pytest.mark.slow
def test_every_listener_is_on_loopback(cluster):
    """Airflow's components, the Connect server, the local Spark session and a refresh's spark-submit JVM."""
    af = cluster.af
    assert cluster.spark.range(3).count() == 3  # the local session is live
    me = os.getpid()
    seen: dict[tuple[int, str, int], str] = {}

    def sample() -> None:
        for pid, cmd, ip, port in listening_sockets(process_tree(me)):
            seen[(pid, ip, port)] = cmd

    run_id = trigger_run(af, "mv_proj", {"refresh_time": str(BASE + HOUR)})
    run = wait_run(af, "mv_proj", run_id, poll=0.5, on_poll=sample)
    sample()
    assert run["state"] == "success", run
    report = "\n".join(f"{ip}:{port} pid {pid} {cmd[:110]}" for (pid, ip, port), cmd in sorted(seen.items()))
    print("listening sockets seen:\n" + report)
    ports = {port for (_, _, port) in seen}
    assert af.port in ports and cluster.connect_port in ports, report  # the sampling saw the servers
    assert any("mv_write.py" in cmd for cmd in seen.values()), report  # ... and the refresh's Spark job
    bad = {k: v for k, v in seen.items() if k[1] not in LOOPBACK}
    assert not bad, "listening beyond loopback:\n" + "\n".join(f"{k}: {v}" for k, v in bad.items())
    if shutil.which("ss"):  # cross-check with ss where it is installed: nothing of ours on a wildcard address
        ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
        ours = process_tree(me)
        wild = [
            ln
            for ln in ss.splitlines()
            if any(f"pid={p}," in ln for p in ours)
            and not any(a in ln for a in (" 127.0.0.1:", " [::1]:", " [::ffff:127.0.0.1]:"))
        ]
        assert not wild, wild


@pytest.mark.airflow
@pytest.mark.slow
def test_api_refuses_unauthenticated_and_forged_calls(cluster):
    import jwt

    af = cluster.af
    forged = jwt.encode(
        {"sub": "admin", "role": "ADMIN", "exp": int(time.time()) + 600, "iat": int(time.time())},
        "not-the-server-secret-" * 4,
        algorithm="HS512",
    )
    expired_like = jwt.encode({"sub": "admin", "exp": 1}, "x" * 32, algorithm="HS256")
    calls = [
        ("GET", "/api/v2/dags"),
        ("GET", "/api/v2/dags/mv_proj/dagRuns"),
        ("POST", "/api/v2/dags/mv_proj/dagRuns"),
        ("GET", "/api/v2/connections"),
        ("GET", "/api/v2/variables"),
        ("GET", "/api/v2/config"),
    ]
    for token in (None, "not-a-token", forged, expired_like):
        for method, path in calls:
            body = {"logical_date": None, "conf": {"refresh_time": "1"}} if method == "POST" else None
            status, _ = af.api(method, path, body, token=token)
            assert status in (401, 403), (method, path, token and token[:12], status)
    # Basic auth with the real admin password is not an API credential either
    import base64
    import urllib.error
    import urllib.request

    basic = base64.b64encode(f"admin:{af.password()}".encode()).decode()
    req = urllib.request.Request(f"{af.url}/api/v2/dags", headers={"Authorization": f"Basic {basic}"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=30)
    assert ei.value.code in (401, 403)
    # the execution API (used by task workers) refuses calls without a task token
    status, _ = af.api("GET", "/execution/variables/anything")
    assert status in (401, 403), status
    # none of the refused triggers created a run; a valid token works
    assert not [r for r in runs(af, "mv_proj") if (r.get("conf") or {}).get("refresh_time") == "1"]


@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize(
    "conf",
    [
        {"refresh_time": "1; touch /tmp/mvsink_pwned_{tag}"},
        {"refresh_time": "' OR 1=1 --"},
        {"refresh_time": "2026-01-01T01:00:00Z", "dry_run": "yes; touch /tmp/mvsink_pwned_{tag}"},
    ],
)
def test_hostile_run_params_fail_at_mint_and_write_nothing(cluster, conf):
    af = cluster.af
    tag = hashlib.sha1(os.urandom(6)).hexdigest()[:8]
    conf = {k: v.format(tag=tag) for k, v in conf.items()}
    target = cluster.data / "views" / "proj"
    before = sorted(p.name for p in (target / "_delta_log").glob("*.json")) if target.exists() else []
    status, body = post_run(af, "mv_proj", conf)
    if status == 400:  # Airflow's own param validation refused it (dry_run is a boolean param)
        assert "dry_run" in json.dumps(body), body
    else:
        assert status in (200, 201), body
        run = wait_run(af, "mv_proj", body["dag_run_id"], poll=0.5)
        assert run["state"] == "failed", run
        states = task_states(af, "mv_proj", body["dag_run_id"])
        assert states["mint"] == "failed" and states["write"] in ("upstream_failed", None), states
        text = json.dumps(task_log(af, "mv_proj", body["dag_run_id"], "mint"))
        assert "view proj: run param" in text and "Fix: trigger the run with" in text, text[-2000:]
    assert not Path(f"/tmp/mvsink_pwned_{tag}").exists()
    after = sorted(p.name for p in (target / "_delta_log").glob("*.json")) if target.exists() else []
    assert after == before  # the table was not touched
