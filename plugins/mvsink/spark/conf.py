"""Spark settings of a write (no pyspark import): defaults, precedence, and keeping secrets off argv."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

from mvsink.definitions.view import ViewDefinition
from mvsink.exceptions import MvSinkError

# Settings every write needs: Delta-compatible timestamps, UTC, no UI, no Hadoop side files.
DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.hadoop.parquet.summary.metadata.level": "NONE",
}


# Only for local[...] masters: a cluster's executors must reach the driver on a routable address.
LOCAL_MASTER_CONF: dict[str, str] = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}


SECRET_HINTS = (
    "password",
    "secret",
    "token",
    "credential",
    "access.key",
    "key.id",
    "account.key",
    "private.key",
    ".key",
)


def spark_conf_for(
    view: ViewDefinition, extra: Mapping[str, str] | None = None, *, master: str | None = None
) -> dict[str, str]:
    """Spark settings of a write: defaults < the store settings of its locations < the view's spark_conf <
    ``extra``."""
    local = LOCAL_MASTER_CONF if master is not None and master.startswith("local") else {}
    return {**DEFAULT_SPARK_CONF, **local, **storage_conf(view), **view.spark_conf, **(extra or {})}


def storage_conf(view: ViewDefinition) -> dict[str, str]:
    """``spark.hadoop.*`` settings for the view's target and path sources on object storage (no secrets:
    credentials by reference to the environment; see :func:`mvsink.core.storage.spark_hadoop_conf`)."""
    from mvsink.core import storage

    storage.register_view(view)
    out: dict[str, str] = {}
    for location in (view.target, *(s.path for s in view.sources if s.path)):
        if storage.is_uri(location):
            out.update(storage.spark_hadoop_conf(location))
    return out


def is_secret_key(key: str) -> bool:
    """True for a Spark setting whose value must never be logged or put on a command line."""
    low = key.lower()
    return any(h in low for h in SECRET_HINTS)


def split_secret_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, secret)`` settings: secret ones go to a private properties file, not onto argv."""
    public = {k: v for k, v in conf.items() if not is_secret_key(k)}
    return public, {k: v for k, v in conf.items() if is_secret_key(k)}


def _escape_property(text: str, *, key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        for ch in "=: #!":
            out = out.replace(ch, "\\" + ch)
    return out


def write_properties_file(conf: Mapping[str, str], folder: str | None = None) -> str:
    """Write settings to a new Java properties file readable by this user only (0600); returns its path.

    Spark trims property values: a value with leading or trailing blanks cannot pass through a
    properties file and is refused.
    """
    for k, v in conf.items():
        if v != v.strip():
            raise MvSinkError(
                f"Spark setting {k}: its value has leading or trailing blanks, which Spark "
                "strips from a properties file. Fix: remove the blanks from the value."
            )
    fd, path = tempfile.mkstemp(prefix="mvsink-spark-", suffix=".properties", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for k, v in sorted(conf.items()):
            f.write(f"{_escape_property(k, key=True)}={_escape_property(v, key=False)}\n")
    return path


def redact(cmd: list[str]) -> list[str]:
    return [
        c.split("=", 1)[0] + "=***" if "=" in c and any(h in c.split("=", 1)[0].lower() for h in SECRET_HINTS) else c
        for c in cmd
    ]
