"""Which Spark the write task uses, decided from its Airflow connection when the task runs.

The write task's connection (``MVSINK_SPARK_CONN_ID``, default ``spark_default``) is looked up
when the task runs, never when the DAG file is parsed, so the DAG's shape is the same either way:

- a connection of the apache-spark provider's ``spark_connect`` type: the write runs from the
  task's process through that Spark Connect server (no JVM start for the refresh);
- any other connection (``spark``: a master URL such as ``local[2]``, ``spark://host:7077``,
  ``yarn``), or none: the write runs through ``spark-submit``.

A ``spark_connect`` connection follows the provider's ``SparkConnectHook`` conventions: host
(``127.0.0.1`` or ``sc://127.0.0.1``), port (default 15002), login = user id, password = token,
extra ``{"use_ssl": true}``. As in the provider, the URL has no path. The token is a secret:
it is masked in task logs and shown as ``***`` in every message. pyspark sends a token only
over TLS (``use_ssl``) or to a server named ``localhost``.

This module imports no Airflow: the operator passes the connection's fields in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlparse

from mvsink.exceptions import MvSinkError
from mvsink.spark.connect import DEFAULT_PORT, redact_url

#: The apache-spark provider's connection type for Spark Connect (``SparkConnectHook.conn_type``).
SPARK_CONNECT_CONN_TYPE = "spark_connect"


@dataclasses.dataclass(frozen=True)
class ConnectTarget:
    """A Spark Connect server named by an Airflow connection."""

    conn_id: str
    url: str  # may carry the token: log ``shown`` instead
    host: str
    port: int

    @property
    def shown(self) -> str:
        """The URL with the token hidden."""
        return redact_url(self.url)

    def unavailable_fix(self) -> str:
        """The fix a probe failure names: start the server, or check the connection."""
        return (
            f"start the Spark Connect server at {self.host}:{self.port} (`mvsink connect-server`; `make airflow` "
            f"starts one), or check Airflow connection {self.conn_id!r} (type spark_connect: host and port of a "
            "running server). The task's retry writes through it once it answers"
        )


def uses_spark_connect(conn_type: str | None) -> bool:
    """Does a connection of this type make the write task use Spark Connect (else spark-submit)?"""
    return (conn_type or "").strip().lower() == SPARK_CONNECT_CONN_TYPE


def connect_target(
    *,
    conn_id: str,
    host: str | None,
    port: int | None,
    login: str | None = None,
    password: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ConnectTarget:
    """The ``sc://`` URL of a ``spark_connect`` connection, built as the provider's hook builds it (pure).

    Raises :class:`MvSinkError` (the task fails without retries) for a connection that names no server.
    """
    text = (host or "").strip()
    if not text:
        raise MvSinkError(
            f"Airflow connection {conn_id!r} (type spark_connect) has no host. Fix: set its host to the Spark "
            f"Connect server's name or address (e.g. 127.0.0.1) and its port (e.g. {DEFAULT_PORT})."
        )
    if "://" not in text:
        text = f"sc://{text}"
    if port:
        text = f"{text}:{port}"
    parsed = urlparse(text)
    try:
        url_port = parsed.port
    except ValueError:
        url_port = -1
    if parsed.scheme != "sc" or not parsed.hostname or url_port == -1 or parsed.path not in ("", "/"):
        raise MvSinkError(
            f"Airflow connection {conn_id!r} (type spark_connect): host {host!r} and port {port!r} do not make a "
            f"Spark Connect address. Fix: set host to a name or address only (e.g. 127.0.0.1 or "
            f"sc://127.0.0.1, no path) and port to a number (e.g. {DEFAULT_PORT})."
        )
    params = []
    if login:
        params.append(f"user_id={quote(login)}")
    if password:
        params.append(f"token={quote(password)}")
    use_ssl = (extra or {}).get("use_ssl")
    if use_ssl is not None:
        on = str(use_ssl).strip().lower() in ("1", "true", "yes", "on")
        params.append(f"use_ssl={'true' if on else 'false'}")
    url = f"sc://{parsed.netloc}/" + (";" + ";".join(params) if params else "")
    return ConnectTarget(conn_id=conn_id, url=url, host=parsed.hostname, port=url_port or DEFAULT_PORT)
