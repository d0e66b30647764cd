"""A local Airflow on 127.0.0.1 for the project's DAGs (``make airflow``; also used by tests).

Runs the Airflow 3 components separately (api-server, scheduler, dag-processor, triggerer)
rather than ``airflow standalone``, whose log servers bind every interface. The api-server
uses Airflow's simple auth manager: the ``admin`` password is generated into
``$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated``.

With ``spark="connect"`` (the default of ``make airflow``) it also starts a Spark Connect
server on 127.0.0.1 (``--connect-port``, default 15002) next to Airflow, defines the connection
``spark_connect_default`` (type ``spark_connect``) pointing to it, and makes it the write task's
connection (``MVSINK_SPARK_CONN_ID``), so refreshes pay no JVM start; it stops the server on
exit. Given ``--connect-url sc://HOST:PORT`` (``connect_url=``) instead, the connection points at that
running server and none is started or stopped here. With ``spark="submit"`` the write task
spark-submits through ``spark_default`` (``local[2]``), which is defined either way.

    python -m mvsink.devtools.localairflow [--home DIR] [--port 8080] [--dags DIR] [--data-root DIR]
                                           [--spark connect|submit] [--connect-port 15002 | --connect-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Literal

from mvsink import settings
from mvsink.devtools.foreground import run_until_stopped, stop_on_signals
from mvsink.spark.connect import DEFAULT_PORT, address, listening, start_server

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
SCHEDULER_IDLE_SLEEP_TIME = "0.2"  # seconds (Airflow's default: 1)
SparkPath = Literal["connect", "submit"]
#: The connection ``spark="connect"`` defines (the apache-spark provider's default Spark Connect connection id).
CONNECT_CONN_ID = "spark_connect_default"
#: SQLite connection arguments of every component (``[database] sql_alchemy_connect_args`` names this
#: dict): wait up to 60 s for a lock instead of sqlite3's default 5 s, so a busy scheduler does not make
#: a CLI command or an API call fail with "database is locked".
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 60}


def repo_plugins_folder() -> Path | None:
    """The repository's ``plugins/`` folder when mvsink runs from it (it holds the UI plugin's shim), else None.

    Then Airflow's plugins folder is pointed there; a pip-installed mvsink registers its UI plugin
    through the ``airflow.plugins`` entry point instead.
    """
    import mvsink

    folder = Path(mvsink.__file__).resolve().parent.parent
    return folder if (folder / "mvsink_airflow_plugin.py").is_file() else None


#: The secrets Airflow generates into a new ``airflow.cfg`` (``[core] fernet_key``, ``[api] secret_key``,
#: ``[api_auth] jwt_secret``): made afresh for each copied home.
_GENERATED_SECRETS = re.compile(r"^(fernet_key|secret_key|jwt_secret) = .*$", re.MULTILINE)


def copy_migrated_home(migrated: Path, home: Path) -> None:
    """Make ``home`` a copy of the migrated installation ``migrated``: its SQLite database, and its ``airflow.cfg``
    with ``migrated``'s paths turned into ``home``'s and new secrets.

    The configuration is written before any component starts, as ``airflow db migrate`` would: components that
    start together in a home without one would each write their own, with different JWT secrets.
    """
    import base64

    shutil.copyfile(migrated / "airflow.db", home / "airflow.db")

    def secret(m: re.Match[str]) -> str:
        raw = os.urandom(32 if m.group(1) == "fernet_key" else 16)
        encode = base64.urlsafe_b64encode if m.group(1) == "fernet_key" else base64.b64encode
        return f"{m.group(1)} = {encode(raw).decode()}"

    cfg = (migrated / "airflow.cfg").read_text().replace(str(migrated), str(home))
    path = home / "airflow.cfg"
    path.touch(mode=0o600)
    path.write_text(_GENERATED_SECRETS.sub(secret, cfg))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalAirflow:
    """Airflow home, environment and component processes bound to loopback."""

    def __init__(
        self,
        home: Path,
        dags: Path,
        *,
        port: int | None = None,
        data_root: Path | None = None,
        extra_env: dict[str, str] | None = None,
        spark: SparkPath = "submit",
        connect_port: int | None = None,
        connect_conf: dict[str, str] | None = None,
        connect_url: str | None = None,
        migrated_home: Path | None = None,
    ):
        self.home, self.dags = Path(home).resolve(), Path(dags).resolve()
        #: A home where ``airflow db migrate`` ran with this Airflow version (SQLite): :meth:`migrate` copies its
        #: database and configuration into a new home instead of migrating again (about 8 s; tests start many).
        self.migrated_home = Path(migrated_home).resolve() if migrated_home is not None else None
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.spark = spark
        self.connect_host, self.connect_port = "127.0.0.1", connect_port or DEFAULT_PORT
        #: A Spark Connect server that runs already (``connect_url``): used, never started or stopped here.
        self.external_connect = connect_url is not None
        if connect_url is not None:
            if spark != "connect":
                raise ValueError("connect_url is for spark='connect'")
            self.connect_host, self.connect_port = address(connect_url)
        self.connect_conf = dict(connect_conf or {})  # static settings of the Connect server (e.g. driver memory)
        self.connect_server: subprocess.Popen[bytes] | None = None
        bin_dir = str(Path(sys.executable).parent)
        inherited = settings.process_env()
        self.env = {
            **inherited,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            # an idle scheduler's loop sleeps this long: each step of a run (the run's start, then each task after
            # the one before) waits for the next loop, so Airflow's default (1 s) adds ~0.5 s a step to a refresh
            # (docs/airflow.md)
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": SCHEDULER_IDLE_SLEEP_TIME,
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": f"{bin_dir}{os.pathsep}{inherited.get('PATH', '')}",
        }
        self.env.pop("SPARK_HOME", None)
        plugins = repo_plugins_folder()
        if plugins is not None:  # the UI plugin (plugins/mvsink_airflow_plugin.py); else its entry point
            self.env.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(plugins))
        if data_root is not None:
            self.env[settings.DATA_ROOT.name] = str(Path(data_root).resolve())
        if spark == "connect":
            self.env[f"AIRFLOW_CONN_{CONNECT_CONN_ID.upper()}"] = json.dumps(
                {"conn_type": "spark_connect", "host": self.connect_host, "port": self.connect_port}
            )
            self.env[settings.SPARK_CONN_ID.name] = CONNECT_CONN_ID
        self.env.update(extra_env or {})
        if self.env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "sqlite").startswith("sqlite"):
            self.env.setdefault(
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS", "mvsink.devtools.localairflow.SQLITE_CONNECT_ARGS"
            )
        self.airflow = str(Path(sys.executable).parent / "airflow")

    def run(self, *args: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.airflow, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return proc

    def start(self, components: tuple[str, ...] = COMPONENTS) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        try:
            if self.spark == "connect" and not self.external_connect:
                self.start_connect_server()
            self.migrate()
            for c in components:
                self.start_component(c)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    def migrate(self) -> None:
        """The home's metadata database, migrated: ``airflow db migrate``, or a copy of ``migrated_home``'s when
        this home is new and uses the default SQLite file (:func:`copy_migrated_home`)."""
        self.home.mkdir(parents=True, exist_ok=True)
        fresh = not (self.home / "airflow.db").exists() and not (self.home / "airflow.cfg").exists()
        if self.migrated_home is not None and fresh and "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in self.env:
            copy_migrated_home(self.migrated_home, self.home)
            return
        self.run("db", "migrate")

    def start_connect_server(self) -> subprocess.Popen[bytes]:
        """The Spark Connect server of ``spark="connect"`` on 127.0.0.1 (log in component-logs/spark-connect.log)."""
        if listening(self.connect_port):
            raise RuntimeError(
                f"port {self.connect_port} on 127.0.0.1 is already in use, so the Spark Connect server cannot "
                "start there. Fix: stop that process, or pick another port (make airflow CONNECT_PORT=...)."
            )
        logs = self.home / "component-logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.connect_server = start_server(
            port=self.connect_port, conf=self.connect_conf, log_path=logs / "spark-connect.log"
        )
        return self.connect_server

    @property
    def connect_url(self) -> str | None:
        return f"sc://{self.connect_host}:{self.connect_port}" if self.spark == "connect" else None

    def start_component(self, c: str) -> subprocess.Popen[bytes]:
        """Start one component (in a session of its own); also to restart one that died."""
        logs = self.home / "component-logs"
        logs.mkdir(parents=True, exist_ok=True)
        args = [c]
        if c in ("scheduler", "triggerer"):
            args.append("--skip-serve-logs")
        if c == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.port)]
        out = open(logs / f"{c}.log", "ab")  # noqa: SIM115 - closed with the process
        self.procs[c] = subprocess.Popen(
            [self.airflow, *args], env=self.env, stdout=out, stderr=out, start_new_session=True
        )
        return self.procs[c]

    def wait_healthy(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"airflow {c} exited ({p.returncode}); see {self.home}/component-logs/{c}.log")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as r:
                    health = json.loads(r.read())
                if all(health.get(k, {}).get("status") == "healthy" for k in ("metadatabase", "scheduler")):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            time.sleep(1)
        raise RuntimeError(f"Airflow at {self.url} not healthy after {timeout}s")

    def password(self, user: str = "admin") -> str:
        data = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
        return str(data[user])

    def token(self, user: str = "admin") -> str:
        body = json.dumps({"username": user, "password": self.password(user)}).encode()
        req = urllib.request.Request(
            f"{self.url}/auth/token", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return str(json.loads(r.read())["access_token"])

    def api(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, timeout: float = 60
    ) -> tuple[int, Any]:
        """Call the REST API; returns (status, parsed JSON or text).

        An idempotent call (GET, PUT, PATCH, DELETE) that times out is sent once more: the API server on SQLite can
        stall on a lock the scheduler holds. A POST is sent once.
        """
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        attempts = 1 if method.upper() == "POST" else 2
        for attempt in range(1, attempts + 1):
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    raw, status = r.read(), r.status
                break
            except urllib.error.HTTPError as e:
                raw, status = e.read(), e.code
                break
            except TimeoutError:
                if attempt == attempts:
                    raise
        try:
            return status, json.loads(raw)
        except json.JSONDecodeError:
            return status, raw.decode(errors="replace")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in self.procs.values():
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        self.procs.clear()
        self.stop_connect_server()

    def stop_connect_server(self) -> None:
        server, self.connect_server = self.connect_server, None
        if server is None:
            return
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    repo = Path.cwd()  # defaults relative to where it is run (the Makefile passes every path)
    ap = argparse.ArgumentParser(prog="python -m mvsink.devtools.localairflow", description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=settings.process_env().get("AIRFLOW_HOME", str(repo / ".airflow")))
    ap.add_argument("--dags", default=str(repo / "dags"))
    ap.add_argument("--data-root", default=str(settings.data_root() or repo / "data"))
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument(
        "--spark",
        choices=("connect", "submit"),
        default="connect",
        help="how the write tasks run Spark: through a Spark Connect server started here (default), or spark-submit",
    )
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--connect-port", type=int, default=DEFAULT_PORT, help="port of that server on 127.0.0.1")
    where.add_argument(
        "--connect-url", help="use this running Spark Connect server (sc://HOST:PORT) instead of starting one"
    )
    args = ap.parse_args(argv)
    af = LocalAirflow(
        Path(args.home),
        Path(args.dags),
        port=args.port,
        data_root=Path(args.data_root),
        spark=args.spark,
        connect_port=args.connect_port,
        connect_url=args.connect_url,
    )
    stopping = stop_on_signals()
    print(f"starting Airflow in {af.home} (DAGs {af.dags}, data {af.env.get(settings.DATA_ROOT.name)}) ...", flush=True)
    af.start()
    if af.connect_url:
        log = "started elsewhere" if af.external_connect else f"log {af.home}/component-logs/spark-connect.log"
        print(
            f"Spark Connect server: {af.connect_url} (connection {CONNECT_CONN_ID}: the write tasks use it; {log})",
            flush=True,
        )
    else:
        print("the write tasks spark-submit through connection spark_default (local[2])", flush=True)
    print(f"Airflow is up: {af.url}  login: admin / {af.password()}  (Ctrl-C stops it)", flush=True)
    return run_until_stopped(
        stopping,
        lambda: (
            all(p.poll() is None for p in af.procs.values())
            and (af.connect_server is None or af.connect_server.poll() is None)
        ),
        af.stop,
        what="Airflow",
    )


if __name__ == "__main__":
    sys.exit(main())
