"""``make airflow``'s installation: with ``spark="connect"`` the write tasks' connection is a spark_connect one
pointing at the server it starts on loopback; with ``spark="submit"`` nothing changes from before."""

from __future__ import annotations

import json
import socket

import pytest

from mvsink.airflow.connections import connect_target, uses_spark_connect
from mvsink.devtools.localairflow import CONNECT_CONN_ID, LocalAirflow, free_port

pytestmark = pytest.mark.unit


def test_submit_keeps_the_plain_spark_connection(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_SPARK_CONN_ID", raising=False)
    af = LocalAirflow(tmp_path / "home", tmp_path / "dags", spark="submit")
    assert json.loads(af.env["AIRFLOW_CONN_SPARK_DEFAULT"]) == {"conn_type": "spark", "host": "local[2]"}
    assert "MVSINK_SPARK_CONN_ID" not in af.env and "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT" not in af.env
    assert af.connect_url is None


def test_connect_points_the_write_tasks_at_the_loopback_server(tmp_path):
    af = LocalAirflow(tmp_path / "home", tmp_path / "dags", spark="connect", connect_port=15123)
    conn = json.loads(af.env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
    assert uses_spark_connect(conn["conn_type"]) and af.env["MVSINK_SPARK_CONN_ID"] == CONNECT_CONN_ID
    target = connect_target(conn_id=CONNECT_CONN_ID, host=conn["host"], port=conn["port"])
    assert target.url == "sc://127.0.0.1:15123/" and af.connect_url == "sc://127.0.0.1:15123"
    assert json.loads(af.env["AIRFLOW_CONN_SPARK_DEFAULT"])["conn_type"] == "spark"  # spark-submit stays possible


def test_a_busy_connect_port_is_refused_before_anything_starts(tmp_path):
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        af = LocalAirflow(tmp_path / "home", tmp_path / "dags", spark="connect", connect_port=port)
        with pytest.raises(RuntimeError, match=f"port {port} .* in use.*CONNECT_PORT"):
            af.start()
    assert af.connect_server is None and af.procs == {}


def test_a_running_connect_server_is_used_and_never_started_or_stopped(tmp_path):
    af = LocalAirflow(tmp_path / "home", tmp_path / "dags", spark="connect", connect_url="sc://localhost:15999")
    conn = json.loads(af.env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
    assert (conn["host"], conn["port"]) == ("localhost", 15999) and af.env["MVSINK_SPARK_CONN_ID"] == CONNECT_CONN_ID
    assert af.external_connect and af.connect_url == "sc://localhost:15999"
    af.stop()  # nothing started: nothing to stop, and no server of its own
    assert af.connect_server is None
    with pytest.raises(ValueError, match="connect_url is for spark='connect'"):
        LocalAirflow(tmp_path / "home", tmp_path / "dags", spark="submit", connect_url="sc://localhost:15999")


def test_a_copied_home_has_its_own_paths_and_secrets(tmp_path):
    """``copy_migrated_home``: the database byte for byte; the configuration with the new home's paths and new
    secrets (a valid Fernet key), readable by its owner only; the migrated home is left as it was."""
    import base64
    import stat

    from mvsink.devtools.localairflow import copy_migrated_home

    migrated, home = tmp_path / "migrated", tmp_path / "home"
    migrated.mkdir()
    home.mkdir()
    (migrated / "airflow.db").write_bytes(b"SQLite format 3\0rows")
    cfg = (
        f"[core]\ndags_folder = {migrated}/dags\nfernet_key = OLDFERNET=\n[database]\n"
        f"sql_alchemy_conn = sqlite:///{migrated}/airflow.db\n[api]\nsecret_key = OLDSECRET==\n"
        "[api_auth]\njwt_secret = OLDJWT==\n[aws]\naws_secret_key = kept\n"
    )
    (migrated / "airflow.cfg").write_text(cfg)
    copy_migrated_home(migrated, home)
    assert (home / "airflow.db").read_bytes() == b"SQLite format 3\0rows"
    new = (home / "airflow.cfg").read_text()
    assert str(migrated) not in new
    assert f"dags_folder = {home}/dags" in new and f"sql_alchemy_conn = sqlite:///{home}/airflow.db" in new
    values = dict(line.split(" = ", 1) for line in new.splitlines() if " = " in line)
    assert {values["fernet_key"], values["secret_key"], values["jwt_secret"]}.isdisjoint(
        {"OLDFERNET=", "OLDSECRET==", "OLDJWT=="}
    )
    assert len(base64.urlsafe_b64decode(values["fernet_key"])) == 32
    assert values["aws_secret_key"] == "kept"
    assert stat.S_IMODE((home / "airflow.cfg").stat().st_mode) == 0o600
    assert (migrated / "airflow.cfg").read_text() == cfg
