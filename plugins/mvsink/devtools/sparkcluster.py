"""A Spark standalone cluster on 127.0.0.1 from the pyspark wheel (``make cluster``; also a test fixture).

Starts a master and N workers as subprocesses of the wheel's ``bin/spark-class`` (the wheel has
no ``start-master.sh``), with free ports, and everything they write (work dirs, logs, pid files,
the Spark configuration) inside one folder. RPC, the web UIs and the executors listen on
127.0.0.1 only.

Authentication: the cluster is started with ``spark.authenticate=true`` and a generated secret,
written (mode 0600) into ``<folder>/conf/spark-defaults.conf``. Clients that run with
``SPARK_CONF_DIR=<folder>/conf`` (spark-submit, an in-process pyspark, a Spark Connect server,
Airflow's SparkSubmitOperator) read it from there: the secret never appears on a command line.
A driver without it is refused by the master.

    python -m mvsink.devtools.sparkcluster [--dir DIR] [--workers 2] [--cores 1] [--memory 2g]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from mvsink import settings
from mvsink.devtools.foreground import run_until_stopped, stop_on_signals
from mvsink.exceptions import MvSinkError
from mvsink.spark.submit import pyspark_script

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


class ClusterError(MvSinkError):
    """The cluster did not start (or a daemon died): the message carries the log tail."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def spark_class_binary() -> str:
    """``bin/spark-class`` of this interpreter's pyspark (beside ``sys.executable``, else pyspark's own)."""
    found = pyspark_script("spark-class")
    if found:
        return found
    raise ClusterError("spark-class not found. Fix: install pyspark in this environment.")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class SparkCluster:
    """A standalone master and ``workers`` workers bound to 127.0.0.1; state in ``folder``.

    ``start()`` returns once the master's ``/json/`` lists every worker ALIVE; ``stop()`` ends
    the daemons' process groups (their executors included).
    """

    folder: Path
    _: KW_ONLY
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    authenticate: bool = True
    master_port: int = 0
    ui_port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    worker_ui_ports: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.folder = Path(self.folder).resolve()
        self.master_port = self.master_port or free_port()
        self.ui_port = self.ui_port or free_port()
        self.worker_ui_ports = self.worker_ui_ports or [free_port() for _ in range(self.workers)]

    @property
    def url(self) -> str:
        """The master URL drivers connect to: ``spark://127.0.0.1:PORT``."""
        return f"spark://{HOST}:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    @property
    def conf_dir(self) -> Path:
        """``SPARK_CONF_DIR`` for the daemons and every client (holds ``spark-defaults.conf``)."""
        return self.folder / "conf"

    @property
    def log_dir(self) -> Path:
        return self.folder / "logs"

    def work_dir(self, index: int) -> Path:
        return self.folder / f"worker-{index}"

    def client_env(self) -> dict[str, str]:
        """Environment variables a client needs beside the master URL (the shared Spark configuration)."""
        return {"SPARK_CONF_DIR": str(self.conf_dir), "SPARK_LOCAL_IP": HOST}

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.conf_dir, 0o700)
        lines = ["spark.master.rest.enabled false"]
        if self.authenticate:
            lines += ["spark.authenticate true", f"spark.authenticate.secret {secrets.token_hex(32)}"]
        path = self.conf_dir / "spark-defaults.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def _env(self) -> dict[str, str]:
        env = settings.process_env()
        env.pop("SPARK_HOME", None)
        env.update(
            {
                "SPARK_LOCAL_IP": HOST,
                "SPARK_CONF_DIR": str(self.conf_dir),
                "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_PID_DIR": str(self.folder / "pids"),
                "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
            }
        )
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (self.folder / "pids").mkdir(parents=True, exist_ok=True)
        out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives with the daemon
        self.procs[name] = subprocess.Popen(
            [spark_class_binary(), *args],
            env=self._env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def start(self, *, timeout: float = 120) -> SparkCluster:
        """Start the master and the workers; wait until every worker is ALIVE on the master."""
        for what, port in (("master", self.master_port), ("master web UI", self.ui_port)):
            if _listening(port):
                raise ClusterError(
                    f"port {port} on {HOST} (the {what}) is already in use. Fix: stop that process or pick "
                    "another port (--master-port / --ui-port; make cluster CLUSTER_PORT=… CLUSTER_UI_PORT=…)."
                )
        self.folder.mkdir(parents=True, exist_ok=True)
        self._write_conf()
        self._spawn(
            "master",
            [MASTER_CLASS, "--host", HOST, "--port", str(self.master_port), "--webui-port", str(self.ui_port)],
        )
        for i in range(self.workers):
            self.work_dir(i).mkdir(parents=True, exist_ok=True)
            self._spawn(
                f"worker-{i}",
                [
                    WORKER_CLASS,
                    "--host",
                    HOST,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(self.work_dir(i)),
                    "--webui-port",
                    str(self.worker_ui_ports[i]),
                    self.url,
                ],
            )
        try:
            self.wait_ready(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict[str, Any] | None:
        """The master's ``/json/`` (workers, active and completed applications), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as r:
                return dict(json.loads(r.read()))
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            return None

    def alive_workers(self) -> list[dict[str, Any]]:
        st = self.state() or {}
        return [w for w in st.get("workers", []) if w.get("state") == "ALIVE"]

    def wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise ClusterError(
                        f"Spark {name} exited ({p.returncode}); last lines of {self.log_dir / (name + '.log')}:\n"
                        + _tail(self.log_dir / f"{name}.log")
                    )
            if len(self.alive_workers()) >= self.workers:
                return
            time.sleep(0.5)
        tails = "\n".join(f"--- {n}.log\n{_tail(self.log_dir / f'{n}.log', 15)}" for n in self.procs)
        raise ClusterError(
            f"the Spark cluster at {self.url} did not show {self.workers} ALIVE worker(s) within {timeout:.0f}s.\n"
            + tails
        )

    def stop(self, *, timeout: float = 30) -> None:
        """Stop the daemons (workers first; each process group, so executors go too)."""
        order = [n for n in self.procs if n != "master"] + (["master"] if "master" in self.procs else [])
        for name in order:
            p = self.procs[name]
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for name in order:
            p = self.procs[name]
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self.procs.clear()

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mvsink.devtools.sparkcluster", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="folder for conf, logs, pids and work dirs (default: a temporary one)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    ap.add_argument("--memory", default="2g", help="memory per worker")
    ap.add_argument("--master-port", type=int, default=7077)
    ap.add_argument("--ui-port", type=int, default=8090)
    ap.add_argument("--no-auth", action="store_true", help="no spark.authenticate (any local user can submit)")
    args = ap.parse_args(argv)
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mvsink-spark-cluster-"))
    cluster = SparkCluster(
        folder,
        workers=args.workers,
        cores=args.cores,
        memory=args.memory,
        authenticate=not args.no_auth,
        master_port=args.master_port,
        ui_port=args.ui_port,
    )
    stopping = stop_on_signals()
    print(f"starting a Spark master and {args.workers} worker(s) in {cluster.folder} ...", flush=True)
    cluster.start()
    print(
        f"Spark cluster is up: master {cluster.url}  web UI {cluster.ui_url}  (Ctrl-C stops it)\n"
        f"clients need: export SPARK_CONF_DIR={cluster.conf_dir}\n"
        f"e.g.: SPARK_CONF_DIR={cluster.conf_dir} mvsink refresh VIEW --at TIME --master {cluster.url}",
        flush=True,
    )
    return run_until_stopped(
        stopping, lambda: all(p.poll() is None for p in cluster.procs.values()), cluster.stop, what="the Spark cluster"
    )


if __name__ == "__main__":
    sys.exit(main())
