"""Issue 6, security: loopback listeners, API auth, path validation, typed run params, no secret in logs/XCom."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflowhelp import wait_run
from deltahelp import BASE, HOUR, write_at, write_view
from mvsink.airflow import tasks
from mvsink.airflow.params import run_params
from mvsink.core.batch import BatchDescription, SourceRead
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import load_view_file, parse_view
from mvsink.exceptions import MvSinkError, UnsafePathError, ViewDefinitionError
from mvsink.spark import conf as sparkconf
from mvsink.spark import runners as sparkrun
from test_oracle import PROJECT, _orders

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = ("127.0.0.1", "::1")


def _view_text(**fields: str | None) -> str:
    """YAML text of a small valid view with ``fields`` replaced (None drops a field)."""
    doc = {"name": "v", "query": "SELECT a FROM orders", "sources": "{orders: orders}", "target": "views/v",
           "as_of": "0", **fields}
    return "".join(f"{k}: {v}\n" for k, v in doc.items() if v is not None)


# --------------------------------------------------------------------------- view names and paths


@pytest.mark.unit
@pytest.mark.parametrize(("field", "value"), [
    ("target", "../outside"),
    ("target", "views/../../outside"),
    ("target", "/etc/mvsink_target"),
    ("target", "$HOME/../x"),
    ("sources", "{orders: ../../etc/orders}"),
    ("sources", "{orders: {path: /var/lib/orders}}"),
    ("sources", "{orders: views/../../../orders}"),
])
def test_paths_leaving_the_data_root_are_refused(tmp_path, monkeypatch, field, value):
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(UnsafePathError) as ei:
        parse_view(_view_text(**{field: value}), file=str(tmp_path / "views" / "v.yaml"), data_root=root)
    msg = str(ei.value)
    assert isinstance(ei.value, ViewDefinitionError) and isinstance(ei.value, ValueError)
    assert "view v" in msg and "v.yaml" in msg and "outside the data root" in msg and str(root) in msg, msg
    assert "Fix:" in msg and "MVSINK_ALLOW_OUTSIDE_DATA_ROOT=1" in msg, msg


@pytest.mark.unit
def test_symlink_out_of_the_data_root_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    root, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "link").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="outside the data root"):
        parse_view(_view_text(target="link/v"), file=str(tmp_path / "v.yaml"), data_root=root)


@pytest.mark.unit
def test_paths_inside_the_data_root_and_the_documented_option(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    root = tmp_path / "data"
    v = parse_view(_view_text(target="views/../other/v", sources=f"{{orders: {root / 'orders'}}}"),
                   file=str(tmp_path / "v.yaml"), data_root=root)
    assert v.target == str(root.resolve() / "other" / "v") and v.sources[0].path == str(root.resolve() / "orders")
    # the option lifts the rule (an operator's choice: it is an environment setting, not a view-file field)
    monkeypatch.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", "1")
    v = parse_view(_view_text(target="/srv/lake/v"), file=str(tmp_path / "v.yaml"), data_root=root)
    assert v.target == "/srv/lake/v"
    monkeypatch.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", "0")
    with pytest.raises(UnsafePathError):
        parse_view(_view_text(target="/srv/lake/v"), file=str(tmp_path / "v.yaml"), data_root=root)


@pytest.mark.unit
def test_data_root_defaults_to_the_view_files_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MVSINK_DATA_ROOT", raising=False)
    monkeypatch.delenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", raising=False)
    views = tmp_path / "views"
    views.mkdir()
    (views / "v.yaml").write_text(_view_text(target="../v"))
    with pytest.raises(UnsafePathError, match=f"outside the data root {views}"):
        load_view_file(views / "v.yaml")


@pytest.mark.unit
def test_sql_file_must_stay_beside_the_view_file(tmp_path):
    (tmp_path / "secret.sql").write_text("SELECT 'TOP-SECRET-CONTENT' AS a FROM orders")
    views = tmp_path / "views"
    views.mkdir()
    for ref in ("../secret.sql", str(tmp_path / "secret.sql")):
        (views / "v.yaml").write_text(_view_text(query=None, sql_file=ref))
        with pytest.raises(UnsafePathError) as ei:
            load_view_file(views / "v.yaml", data_root=tmp_path)
        msg = str(ei.value)
        assert "sql_file" in msg and "outside the view file's folder" in msg and "Fix:" in msg, msg
        assert "TOP-SECRET-CONTENT" not in msg


@pytest.mark.unit
@pytest.mark.parametrize("name", ["../x", "a/b", "x;rm -rf /", "X", "", "v\n", "a b", "1v", "_v", "é"])
def test_hostile_view_names_are_refused(tmp_path, name):
    with pytest.raises(ViewDefinitionError, match="is not a valid view name"):
        parse_view(_view_text(name=json.dumps(name)), file=str(tmp_path / "v.yaml"), data_root=tmp_path)


@pytest.mark.unit
def test_catalog_lookup_of_a_hostile_name_finds_nothing(tmp_path):
    (tmp_path / "v.yaml").write_text(_view_text())
    for name in ("../v", "v/../v", "/etc/passwd", "v.yaml"):
        with pytest.raises(ViewDefinitionError, match="is not defined in"):
            Catalog(tmp_path).get(name)


# --------------------------------------------------------------------------- typed run params


def _ctx(params: dict, conf: dict | None = None) -> dict:
    run = SimpleNamespace(logical_date=dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC), run_after=None,
                          conf=conf or {}, run_id="manual__x")
    return {"params": params, "dag_run": run}


@pytest.mark.unit
@pytest.mark.parametrize(("params", "expected"), [
    ({}, (BASE + 2 * HOUR, False)),
    ({"refresh_time": "", "dry_run": False}, (BASE + 2 * HOUR, False)),
    ({"refresh_time": "2026-01-01T01:00:00Z", "dry_run": True}, (BASE + HOUR, True)),
    ({"refresh_time": " 1767229200000 ", "dry_run": "true"}, (BASE + HOUR, True)),
    ({"refresh_time": BASE + HOUR, "dry_run": "false"}, (BASE + HOUR, False)),
    ({"refresh_time": "2026-01-01T03:00:00+02:00", "dry_run": 0}, (BASE + HOUR, False)),
    ({"refresh_time": None, "dry_run": "No"}, (BASE + 2 * HOUR, False)),
])
def test_run_params_are_parsed_into_typed_values(params, expected):
    p = run_params(_ctx(params), view="v")
    assert (p.refresh_time, p.dry_run) == expected
    assert type(p.refresh_time) is int and type(p.dry_run) is bool


HOSTILE = ["1; rm -rf /", "' OR 1=1 --", "$(touch /tmp/mvsink_pwned)", "2026-01-01T00:00:00Z; DROP TABLE t",
           "`id`", "1767229200000 OR 1=1", "0x10", "1e3"]


@pytest.mark.unit
@pytest.mark.parametrize("value", [*HOSTILE, -5, "99999999999999999999", True, ["2026-01-01"], {"a": 1}, 1.5])
def test_junk_refresh_time_is_refused_clearly(value):
    with pytest.raises(MvSinkError) as ei:
        run_params(_ctx({"refresh_time": value}), view="v")
    msg = str(ei.value)
    assert msg.startswith("view v: run param refresh_time=") and "Fix: trigger the run with refresh_time as" in msg


@pytest.mark.unit
@pytest.mark.parametrize("value", ["yes please", "' OR 1=1", "truee", 2, -1, [], {"x": 1}, 0.5])
def test_junk_dry_run_is_refused_clearly(value):
    with pytest.raises(MvSinkError, match=r"view v: run param dry_run=.* is not true or false\. Fix:"):
        run_params(_ctx({"dry_run": value}), view="v")


@pytest.mark.unit
@pytest.mark.parametrize("value", ["1; rm -rf /", "-1", 10_000, "x"])
def test_junk_attempt_is_refused_clearly(value):
    with pytest.raises(MvSinkError, match="run param attempt="):
        run_params(_ctx({}, {"attempt": value}), view="v")


class _RecordingTI:
    def __init__(self) -> None:
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


@pytest.mark.unit
@pytest.mark.parametrize("value", HOSTILE)
def test_mint_step_refuses_hostile_params_before_minting(tmp_path, monkeypatch, value):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    (tmp_path / "v.yaml").write_text(_view_text())
    ti = _RecordingTI()
    with pytest.raises(MvSinkError, match="refresh_time"):
        tasks.mint_step("v", str(tmp_path), {**_ctx({"refresh_time": value}), "ti": ti})
    assert ti.pushed == {}  # no batch description: nothing reaches the write step's command line
    assert not (tmp_path / "views").exists()  # no table created


@pytest.mark.unit
def test_hostile_strings_stay_single_arguments_of_the_submit_command(monkeypatch):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "/opt/bin/spark-submit")
    monkeypatch.setenv("MVSINK_SPARK_JOB", "/jobs/mv_write.py")
    evil = "manual__'; rm -rf / #$(id)`id`"
    desc = BatchDescription(view="v", target="/d/v", lower=0, upper=1, refresh_time=0, table_version=-1,
                            sources=(SourceRead(name="o", kind="path", path="/d/o", version=0),), run_id=evil,
                            batch_id="b", definition="h")
    cmd = sparkrun.submit_command(view_file="/views/v.yaml", description=desc.to_json(), report_path="/r.json",
                                  master="local[2]", conf={"spark.driver.memory": "1g"})
    assert cmd[cmd.index("--description") + 1] == desc.to_json()  # one argv element, verbatim
    assert BatchDescription.from_json(cmd[cmd.index("--description") + 1]).run_id == evil
    assert not any(c in ("rm", "-rf", "/", "#") for c in cmd)
    # no shell ever parses it: the command runs as an argv list
    out = subprocess.run(["/bin/echo", *cmd[-4:]], capture_output=True, text=True, check=True).stdout
    assert evil.replace("'", "\\'") in out.replace("'", "\\'")


# --------------------------------------------------------------------------- secret settings


@pytest.mark.unit
def test_secret_settings_never_go_onto_a_command_line(monkeypatch, tmp_path):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "spark-submit")
    conf = {"spark.driver.memory": "2g", "spark.hadoop.fs.s3a.secret.key": "S3CR3T",
            "spark.hadoop.fs.s3a.session.token": "T0K3N", "spark.jdbc.password": "PW", "spark.x.access.key": "AK"}
    public, secret = sparkconf.split_secret_conf(conf)
    assert public == {"spark.driver.memory": "2g"} and set(secret) == set(conf) - {"spark.driver.memory"}
    with pytest.raises(MvSinkError, match="look secret and may not go onto a command line"):
        sparkrun.submit_command(view_file="v", description="{}", report_path="r", master="local[2]", conf=conf)
    props = sparkconf.write_properties_file({**secret, "spark.odd key=x": "a\\b=c\nd"}, str(tmp_path))
    cmd = sparkrun.submit_command(view_file="v", description="{}", report_path="r", master="local[2]", conf=public,
                                  properties_file=props)
    assert cmd[cmd.index("--properties-file") + 1] == props
    assert not any(v in " ".join(cmd) for v in secret.values())
    assert stat.S_IMODE(os.stat(props).st_mode) == 0o600
    lines = Path(props).read_text().splitlines()
    assert "spark.hadoop.fs.s3a.secret.key=S3CR3T" in lines and "spark.odd\\ key\\=x=a\\\\b=c\\nd" in lines
    with pytest.raises(MvSinkError, match="leading or trailing blanks"):
        sparkconf.write_properties_file({"spark.a.password": "pw "}, str(tmp_path))


@pytest.mark.unit
def test_connection_spark_conf_is_read_from_the_extra():
    pytest.importorskip("airflow.providers.apache.spark")
    from mvsink.airflow.operators import connection_spark_conf, write_conf

    assert connection_spark_conf({}, "c") == {}
    assert connection_spark_conf({"spark_conf": {"spark.a.token": 5}}, "c") == {"spark.a.token": "5"}
    assert connection_spark_conf({"spark_conf": '{"spark.b": "x"}'}, "c") == {"spark.b": "x"}
    with pytest.raises(MvSinkError, match="connection c: extra field spark_conf must be a JSON object"):
        connection_spark_conf({"spark_conf": ["x"]}, "c")
    view = parse_view(_view_text(spark_conf="{spark.a: view, spark.driver.memory: 1g}"), file="/d/v.yaml",
                      data_root=Path("/d"))
    conf = write_conf(view, {"spark.a": "conn", "spark.b": "conn", "spark.sql.shuffle.partitions": "3"})
    assert conf["spark.a"] == "view" and conf["spark.b"] == "conn" and conf["spark.sql.shuffle.partitions"] == "3"


PROBE_JOB = '''\
import hashlib, json, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
keys = {keys!r}
seen = {{k: hashlib.sha256(spark.conf.get(k, "").encode()).hexdigest() for k in keys}}
open({out!r}, "w").write(json.dumps(seen))
from mvsink.spark.job import main
sys.exit(main())
'''


def _grep(root: Path, needles: dict[str, str]) -> list[str]:
    hits = []
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            hits += [f"{name} in {f}" for name, s in needles.items() if s.encode() in data]
    return hits


@pytest.mark.airflow
@pytest.mark.slow
def test_secrets_reach_spark_but_no_log_xcom_or_metadata(tmp_path):
    from airflowhelp import AirflowHome

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
    write_at(str(data / "orders"), _orders(random.Random(3), 0, 20), BASE)
    write_view(home.views, "sec", query=PROJECT, sources={"orders": "orders"}, target="views/sec", as_of=BASE,
               spark_conf={"spark.hadoop.fs.s3a.secret.key": s[0], "spark.mvsink.probe.token": s[1],
                           "spark.driver.memory": "1g"})
    home.env["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({
        "conn_type": "spark", "host": "local[2]", "password": s[4],
        "extra": {"spark_conf": {"spark.hadoop.fs.s3a.session.token": s[2], "spark.mvsink.db.password": s[3]}}})
    probe_out = tmp_path / "probe.json"
    keys = ["spark.hadoop.fs.s3a.secret.key", "spark.mvsink.probe.token", "spark.hadoop.fs.s3a.session.token",
            "spark.mvsink.db.password"]
    job = tmp_path / "probe_job.py"
    job.write_text(PROBE_JOB.format(keys=keys, out=str(probe_out)))
    home.env["MVSINK_SPARK_JOB"] = str(job)
    home.migrate()
    home.run("dags", "reserialize")
    outputs = []
    for conf in ({"dry_run": True}, {"dry_run": False}):
        proc = home.run("dags", "test", "mv_sec", "2026-01-01T01:00:00+00:00", "-c",
                        json.dumps({"refresh_time": "", **conf}))
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
    assert _grep(home.home / "logs", named) == []  # task log files
    db = sqlite3.connect(home.home / "airflow.db")
    xcoms = db.execute("SELECT dag_id, task_id, key, value FROM xcom").fetchall()
    assert {(x[1], x[2]) for x in xcoms} >= {("mint", "description"), ("append", "summary"), ("append", "report")}
    assert not [x for x in xcoms if any(v in str(x[3]) for v in s)], "secret in an XCom value"
    rendered = db.execute("SELECT rendered_fields FROM rendered_task_instance_fields").fetchall()
    assert rendered and not [r for r in rendered if any(v in str(r[0]) for v in s)], "secret in rendered fields"
    db.close()
    assert _grep(home.home, named) == []  # nowhere in AIRFLOW_HOME: metadata DB (serialized DAG), logs
    left = [p for p in Path(tempfile.gettempdir()).glob("mvsink-spark-*.properties") if any(v in p.read_text() for v in s)]
    assert left == [], "a properties file with secrets was left behind"


# --------------------------------------------------------------------------- listeners and API (a running Airflow)


def _hex_ip(text: str) -> str:
    import ipaddress

    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    addr = ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return str(addr.ipv4_mapped or addr)  # a JVM listens on IPv4-mapped IPv6 addresses


def listening_sockets(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, command, ip, port) of every TCP socket in LISTEN state owned by ``pids``, from /proc (no ss)."""
    out = []
    for pid in pids:
        try:
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            for table in ("tcp", "tcp6"):
                for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                        ip, port = cols[1].rsplit(":", 1)
                        out.append((pid, cmd, _hex_ip(ip), int(port, 16)))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # the process ended meanwhile
    return out


def _tree(root_pid: int) -> set[int]:
    import psutil

    try:
        p = psutil.Process(root_pid)
        return {root_pid, *(c.pid for c in p.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, spark):
    """Local Airflow (4 components), a Spark Connect server and the local Spark session, all running."""
    from mvsink.devtools.localairflow import LocalAirflow, free_port
    from mvsink.spark.connect import start_server

    root = tmp_path_factory.mktemp("sec_cluster")
    data, dags = root / "data", root / "dags"
    (dags / "views").mkdir(parents=True)
    data.mkdir()
    shutil.copy(REPO / "dags" / "mvsink_views.py", dags / "mvsink_views.py")
    write_at(str(data / "orders"), _orders(random.Random(7), 0, 20), BASE)
    write_view(dags / "views", "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    saved = os.environ.pop("SPARK_LOCAL_IP", None)  # the project must bind loopback by itself
    try:
        af = LocalAirflow(root / "home", dags, data_root=data, extra_env={"MVSINK_REPORTS_DIR": str(root / "reports")})
        af.env.pop("SPARK_LOCAL_IP", None)
        port = free_port()
        server = start_server(port=port, log_path=root / "connect.log")
    finally:
        if saved is not None:
            os.environ["SPARK_LOCAL_IP"] = saved
    try:
        af.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, body = af.api("GET", "/api/v2/dags", token=af.token())
            if status == 200 and "mv_proj" in {d["dag_id"] for d in body["dags"]}:
                break
            time.sleep(2)
        else:
            raise AssertionError(f"DAG not parsed: {body}")
        yield SimpleNamespace(af=af, data=data, server=server, connect_port=port, spark=spark)
    finally:
        af.stop()
        os.killpg(server.pid, subprocess.signal.SIGTERM)
        server.wait(timeout=60)




def _task_states(af, dag_id, run_id):
    status, body = af.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", token=af.token())
    assert status == 200, body
    return {t["task_id"]: t["state"] for t in body["task_instances"]}


@pytest.mark.airflow
@pytest.mark.slow
def test_every_listener_is_on_loopback(cluster):
    """Airflow's components, the Connect server, the local Spark session and a refresh's spark-submit JVM."""
    af = cluster.af
    assert cluster.spark.range(3).count() == 3  # the local session is live
    me = os.getpid()
    seen: dict[tuple[int, str, int], str] = {}

    def sample() -> None:
        for pid, cmd, ip, port in listening_sockets(_tree(me)):
            seen[(pid, ip, port)] = cmd

    status, body = af.api("POST", "/api/v2/dags/mv_proj/dagRuns",
                          {"logical_date": None, "conf": {"refresh_time": str(BASE + HOUR)}}, token=af.token())
    assert status in (200, 201), body
    run = wait_run(af, "mv_proj", body["dag_run_id"], poll=0.5, on_poll=sample)
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
        ours = _tree(me)
        wild = [ln for ln in ss.splitlines() if any(f"pid={p}," in ln for p in ours)
                and not any(a in ln for a in (" 127.0.0.1:", " [::1]:", " [::ffff:127.0.0.1]:"))]
        assert not wild, wild


@pytest.mark.airflow
@pytest.mark.slow
def test_api_refuses_unauthenticated_and_forged_calls(cluster):
    import jwt

    af = cluster.af
    forged = jwt.encode({"sub": "admin", "role": "ADMIN", "exp": int(time.time()) + 600, "iat": int(time.time())},
                        "not-the-server-secret-" * 4, algorithm="HS512")
    expired_like = jwt.encode({"sub": "admin", "exp": 1}, "x" * 32, algorithm="HS256")
    calls = [("GET", "/api/v2/dags"), ("GET", "/api/v2/dags/mv_proj/dagRuns"),
             ("POST", "/api/v2/dags/mv_proj/dagRuns"), ("GET", "/api/v2/connections"),
             ("GET", "/api/v2/variables"), ("GET", "/api/v2/config")]
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
    status, body = af.api("GET", "/api/v2/dags/mv_proj/dagRuns", token=af.token())
    assert status == 200
    assert not [r for r in body["dag_runs"] if (r.get("conf") or {}).get("refresh_time") == "1"]


@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.parametrize("conf", [
    {"refresh_time": "1; touch /tmp/mvsink_pwned_{tag}"},
    {"refresh_time": "' OR 1=1 --"},
    {"refresh_time": "2026-01-01T01:00:00Z", "dry_run": "yes; touch /tmp/mvsink_pwned_{tag}"},
])
def test_hostile_run_params_fail_at_mint_and_write_nothing(cluster, conf):
    af = cluster.af
    tag = hashlib.sha1(os.urandom(6)).hexdigest()[:8]
    conf = {k: v.format(tag=tag) for k, v in conf.items()}
    target = cluster.data / "views" / "proj"
    before = sorted(p.name for p in (target / "_delta_log").glob("*.json")) if target.exists() else []
    status, body = af.api("POST", "/api/v2/dags/mv_proj/dagRuns", {"logical_date": None, "conf": conf},
                          token=af.token())
    if status == 400:  # Airflow's own param validation refused it (dry_run is a boolean param)
        assert "dry_run" in json.dumps(body), body
    else:
        assert status in (200, 201), body
        run = wait_run(af, "mv_proj", body["dag_run_id"], poll=0.5)
        assert run["state"] == "failed", run
        states = _task_states(af, "mv_proj", body["dag_run_id"])
        assert states["mint"] == "failed" and states["write"] in ("upstream_failed", None), states
        log_status, log = af.api(
            "GET", f"/api/v2/dags/mv_proj/dagRuns/{body['dag_run_id']}/taskInstances/mint/logs/1?full_content=true",
            token=af.token())
        text = json.dumps(log)
        assert "view proj: run param" in text and "Fix: trigger the run with" in text, text[-2000:]
    assert not Path(f"/tmp/mvsink_pwned_{tag}").exists()
    after = sorted(p.name for p in (target / "_delta_log").glob("*.json")) if target.exists() else []
    assert after == before  # the table was not touched


@pytest.mark.slow
def test_cli_refresh_passes_secret_settings_to_spark_off_the_command_line(env, tmp_path):
    """``mvsink refresh --spark-conf`` with a secret: Spark gets it, argv and output never show it."""
    import sys

    data, views = env
    write_at(str(data / "orders"), _orders(random.Random(8), 0, 15), BASE)
    secret = f"CLI-T0KEN-{hashlib.sha1(os.urandom(8)).hexdigest()[:10]}"
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    probe_out = tmp_path / "probe.json"
    job = tmp_path / "probe_job.py"
    job.write_text(PROBE_JOB.format(keys=["spark.mvsink.api.token"], out=str(probe_out)))
    env_vars = {**os.environ, "MVSINK_SPARK_JOB": str(job), "MVSINK_DATA_ROOT": str(data)}
    proc = subprocess.Popen([sys.executable, "-m", "mvsink", "refresh", "proj", "--at", str(BASE + HOUR),
                             "--views-dir", str(views), "--spark-conf", f"spark.mvsink.api.token={secret}", "--json"],
                            env=env_vars, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    argvs = []
    while proc.poll() is None:  # every command line of the refresh's process tree, while it runs
        for pid in _tree(proc.pid) - {proc.pid}:
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
