"""Unit tests of batch ids and descriptions, fail points, spark-submit commands and Parquet stats."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mvsink.core.batch import (
    BatchDescription,
    SourceRead,
    StagedFile,
    WriteReport,
    make_batch_id,
    parse_batch_id,
)
from mvsink.core.failpoints import ENV, failpoint
from mvsink.core.staging import stats_json
from mvsink.definitions.view import ViewDefinition, parse_view
from mvsink.exceptions import InjectedFault
from mvsink.spark import conf as sparkconf
from mvsink.spark import runners as sparkrun

pytestmark = pytest.mark.unit

SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


# --------------------------------------------------------------------------- batch ids


@pytest.mark.parametrize(
    "run_id",
    [
        "scheduled__2026-01-01T00:00:00+00:00",
        "manual__2026-01-01T00:00:00.123456+00:00",
        "a/../../b c\\d;e",
        "::",
        "",
        "ünïcödé-run",
        "x" * 300,
    ],
)
def test_make_batch_id_folder_safe(run_id):
    bid = make_batch_id("revenue_by_nation", 10, 20, run_id)
    assert SAFE.match(bid), bid
    assert bid.startswith("revenue_by_nation__10_20__")
    assert parse_batch_id(bid) == ("revenue_by_nation", 10, 20)


def test_make_batch_id_exact_form():
    bid = make_batch_id("v", 0, 3_600_000, "scheduled__2026-01-01T00:00:00+00:00")
    assert re.fullmatch(r"v__0_3600000__scheduled-2026-01-01T00-00-00-00-00-[0-9a-f]{8}", bid), bid


@pytest.mark.parametrize(
    "a, b", [("a:b", "a+b"), ("a:b", "a::b"), ("run", "run "), ("x" * 40 + "1", "x" * 40 + "2")],
)
def test_make_batch_id_distinct_when_sanitised_forms_collide(a, b):
    assert make_batch_id("v", 0, 1, a) != make_batch_id("v", 0, 1, b)


def test_make_batch_id_deterministic():
    assert make_batch_id("v", 0, 1, "r") == make_batch_id("v", 0, 1, "r")
    assert make_batch_id("v", 0, 1, "r") != make_batch_id("v", 0, 2, "r")


@pytest.mark.parametrize(
    "view, lower, upper",
    [("v", 0, 1), ("revenue_by_nation", 1_767_225_600_000, 1_767_229_200_000), ("a1_b2", 5, 5)],
)
def test_parse_batch_id_round_trip(view, lower, upper):
    assert parse_batch_id(make_batch_id(view, lower, upper, "run-1")) == (view, lower, upper)


@pytest.mark.parametrize(
    "name",
    ["", "readme", "part-00000.parquet", "v__0_1", "v__0_1__r__x", "v__a_1__r", "v__1_b__r", "v__-1_2__r",
     "v__1-2__r", "v____r"],
)
def test_parse_batch_id_foreign_names(name):
    assert parse_batch_id(name) is None


@pytest.mark.parametrize("view", ["a__b", "orders_", "x___y"])
def test_parse_batch_id_round_trip_names_with_underscores(view):
    assert parse_view(f"name: {view}\nquery: SELECT 1 FROM t\nsources: {{t: t}}\ntarget: o\nas_of: 0\n",
                      data_root=Path("/d")).name == view  # a valid view name
    assert parse_batch_id(make_batch_id(view, 0, 10, "r")) == (view, 0, 10)


def test_parse_batch_id_superscript_digit_is_foreign():
    assert parse_batch_id("v__²_3__r") is None


# --------------------------------------------------------------------------- JSON round trips


def _desc(**kw) -> BatchDescription:
    base = dict(
        view="v", target="/data/views/v", lower=0, upper=3_600_000, refresh_time=3_600_000, table_version=-1,
        sources=(
            SourceRead(name="orders", kind="path", path="/data/orders", version=7, table_id="a1b2"),
            SourceRead(name="up", kind="view", path="/data/views/up", version=-1, upper=42, view="up"),
        ),
        run_id="manual__x", batch_id="v__0_3600000__manual-x-12345678", definition="0123456789abcdef",
    )
    return BatchDescription(**{**base, **kw})


@pytest.mark.parametrize("kw", [{}, {"dry_run": True}, {"empty": True, "sources": ()},
                                {"base_versions": {"orders": 5}}])
def test_batch_description_json_round_trip(kw):
    d = _desc(**kw)
    text = d.to_json()
    assert json.loads(text)["sources"][:1] == [{"name": "orders", "kind": "path", "path": "/data/orders",
                                              "version": 7, "upper": None, "view": None,
                                              "table_id": "a1b2"}][:len(d.sources)]
    back = BatchDescription.from_json(text)
    assert back == d
    assert isinstance(back.sources, tuple)
    assert BatchDescription.from_dict(d.to_dict()) == d


def test_batch_description_time():
    assert _desc().time == 3_599_999


@pytest.mark.parametrize("files", [(), (StagedFile(path="batches/b/part-0.parquet", size=10, rows=2, stats="{}"),
                                        StagedFile(path="batches/b/part-1.parquet", size=20, rows=3,
                                                   stats='{"numRecords": 3}'))])
def test_write_report_json_round_trip(files):
    r = WriteReport(view="v", batch_id="b", lower=0, upper=10, status="staged", read_version=3, table_upper=0,
                    schema="QUJD", rows_added=5, rows_retracted=1, bytes=30, files=files, seconds=1.25)
    back = WriteReport.from_json(r.to_json())
    assert back == r
    assert isinstance(back.files, tuple)


def test_write_report_defaults_round_trip():
    r = WriteReport(view="v", batch_id="b", lower=0, upper=10, status="empty", read_version=-1, table_upper=0,
                    schema="")
    assert WriteReport.from_json(r.to_json()) == r


# --------------------------------------------------------------------------- fail points


def test_failpoint_unarmed_is_noop(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert failpoint("append:before_commit") is None
    monkeypatch.setenv(ENV, "")
    assert failpoint("append:before_commit") is None


def test_failpoint_armed_raises(monkeypatch):
    monkeypatch.setenv(ENV, "write:after_staging, append:before_commit")
    with pytest.raises(InjectedFault) as ei:
        failpoint("append:before_commit")
    assert str(ei.value) == ("injected fault at append:before_commit "
                             "(MVSINK_FAIL_POINTS=write:after_staging, append:before_commit)")
    with pytest.raises(InjectedFault):
        failpoint("write:after_staging")


def test_failpoint_other_names_do_not_fire(monkeypatch):
    monkeypatch.setenv(ENV, "append:after_commit,append:before_commit:exit")
    assert failpoint("write:after_staging") is None
    assert failpoint("append:before") is None
    assert failpoint("append") is None


def _run_failpoint(env_value: str, name: str) -> subprocess.CompletedProcess[str]:
    code = ("from mvsink.core.failpoints import failpoint\n"
            f"failpoint({name!r})\n"
            "print('survived')\n")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, ENV: env_value},
                          capture_output=True, text=True, timeout=60)


def test_failpoint_exit_variant_kills_process():
    proc = _run_failpoint("write:after_staging, append:after_commit:exit", "append:after_commit")
    assert proc.returncode == 97, proc.stderr
    assert proc.stdout == ""


def test_failpoint_exit_variant_other_name_survives():
    proc = _run_failpoint("append:after_commit:exit", "append:before_commit")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "survived\n"


# --------------------------------------------------------------------------- sparkrun


def _view(spark_conf: dict[str, str] | None = None) -> ViewDefinition:
    v = parse_view("name: v\nquery: SELECT a FROM t\nsources: {t: t}\ntarget: o\nas_of: 0\n", data_root=Path("/d"))
    return ViewDefinition(**{**v.__dict__, "spark_conf": spark_conf or {}})


def test_submit_command(monkeypatch):
    monkeypatch.setattr(sparkrun, "spark_submit_binary", lambda: "/opt/bin/spark-submit")
    monkeypatch.setenv("MVSINK_SPARK_JOB", "/jobs/mv_write.py")
    cmd = sparkrun.submit_command(view_file="/views/v.yaml", description="@/tmp/d.json", report_path="/tmp/r.json",
                                  master="local[2]", conf={"z.last": "1", "a.first": "x=y", "m.mid": "2g"})
    assert cmd == [
        "/opt/bin/spark-submit", "--master", "local[2]", "--name", "mvsink-write",
        "--conf", "a.first=x=y", "--conf", "m.mid=2g", "--conf", "z.last=1",
        "/jobs/mv_write.py", "--view-file", "/views/v.yaml", "--description", "@/tmp/d.json",
        "--report", "/tmp/r.json",
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
    assert "from mvsink.spark.job import main" in job.read_text()


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
        "--conf", "spark.hadoop.fs.s3a.secret.key=abc",
        "--conf", "db.PASSWORD=pw=with=equals",
        "--conf", "spark.auth.token=t",
        "--conf", "spark.hadoop.fs.s3a.access.key=AKIA",
        "--conf", "spark.driver.memory=2g",
        "--conf", "spark.app.name=token",
        "--view-file", "/views/secret.yaml",
        "--description", "a=b",
    ]
    assert sparkconf.redact(cmd) == [
        "--conf", "spark.hadoop.fs.s3a.secret.key=***",
        "--conf", "db.PASSWORD=***",
        "--conf", "spark.auth.token=***",
        "--conf", "spark.hadoop.fs.s3a.access.key=***",
        "--conf", "spark.driver.memory=2g",
        "--conf", "spark.app.name=token",
        "--view-file", "/views/secret.yaml",
        "--description", "a=b",
    ]


def test_redact_azure_account_key():
    item = "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=SECRETVALUE"
    assert sparkconf.redact([item]) == ["spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net=***"]


# --------------------------------------------------------------------------- staging.stats_json


def _write(path: Path, table, **kw) -> str:
    import pyarrow.parquet as pq

    pq.write_table(table, path, **kw)
    return str(path)


def test_stats_json(tmp_path):
    import pyarrow as pa

    t = pa.table({
        "i64": pa.array([5, None, -3, 10, 7], pa.int64()),
        "i32": pa.array([1, 2, 3, 4, 5], pa.int32()),
        "f": pa.array([1.5, None, 0.5, 2.0, None], pa.float64()),
        "f32": pa.array([1, 2, 3, 4, 5], pa.float32()),
        "b": pa.array([True, False, None, True, True]),
        "s": pa.array(["a", None, "c", "d", "e"]),
    })
    rows, text = stats_json(_write(tmp_path / "a.parquet", t, row_group_size=3))
    assert rows == 5
    stats = json.loads(text)
    assert stats == {
        "numRecords": 5,
        "minValues": {"i64": -3, "i32": 1},
        "maxValues": {"i64": 10, "i32": 5},
        "nullCount": {"i64": 1, "i32": 0, "f": 2, "f32": 0, "b": 1},
    }


def test_stats_json_all_null_and_empty(tmp_path):
    import pyarrow as pa

    t = pa.table({"x": pa.array([None, None, None], pa.int64()), "y": pa.array([1, 2, 3], pa.int64())})
    rows, text = stats_json(_write(tmp_path / "n.parquet", t, row_group_size=2))
    assert rows == 3
    assert json.loads(text) == {"numRecords": 3, "minValues": {"y": 1}, "maxValues": {"y": 3},
                                "nullCount": {"x": 3, "y": 0}}
    rows, text = stats_json(_write(tmp_path / "e.parquet", t.slice(0, 0)))
    assert rows == 0
    assert json.loads(text)["numRecords"] == 0
    assert json.loads(text)["minValues"] == {}


def test_stats_json_after_struct_column(tmp_path):
    import pyarrow as pa

    t = pa.table({"s": pa.array([{"a": 100, "b": 200}, {"a": 101, "b": 201}]),
                  "_mv_time": pa.array([1, 2], pa.int64())})
    _, text = stats_json(_write(tmp_path / "s.parquet", t))
    stats = json.loads(text)
    assert stats["minValues"] == {"_mv_time": 1}
    assert stats["maxValues"] == {"_mv_time": 2}


def test_stats_json_without_statistics_claims_no_null_count(tmp_path):
    import pyarrow as pa

    t = pa.table({"x": pa.array([1, None], pa.int64())})
    _, text = stats_json(_write(tmp_path / "x.parquet", t, write_statistics=False))
    stats = json.loads(text)
    assert stats["minValues"] == {}
    assert stats["nullCount"].get("x") in (None, 1)  # unknown or exact, never a false 0


@pytest.mark.unit
@pytest.mark.parametrize("field,value", [("lower", "0; DROP TABLE x"), ("upper", 1.5), ("dry_run", "false"),
                                         ("table_version", True), ("view", 3)])
def test_batch_description_refuses_edited_field_types(field, value):
    d = _desc().to_dict()
    d[field] = value
    with pytest.raises(ValueError, match=f"field '{field}'.*Fix: pass the description mint produced"):
        BatchDescription.from_dict(d)
    d = _desc().to_dict()
    d["sources"][0]["version"] = "7"
    with pytest.raises(ValueError, match="field 'version'"):
        BatchDescription.from_dict(d)


def test_failpoint_once_fires_only_the_first_time_and_view_scoped(monkeypatch, tmp_path):
    monkeypatch.setenv("MVSINK_SYNC_DIR", str(tmp_path))
    monkeypatch.setenv(ENV, "append:after_commit@v1:once,write:after_staging:raise:once")
    assert failpoint("append:after_commit", view="v2") is None  # another view: not armed, nothing recorded
    assert failpoint("append:after_commit") is None  # no view given: a view-scoped point does not fire
    with pytest.raises(InjectedFault):
        failpoint("append:after_commit", view="v1")
    assert failpoint("append:after_commit", view="v1") is None  # the retry passes
    assert (tmp_path / "append-after_commit@v1.fired").read_text() == str(os.getpid())
    with pytest.raises(InjectedFault):
        failpoint("write:after_staging", view="any")
    assert failpoint("write:after_staging", view="other") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["append-after_commit@v1.fired", "write-after_staging.fired"]


def test_dag_task_retries_from_the_environment(monkeypatch):
    import datetime as dt

    from mvsink.airflow.dag_factory import task_retries

    monkeypatch.delenv("MVSINK_TASK_RETRIES", raising=False)
    monkeypatch.delenv("MVSINK_TASK_RETRY_DELAY_SECONDS", raising=False)
    assert task_retries() == {"retries": 2, "retry_delay": dt.timedelta(seconds=10)}
    monkeypatch.setenv("MVSINK_TASK_RETRIES", "5")
    monkeypatch.setenv("MVSINK_TASK_RETRY_DELAY_SECONDS", "0.5")
    assert task_retries() == {"retries": 5, "retry_delay": dt.timedelta(seconds=0.5)}
    monkeypatch.setenv("MVSINK_TASK_RETRIES", "-1")
    with pytest.raises(ValueError, match="MVSINK_TASK_RETRIES='-1' is not a whole number >= 0.*Fix:"):
        task_retries()
