"""Running the write step: through spark-submit (as the DAG does) or in this process."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mvsink import exceptions as errors
from mvsink import settings
from mvsink.core.append import RefreshResult
from mvsink.core.batch import BatchDescription, WriteReport
from mvsink.core.refresh import WriteStep, run_refresh
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import ViewDefinition
from mvsink.spark.conf import (
    DEFAULT_SPARK_CONF,
    is_secret_key,
    master_conf,
    redact,
    spark_conf_for,
    split_secret_conf,
    write_properties_file,
)
from mvsink.spark.submit import spark_submit_binary, submit_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Runner = Literal["submit", "inprocess", "connect"]


JOB_SCRIPT = "mv_write.py"  # the entry script, shipped in this package (mvsink/write/mv_write.py)


def job_file() -> str:
    """Path of the write job's entry script: ``MVSINK_SPARK_JOB``, else the one shipped in the package."""
    env = settings.spark_job()
    if env:
        return env
    from importlib.resources import files

    return str(files("mvsink.write").joinpath(JOB_SCRIPT))


def submit_command(
    *,
    view_file: str,
    description: str,
    report_path: str,
    master: str,
    conf: Mapping[str, str],
    properties_file: str | None = None,
) -> list[str]:
    """The spark-submit command line of one write step (pure; tested).

    An argv list run without a shell: every value is one argument, nothing is interpolated.
    Secret-looking settings never go onto it (other users can read a command line): pass them
    in ``properties_file`` (see :func:`write_properties_file`).
    """
    leaked = sorted(k for k in conf if is_secret_key(k))
    if leaked:
        raise errors.MvSinkError(
            f"Spark setting(s) {leaked} look secret and may not go onto a command line. "
            "Fix: pass them through a properties file (sparkrun.write_properties_file)."
        )
    cmd = [spark_submit_binary(), "--master", master, "--name", "mvsink-write"]
    if properties_file:
        cmd += ["--properties-file", properties_file]
    for k, v in sorted(conf.items()):
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [job_file(), "--view-file", view_file, "--description", description, "--report", report_path]


def run_write_submit(
    view: ViewDefinition, desc: BatchDescription, *, master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> WriteReport:
    """Run the write step through spark-submit and return its report (errors re-raised as ours)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mvsink-") as tmp:
        report_path = Path(tmp) / "report.json"
        desc_path = Path(tmp) / "description.json"
        desc_path.write_text(desc.to_json())
        public, secret = split_secret_conf(spark_conf_for(view, conf, master=master))
        props = write_properties_file(secret, tmp) if secret else None
        cmd = submit_command(
            view_file=view.file,
            description=f"@{desc_path}",
            report_path=str(report_path),
            master=master,
            conf=public,
            properties_file=props,
        )
        log.info("view %s: spark-submit %s", view.name, " ".join(redact(cmd[1:])))
        proc = subprocess.run(cmd, env=submit_env(), capture_output=True, text=True)
        bad_input = job_error(proc.stdout)
        if bad_input is not None:
            raise bad_input
        if proc.returncode != 0 or not report_path.exists():
            lines = [x for x in proc.stderr.splitlines() if x.strip()]
            what = f"exit {proc.returncode}" if proc.returncode != 0 else "exit 0 but no report"
            # spark-submit passes the Python job's stderr (its traceback) on to its own stdout
            connector = missing_connector(proc.stdout + "\n" + proc.stderr)
            if connector:
                raise errors.SparkJobError(
                    f"view {view.name}: the Spark write step failed ({what}): {connector}",
                    exit_code=proc.returncode,
                    output="\n".join(lines[-25:]),
                )
            cause = next((x.strip() for x in reversed(lines) if _CAUSE_RE.search(x)), "")
            last = f": {cause[:300]}" if cause else ""
            raise errors.SparkJobError(
                f"view {view.name}: the Spark write step failed ({what}){last}. Fix: see the job's output "
                "(mvsink -v shows it); a retry may succeed if the failure was transient.",
                exit_code=proc.returncode,
                output="\n".join(lines[-25:]),
            )
        return WriteReport.from_json(report_path.read_text())


_CAUSE_RE = re.compile(r"(Error|Exception|error:|Killed|FAILED)")  # the line that says what went wrong

_NO_FS_CLASS_RE = re.compile(
    r"ClassNotFoundException: Class (org\.apache\.hadoop\.fs\.\S+|com\.google\.cloud\.\S+) not found"
)
_NO_FS_SCHEME_RE = re.compile(r"UnsupportedFileSystemException: No FileSystem for scheme \"?(\w+)\"?")


def missing_connector(output: str) -> str | None:
    """What to say when the job failed because Spark has no filesystem for a location's scheme
    (``s3a``, ``abfss``, ``gs``: the connector jars are not on its classpath), else None."""
    found = _NO_FS_CLASS_RE.search(output) or _NO_FS_SCHEME_RE.search(output)
    if not found:
        return None
    return (
        f"Spark has no filesystem for this location ({found.group(0).split(': ', 1)[-1]}): the connector "
        "jars are not on its classpath. Fix: give the driver and executors the connector of the cluster's "
        "Hadoop version (hadoop-aws with its AWS SDK bundle for s3a://, hadoop-azure for abfss://, "
        "gcs-connector for gs://), e.g. through spark.jars in the Spark connection's extra or the cluster's "
        "image; see docs/storage.md."
    )


def job_error(stdout: str) -> errors.MvSinkError | None:
    """The bad-input error a write job reported on its output (an ``MVSINK_ERROR`` line), if any."""
    from mvsink.write.job import ERROR_PREFIX

    for line in stdout.splitlines():
        if line.startswith(ERROR_PREFIX):
            err = json.loads(line[len(ERROR_PREFIX) :])
            cls = getattr(errors, str(err.get("type")), None)
            if not (isinstance(cls, type) and issubclass(cls, errors.MvSinkError)):
                cls = errors.MvSinkError
            return cls(str(err.get("message")))
    return None


_SESSION: SparkSession | None = None


def local_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """One in-process SparkSession for this Python process (``getOrCreate``): defaults,
    :func:`~mvsink.spark.conf.master_conf` and Delta (:func:`~mvsink.spark.jars.session_conf`) < ``conf``."""
    settings.prepare_local_spark()
    from pyspark.sql import SparkSession

    from mvsink.spark.conf import driver_conf, session_conf

    builder = SparkSession.builder.master(master).appName("mvsink")
    merged = {**DEFAULT_SPARK_CONF, **master_conf(master), **session_conf(master=master), **(conf or {})}
    for k, v in driver_conf(merged).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def run_write_inprocess(
    view: ViewDefinition,
    desc: BatchDescription,
    *,
    spark: SparkSession | None = None,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> WriteReport:
    """Run the write step in this process: on ``spark``, else on this process's session for ``master``
    (created with the view's settings and ``conf`` if there is none yet)."""
    from mvsink.spark.conf import check_connectors, storage_conf
    from mvsink.write.job import run_write

    check_connectors(view, role="in-process Spark")
    return run_write(
        spark or local_session(master, {**storage_conf(view), **view.spark_conf, **(conf or {})}), view, desc
    )


def write_step(
    *,
    runner: Runner = "submit",
    spark: SparkSession | None = None,
    master: str = "local[2]",
    spark_conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> WriteStep:
    """The write step of a refresh: without Spark where it can (:mod:`mvsink.write.driver`), else through
    spark-submit, in this process, or on a Spark Connect server."""
    if runner == "submit":
        return spark_free_first(lambda view, desc: run_write_submit(view, desc, master=master, conf=spark_conf))
    if runner == "connect":
        if not remote:
            raise ValueError("runner='connect' needs remote='sc://host:port'")

        def connect_write(view: ViewDefinition, desc: BatchDescription) -> WriteReport:
            from mvsink.spark.connect import released_session
            from mvsink.write.job import run_write

            if spark is not None:
                return run_write(spark, view, desc)
            with released_session(remote, conf={**view.spark_conf, **(spark_conf or {})}) as session:
                return run_write(session, view, desc)

        return spark_free_first(connect_write)
    return spark_free_first(
        lambda view, desc: run_write_inprocess(view, desc, spark=spark, master=master, conf=spark_conf)
    )


def spark_free_first(write: WriteStep) -> WriteStep:
    """``write``, unless the write step runs without Spark (:func:`mvsink.write.driver.write_without_spark`)."""

    def step(view: ViewDefinition, desc: BatchDescription) -> WriteReport:
        from mvsink.write.driver import write_without_spark

        return write_without_spark(view, desc) or write(view, desc)

    return step


def refresh(
    view: ViewDefinition,
    refresh_time: int,
    *,
    catalog: Catalog | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
    runner: Runner = "submit",
    spark: SparkSession | None = None,
    master: str = "local[2]",
    spark_conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> RefreshResult:
    """Make ``view`` equal to its query as of ``refresh_time``, writing with the chosen Spark ``runner``."""
    write = write_step(runner=runner, spark=spark, master=master, spark_conf=spark_conf, remote=remote)
    return run_refresh(view, refresh_time, write=write, catalog=catalog, dry_run=dry_run, run_id=run_id)
