"""A long-lived Spark Connect server, so a refresh does not pay for a JVM start.

    mvsink connect-server [--port 15002] [--master local[2]]     # runs until Ctrl-C
    mvsink refresh VIEW --at TIME --remote sc://127.0.0.1:15002  # writes through it

The server binds to 127.0.0.1. Paths are resolved on the server, so it must see the same
files as the client (same machine, or the same shared volume).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import subprocess
import time
import urllib.parse
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mvsink.exceptions import MvSinkError, SparkConnectUnavailableError
from mvsink.spark import jars
from mvsink.spark.conf import DEFAULT_SPARK_CONF, master_conf
from mvsink.spark.jars import DELTA_SESSION_CONF, require_delta
from mvsink.spark.submit import spark_submit_binary, submit_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002
# Session-level settings a Connect client may set (static ones are fixed at server start).
SESSION_CONF_PREFIXES = ("spark.sql.", "spark.databricks.delta.")
#: The server setting that registers Connect relation plugins (static).
PLUGIN_CONF = "spark.connect.extensions.relation.classes"


def server_command(
    *,
    port: int = DEFAULT_PORT,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    bind: str = "127.0.0.1",
) -> list[str]:
    """spark-submit command line that starts a Spark Connect server on bind:port (pure but for
    ``SPARK_LOCAL_IP``, the driver's address on a cluster master: see :func:`~mvsink.spark.conf.master_conf`).

    ``bind`` is loopback unless told otherwise: the server has no authentication of its own,
    so bind another address only inside a private network (the compose file's).
    """
    from mvsink.spark.conf import driver_conf, session_conf

    settings = {
        **DEFAULT_SPARK_CONF,
        **master_conf(master),
        **session_conf(master=master),
        "spark.connect.grpc.binding.address": bind,
        "spark.connect.grpc.binding.port": str(port),
        **(conf or {}),
    }
    plugin = jars.connect_plugin_jar()
    if plugin is not None:  # the analysed plans of its clients' queries (spark_jobs/connect; spark/connectplan.py)
        path = settings.get("spark.driver.extraClassPath")
        settings["spark.driver.extraClassPath"] = f"{path}:{plugin}" if path else str(plugin)
        classes = [c for c in settings.get(PLUGIN_CONF, "").split(",") if c]
        settings[PLUGIN_CONF] = ",".join([*classes, jars.CONNECT_PLUGIN_CLASS])
    cmd = [spark_submit_binary(), "--master", master, "--name", "mvsink-connect", "--class", SERVER_CLASS]
    for k, v in sorted(driver_conf(settings).items()):
        cmd += ["--conf", f"{k}={v}"]
    return cmd + ["spark-internal"]


def listening(port: int, host: str = "127.0.0.1", *, timeout: float = 0.5) -> bool:
    """Does something accept TCP connections at host:port (within ``timeout`` seconds)?"""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:  # refused, timed out, unknown host, no route
        return False


def address(url: str) -> tuple[str, int]:
    """(host, port) of a Spark Connect URL ``sc://host[:port][/;params]`` (port 15002 if not given)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise MvSinkError(f"{redact_url(url)!r} is not a Spark Connect URL. Fix: write sc://HOST[:PORT].")
    try:
        port = parsed.port
    except ValueError:
        raise MvSinkError(f"{redact_url(url)!r} has a bad port. Fix: write sc://HOST[:PORT].") from None
    return parsed.hostname, port or DEFAULT_PORT


_SECRET_PARAM = re.compile(r"(?i)(;|/)(token=)[^;]*")


def redact_url(url: str) -> str:
    """The URL with its ``token`` parameter hidden (for messages and logs)."""
    return _SECRET_PARAM.sub(r"\1\2***", url)


DEFAULT_FIX = "start one with `mvsink connect-server`, or drop --remote to use spark-submit"


def probe(url: str, *, timeout: float = 3.0, fix: str = DEFAULT_FIX) -> None:
    """Fail at once (:class:`SparkConnectUnavailableError`) when nothing accepts connections at the URL's address.

    A Spark Connect client would otherwise retry its first call for over 10 minutes.
    """
    host, port = address(url)
    if not listening(port, host, timeout=timeout):
        raise SparkConnectUnavailableError(
            f"no Spark Connect server at {redact_url(url)} (nothing accepts connections on {host}:{port} "
            f"within {timeout:g}s). Fix: {fix}."
        )


def start_server(
    *,
    port: int = DEFAULT_PORT,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    timeout: float = 90,
    bind: str = "127.0.0.1",
) -> subprocess.Popen[bytes]:
    """Start the server in the background and wait until it accepts connections."""
    host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind
    if listening(port, host):
        raise MvSinkError(f"port {port} on {host} is already in use. Fix: stop that process or pick --port.")
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - lives with the server
    proc = subprocess.Popen(
        server_command(port=port, master=master, conf=conf, bind=bind),
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
        if listening(port, host):
            return proc
        time.sleep(0.5)
    proc.kill()
    raise MvSinkError(f"the Spark Connect server did not listen on {host}:{port} within {timeout:.0f}s.")


#: Retries of a Connect client's calls: a few within about 3 s (pyspark's default retries over 10 minutes).
CLIENT_MAX_RETRIES = 3
CLIENT_MAX_BACKOFF_MS = 1000


def remote_session(
    url: str,
    *,
    conf: Mapping[str, str] | None = None,
    probe_timeout: float = 3.0,
    fix: str = DEFAULT_FIX,
    new: bool = False,
) -> SparkSession:
    """A Spark Connect session that fails fast if the server is down (default: retries 10+ minutes).

    The server's address is probed first (:func:`probe`; ``fix`` ends its message), and the
    client's retry policy is cut to a few tries within seconds before its first call. ``new``: a new session
    (it becomes the process's default), not one an earlier call made (:func:`released_session`).
    """
    from pyspark.sql import SparkSession

    probe(url, timeout=probe_timeout, fix=fix)
    builder = SparkSession.builder.remote(url)
    spark = builder.create() if new else builder.getOrCreate()
    return _prepared(spark, url, conf)


def _prepared(spark: SparkSession, url: str, conf: Mapping[str, str] | None) -> SparkSession:
    """``spark`` with the fast-failing retry policy, Delta checked on the server, and ``conf``'s session settings."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies([DefaultPolicy(max_retries=CLIENT_MAX_RETRIES, max_backoff=CLIENT_MAX_BACKOFF_MS)])
    require_delta(spark, role=f"Spark Connect server {redact_url(url)}")
    for k, v in {**DEFAULT_SPARK_CONF, **(conf or {})}.items():
        if k.startswith(SESSION_CONF_PREFIXES) and k not in DELTA_SESSION_CONF:
            spark.conf.set(k, v)
    return spark


_RELEASED_AT_END: weakref.WeakSet[SparkSession] = weakref.WeakSet()


@contextlib.contextmanager
def released_session(
    url: str, *, conf: Mapping[str, str] | None = None, fix: str = DEFAULT_FIX
) -> Iterator[SparkSession]:
    """A new Spark Connect session for one write step (:func:`remote_session`), released on the server when the
    step ends: its temp views (the sources, a recompute's restricted reads) and cached relations go with it, where
    a session left open holds them until the server's session timeout. What the step registers need not be
    dropped one by one (:func:`released_at_end`)."""
    spark = remote_session(url, conf=conf, fix=fix, new=True)
    _RELEASED_AT_END.add(spark)
    try:
        yield spark
    finally:
        spark.stop()


def released_at_end(spark: SparkSession) -> bool:
    """Is ``spark`` a :func:`released_session`, whose temp views go when it ends?"""
    try:
        return spark in _RELEASED_AT_END
    except TypeError:  # (a session that cannot be weakly referenced is not one)
        return False
