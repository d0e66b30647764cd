"""Running the write step: through spark-submit (as the DAG does) or in this process."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mvsink import exceptions as errors
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.definitions.view import ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Runner = Literal["submit", "inprocess", "connect"]

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
SECRET_HINTS = ("password", "secret", "token", "credential", "access.key", "key.id", "account.key", "private.key",
                ".key")

JOB_SCRIPT = "mv_write.py"  # the entry script, shipped in this package (mvsink/spark/mv_write.py)


def spark_conf_for(view: ViewDefinition, extra: Mapping[str, str] | None = None, *,
                   master: str | None = None) -> dict[str, str]:
    """Spark settings of a write: defaults < the view's spark_conf < ``extra``."""
    local = LOCAL_MASTER_CONF if master is not None and master.startswith("local") else {}
    return {**DEFAULT_SPARK_CONF, **local, **view.spark_conf, **(extra or {})}


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
            raise errors.MvSinkError(f"Spark setting {k}: its value has leading or trailing blanks, which Spark "
                                     "strips from a properties file. Fix: remove the blanks from the value.")
    fd, path = tempfile.mkstemp(prefix="mvsink-spark-", suffix=".properties", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for k, v in sorted(conf.items()):
            f.write(f"{_escape_property(k, key=True)}={_escape_property(v, key=False)}\n")
    return path


def job_file() -> str:
    """Path of the write job's entry script: ``MVSINK_SPARK_JOB``, else the one shipped in the package."""
    env = os.environ.get("MVSINK_SPARK_JOB")
    if env:
        return env
    from importlib.resources import files

    return str(files("mvsink.spark").joinpath(JOB_SCRIPT))


def spark_submit_binary() -> str:
    local = Path(sys.executable).parent / "spark-submit"
    if local.exists():
        return str(local)
    found = shutil.which("spark-submit")
    if not found:
        raise errors.MvSinkError("spark-submit not found. Fix: install pyspark in this environment.")
    return found


def submit_command(*, view_file: str, description: str, report_path: str, master: str,
                   conf: Mapping[str, str], properties_file: str | None = None) -> list[str]:
    """The spark-submit command line of one write step (pure; tested).

    An argv list run without a shell: every value is one argument, nothing is interpolated.
    Secret-looking settings never go onto it (other users can read a command line): pass them
    in ``properties_file`` (see :func:`write_properties_file`).
    """
    leaked = sorted(k for k in conf if is_secret_key(k))
    if leaked:
        raise errors.MvSinkError(f"Spark setting(s) {leaked} look secret and may not go onto a command line. "
                                 "Fix: pass them through a properties file (sparkrun.write_properties_file).")
    cmd = [spark_submit_binary(), "--master", master, "--name", "mvsink-write"]
    if properties_file:
        cmd += ["--properties-file", properties_file]
    for k, v in sorted(conf.items()):
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [job_file(), "--view-file", view_file, "--description", description, "--report", report_path]


def submit_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SPARK_HOME", None)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = env.get("PYSPARK_PYTHON", sys.executable)
    env["PYSPARK_DRIVER_PYTHON"] = env.get("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def redact(cmd: list[str]) -> list[str]:
    return [c.split("=", 1)[0] + "=***" if "=" in c and any(h in c.split("=", 1)[0].lower() for h in SECRET_HINTS)
            else c for c in cmd]


def run_write_submit(view: ViewDefinition, desc: BatchDescription, *, master: str = "local[2]",
                     conf: Mapping[str, str] | None = None) -> WriteReport:
    """Run the write step through spark-submit and return its report (errors re-raised as ours)."""
    with tempfile.TemporaryDirectory(prefix="mvsink-") as tmp:
        report_path = Path(tmp) / "report.json"
        desc_path = Path(tmp) / "description.json"
        desc_path.write_text(desc.to_json())
        public, secret = split_secret_conf(spark_conf_for(view, conf, master=master))
        props = write_properties_file(secret, tmp) if secret else None
        cmd = submit_command(view_file=view.file, description=f"@{desc_path}", report_path=str(report_path),
                             master=master, conf=public, properties_file=props)
        log.info("view %s: spark-submit %s", view.name, " ".join(redact(cmd[1:])))
        proc = subprocess.run(cmd, env=submit_env(), capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            if line.startswith("MVSINK_ERROR "):
                err = json.loads(line[len("MVSINK_ERROR "):])
                cls = getattr(errors, err["type"], errors.MvSinkError)
                raise cls(err["message"])
        if proc.returncode != 0 or not report_path.exists():
            tail = "\n".join(proc.stderr.splitlines()[-25:])
            raise RuntimeError(f"view {view.name}: the Spark write step failed (exit {proc.returncode}).\n{tail}")
        return WriteReport.from_json(report_path.read_text())


_SESSION: SparkSession | None = None


def local_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """One in-process SparkSession for this Python process (``getOrCreate``)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.pop("SPARK_HOME", None)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("mvsink")
    for k, v in {**DEFAULT_SPARK_CONF, **LOCAL_MASTER_CONF, **(conf or {})}.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def run_write_inprocess(view: ViewDefinition, desc: BatchDescription, *,
                        spark: SparkSession | None = None) -> WriteReport:
    from mvsink.spark.job import run_write

    return run_write(spark or local_session(), view, desc)
