"""A long-lived Spark Connect server, so a refresh does not pay for a JVM start.

    mvsink connect-server [--port 15002] [--master local[2]]     # runs until Ctrl-C
    mvsink refresh VIEW --at TIME --remote sc://127.0.0.1:15002  # writes through it

The server binds to 127.0.0.1. Paths are resolved on the server, so it must see the same
files as the client (same machine, or the same shared volume).
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mvsink.exceptions import MvSinkError
from mvsink.spark.conf import DEFAULT_SPARK_CONF, master_conf
from mvsink.spark.submit import spark_submit_binary, submit_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002
# Session-level settings a Connect client may set (static ones are fixed at server start).
SESSION_CONF_PREFIXES = ("spark.sql.",)


def server_command(
    *, port: int = DEFAULT_PORT, master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> list[str]:
    """spark-submit command line that starts a Spark Connect server on 127.0.0.1:port (pure but for
    ``SPARK_LOCAL_IP``, the driver's address on a cluster master: see :func:`~mvsink.spark.conf.master_conf`)."""
    settings = {
        **DEFAULT_SPARK_CONF,
        **master_conf(master),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        **(conf or {}),
    }
    cmd = [spark_submit_binary(), "--master", master, "--name", "mvsink-connect", "--class", SERVER_CLASS]
    for k, v in sorted(settings.items()):
        cmd += ["--conf", f"{k}={v}"]
    return cmd + ["spark-internal"]


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def start_server(
    *,
    port: int = DEFAULT_PORT,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    timeout: float = 90,
) -> subprocess.Popen[bytes]:
    """Start the server in the background and wait until it accepts connections."""
    if listening(port):
        raise MvSinkError(f"port {port} on 127.0.0.1 is already in use. Fix: stop that process or pick --port.")
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - lives with the server
    proc = subprocess.Popen(
        server_command(port=port, master=master, conf=conf),
        env=submit_env(),
        stdout=out,
        stderr=out,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise MvSinkError(
                f"the Spark Connect server exited ({proc.returncode})" + (f"; see {log_path}" if log_path else "") + "."
            )
        if listening(port):
            return proc
        time.sleep(0.5)
    proc.kill()
    raise MvSinkError(f"the Spark Connect server did not listen on 127.0.0.1:{port} within {timeout:.0f}s.")


def remote_session(url: str, *, conf: Mapping[str, str] | None = None) -> SparkSession:
    """A Spark Connect session that fails fast if the server is down (default: retries 10+ minutes)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    host_port = url.removeprefix("sc://").split("/")[0]
    host, _, port = host_port.partition(":")
    if not listening(int(port or DEFAULT_PORT), host or "127.0.0.1"):
        raise MvSinkError(
            f"no Spark Connect server at {url}. Fix: start one with `mvsink connect-server`, "
            "or drop --remote to use spark-submit."
        )
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=1000)])
    for k, v in {**DEFAULT_SPARK_CONF, **(conf or {})}.items():
        if k.startswith(SESSION_CONF_PREFIXES):
            spark.conf.set(k, v)
    return spark
