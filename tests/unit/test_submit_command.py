"""The spark-submit command: arguments in order, settings precedence, the job script, redaction, hostile strings kept whole."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mvsink.core.batch import BatchDescription, SourceRead
from mvsink.definitions.view import ViewDefinition
from mvsink.definitions.viewfile import parse_view
from mvsink.spark import conf as sparkconf
from mvsink.write import runners as sparkrun

pytestmark = pytest.mark.unit


def _view(spark_conf: dict[str, str] | None = None) -> ViewDefinition:
    v = parse_view("name: v\nquery: SELECT a FROM t\nsources: {t: t}\ntarget: o\nas_of: 0\n", data_root=Path("/d"))
    return ViewDefinition(**{**v.__dict__, "spark_conf": spark_conf or {}})


def test_submit_command(monkeypatch):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "/opt/bin/spark-submit")
    monkeypatch.setenv("MVSINK_SPARK_JOB", "/jobs/mv_write.py")
    cmd = sparkrun.submit_command(
        view_file="/views/v.yaml",
        description="@/tmp/d.json",
        report_path="/tmp/r.json",
        master="local[2]",
        conf={"z.last": "1", "a.first": "x=y", "m.mid": "2g"},
    )
    assert cmd == [
        "/opt/bin/spark-submit",
        "--master",
        "local[2]",
        "--name",
        "mvsink-write",
        "--conf",
        "a.first=x=y",
        "--conf",
        "m.mid=2g",
        "--conf",
        "z.last=1",
        "/jobs/mv_write.py",
        "--view-file",
        "/views/v.yaml",
        "--description",
        "@/tmp/d.json",
        "--report",
        "/tmp/r.json",
    ]


def test_submit_command_with_full_conf(monkeypatch):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "spark-submit")
    monkeypatch.setenv("MVSINK_SPARK_JOB", "job.py")
    conf = sparkconf.spark_conf_for(_view({"spark.driver.memory": "2g"}))
    cmd = sparkrun.submit_command(view_file="v.yaml", description="{}", report_path="r", master="yarn", conf=conf)
    confs = [cmd[i + 1] for i, c in enumerate(cmd) if c == "--conf"]
    assert confs == sorted(f"{k}={v}" for k, v in conf.items())
    assert "spark.driver.memory=2g" in confs
    assert cmd[1:3] == ["--master", "yarn"]
    assert cmd[-7:] == ["job.py", "--view-file", "v.yaml", "--description", "{}", "--report", "r"]


def test_job_file_defaults_to_the_script_in_the_package(monkeypatch):
    monkeypatch.delenv("MVSINK_SPARK_JOB", raising=False)
    job = Path(sparkrun.job_file())
    assert job.name == "mv_write.py" and job.is_file()
    assert job.parent == Path(sparkrun.__file__).parent
    assert "from mvsink.write.job import main" in job.read_text()


def test_spark_conf_for_precedence():
    key = "spark.sql.shuffle.partitions"
    assert sparkconf.spark_conf_for(_view()) == sparkconf.DEFAULT_SPARK_CONF
    assert sparkconf.spark_conf_for(_view())[key] == "8"
    view = _view({key: "4", "spark.driver.memory": "2g", "spark.ui.enabled": "true"})
    conf = sparkconf.spark_conf_for(view)
    assert conf[key] == "4"
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.driver.memory"] == "2g"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    conf = sparkconf.spark_conf_for(view, {key: "16", "spark.extra": "e"})
    assert conf[key] == "16"
    assert conf["spark.driver.memory"] == "2g"
    assert conf["spark.extra"] == "e"
    assert sparkconf.spark_conf_for(view, None) == sparkconf.spark_conf_for(view, {})
    assert sparkconf.DEFAULT_SPARK_CONF[key] == "8"  # not mutated


def test_redact():
    cmd = [
        "--conf",
        "spark.hadoop.fs.s3a.secret.key=abc",
        "--conf",
        "db.PASSWORD=pw=with=equals",
        "--conf",
        "spark.auth.token=t",
        "--conf",
        "spark.hadoop.fs.s3a.access.key=AKIA",
        "--conf",
        "spark.driver.memory=2g",
        "--conf",
        "spark.app.name=token",
        "--view-file",
        "/views/secret.yaml",
        "--description",
        "a=b",
    ]
    assert sparkconf.redact(cmd) == [
        "--conf",
        "spark.hadoop.fs.s3a.secret.key=***",
        "--conf",
        "db.PASSWORD=***",
        "--conf",
        "spark.auth.token=***",
        "--conf",
        "spark.hadoop.fs.s3a.access.key=***",
        "--conf",
        "spark.driver.memory=2g",
        "--conf",
        "spark.app.name=token",
        "--view-file",
        "/views/secret.yaml",
        "--description",
        "a=b",
    ]


def test_redact_azure_account_key():
    item = "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=SECRETVALUE"
    assert sparkconf.redact([item]) == ["spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=***"]


@pytest.mark.unit
def test_hostile_strings_stay_single_arguments_of_the_submit_command(monkeypatch):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "/opt/bin/spark-submit")
    monkeypatch.setenv("MVSINK_SPARK_JOB", "/jobs/mv_write.py")
    evil = "manual__'; rm -rf / #$(id)`id`"
    desc = BatchDescription(
        view="v",
        target="/d/v",
        lower=0,
        upper=1,
        refresh_time=0,
        table_version=-1,
        sources=(SourceRead(name="o", kind="path", path="/d/o", version=0),),
        run_id=evil,
        batch_id="b",
        definition="h",
    )
    cmd = sparkrun.submit_command(
        view_file="/views/v.yaml",
        description=desc.to_json(),
        report_path="/r.json",
        master="local[2]",
        conf={"spark.driver.memory": "1g"},
    )
    assert cmd[cmd.index("--description") + 1] == desc.to_json()  # one argv element, verbatim
    assert BatchDescription.from_json(cmd[cmd.index("--description") + 1]).run_id == evil
    assert not any(c in ("rm", "-rf", "/", "#") for c in cmd)
    # no shell ever parses it: the command runs as an argv list
    out = subprocess.run(["/bin/echo", *cmd[-4:]], capture_output=True, text=True, check=True).stdout
    assert evil.replace("'", "\\'") in out.replace("'", "\\'")


@pytest.mark.parametrize(
    ("output", "named"),
    [
        (
            "py4j.protocol.Py4JJavaError: An error occurred while calling o27.parquet.\n"
            ": java.lang.RuntimeException: java.lang.ClassNotFoundException: Class "
            "org.apache.hadoop.fs.s3a.S3AFileSystem not found\n\tat org.apache.spark.sql.X.withInternalError(X.scala:1)",
            "org.apache.hadoop.fs.s3a.S3AFileSystem",
        ),
        (
            'org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "abfss"',
            '"abfss"',
        ),
    ],
)
def test_a_missing_connector_is_named_with_the_fix(output, named):
    msg = sparkrun.missing_connector("INFO noise\n" + output)
    assert msg is not None and named in msg and "Fix:" in msg and "hadoop-aws" in msg and "docs/storage.md" in msg


def test_other_failures_are_not_a_missing_connector():
    assert sparkrun.missing_connector("java.lang.OutOfMemoryError: Java heap space") is None
    assert sparkrun.missing_connector("ClassNotFoundException: Class com.example.MyUdf not found") is None
