"""mvsink.settings: every MVSINK_* variable, read at use time, validated with a message that names the fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mvsink import settings
from mvsink.exceptions import MvSinkError, SettingsError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
A_FILE = str(Path(__file__).resolve())  # not a folder
PLUGINS = REPO / "plugins"

# name -> (accessor, default, a valid value, what the accessor returns for it, junk values)
CASES = {
    "MVSINK_DATA_ROOT": (settings.data_root, None, "/srv/lake", Path("/srv/lake"), [A_FILE]),
    "MVSINK_ALLOW_OUTSIDE_DATA_ROOT": (settings.allow_outside_data_root, False, "yes", True, ["maybe", "2", "ture"]),
    "MVSINK_ALLOWED_LOCATIONS": (
        settings.allowed_locations,
        (),
        "s3://lake/, az://c/views,/srv/shared",
        ("s3://lake/", "az://c/views", "/srv/shared"),
        ["lake", "s3://lake,relative/dir"],
    ),
    "MVSINK_INCREMENTAL_GROUPS": (settings.incremental_groups, True, "off", False, ["maybe", "2"]),
    "MVSINK_INCREMENTAL_TOPK": (settings.incremental_topk, True, "off", False, ["maybe", "2"]),
    "MVSINK_INTERMEDIATE": (settings.intermediate, True, "off", False, ["maybe", "2"]),
    "MVSINK_INTERMEDIATE_HAVING": (settings.intermediate_having, True, "off", False, ["maybe", "2"]),
    "MVSINK_INTERMEDIATE_CORRELATED": (settings.intermediate_correlated, False, "on", True, ["maybe", "2"]),
    "MVSINK_INCREMENTAL_PARTITIONED": (settings.incremental_partitioned, True, "no", False, ["perhaps"]),
    "MVSINK_INCREMENTAL_DRIVER_TERMS": (settings.incremental_driver_terms, True, "off", False, ["maybe", "2"]),
    "MVSINK_DUCKDB_FULL_DIFF": (settings.duckdb_full_diff, True, "off", False, ["maybe", "2"]),
    "MVSINK_INCREMENTAL_AGGREGATE": (settings.incremental_aggregate, True, "false", False, ["maybe", "2"]),
    "MVSINK_SPARK_FREE": (settings.spark_free, True, "off", False, ["maybe", "2"]),
    "MVSINK_COST_MODEL": (settings.cost_model, True, "off", False, ["maybe", "2"]),
    "MVSINK_COST_RECHECK_EVERY": (settings.cost_recheck_every, 10, "0", 0, ["-1", "often", "2.5"]),
    "MVSINK_DECODED_COPIES_MB": (settings.decoded_copies_mb, 1024, "0", 0, ["-1", "1.5", "1GB"]),
    "MVSINK_PLAN_FACTS_MAX_AGE": (settings.plan_facts_max_age, 86400.0, "60", 60.0, ["-1", "nan", "1h"]),
    "MVSINK_SPARK_CDS": (settings.spark_cds, True, "no", False, ["maybe", "2"]),
    "MVSINK_VIEWS_DIR": (settings.views_dir, Path("dags/views"), "/srv/views", Path("/srv/views"), [A_FILE]),
    "MVSINK_SPARK_JOB": (
        settings.spark_job,
        None,
        "hdfs://nn/jobs/mv_write.py",
        "hdfs://nn/jobs/mv_write.py",
        ["job.jar", "my job.py", "/opt/jobs/"],
    ),
    "MVSINK_SPARK_REMOTE": (
        settings.spark_remote,
        None,
        "sc://127.0.0.1:15002",
        "sc://127.0.0.1:15002",
        ["127.0.0.1:15002", "http://host:15002", "sc://", "sc://host:port"],
    ),
    "MVSINK_SPARK_JARS": (settings.spark_jars, None, "/opt/jars", Path("/opt/jars"), [A_FILE]),
    "MVSINK_REPORTS_DIR": (
        settings.reports_dir,
        Path(tempfile.gettempdir()) / "mvsink-reports",
        "/srv/reports",
        Path("/srv/reports"),
        [A_FILE],
    ),
    "MVSINK_CACHE_DIR": (
        settings.cache_dir,
        (Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache") / "mvsink",
        "/var/cache/mvsink",
        Path("/var/cache/mvsink"),
        [A_FILE],
    ),
    "MVSINK_STAGING_GRACE_SECONDS": (
        settings.staging_grace_seconds,
        3600.0,
        "60",
        60.0,
        ["soon", "-1", "nan", "inf", "1h"],
    ),
    "MVSINK_COMPACT_MEMORY": (settings.compact_memory, "1GB", "512MB", "512MB", ["lots", "-1GB", "0GB", "1 XB", "1"]),
    "MVSINK_INCREMENTAL_MAX_FRACTION": (
        settings.incremental_max_fraction,
        0.5,
        "100",
        100.0,
        ["half", "-0.1", "nan", "50%"],
    ),
    "MVSINK_INCREMENTAL_PRUNE_MIN_BYTES": (
        settings.incremental_prune_min_bytes,
        8_000_000,
        "0",
        0,
        ["x", "-1", "8MB", "1.5"],
    ),
    "MVSINK_SOURCE_READS": (settings.source_reads, "auto", "Delta", "delta", ["parquet", "1", "both"]),
    "MVSINK_PLAIN_READ_MAX_PARTITIONS": (settings.plain_read_max_partitions, 64, "0", 0, ["x", "-1", "1.5"]),
    "MVSINK_INCREMENTAL_MAX_SCAN_RATIO": (
        settings.incremental_max_scan_ratio,
        1.0,
        "4",
        4.0,
        ["double", "-1", "nan", "2x"],
    ),
    "MVSINK_SPARK_CONN_ID": (
        settings.spark_conn_id,
        "spark_default",
        "spark_cluster",
        "spark_cluster",
        ["spark default", "a/b", "x" * 251],
    ),
    "MVSINK_TASK_RETRIES": (settings.task_retries, 2, "5", 5, ["x", "-1", "1.5", "two"]),
    "MVSINK_TASK_RETRY_DELAY_SECONDS": (settings.task_retry_delay_seconds, 10.0, "0.5", 0.5, ["x", "-1", "10s"]),
    "MVSINK_MAX_RESCHEDULES": (settings.max_reschedules, 3, "0", 0, ["x", "-2", "3.0"]),
}


@pytest.fixture
def clean_env(monkeypatch):
    for s in (*settings.REGISTRY, *settings.TEST_ONLY):
        monkeypatch.delenv(s.name, raising=False)
    return monkeypatch


def test_every_registered_setting_has_a_case_and_an_accessor():
    names = [s.name for s in settings.REGISTRY]
    assert len(names) == len(set(names))
    assert set(names) == set(CASES) == set(settings.ACCESSORS)
    for s in settings.REGISTRY:
        assert s.default and s.meaning and s.name.startswith("MVSINK_")


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_valid_and_junk(clean_env, name):
    get, default, valid, parsed, junk = CASES[name]
    assert get() == default
    clean_env.setenv(name, "   ")  # blank counts as unset
    assert get() == default
    clean_env.setenv(name, valid)
    assert get() == parsed
    for bad in junk:
        clean_env.setenv(name, bad)
        with pytest.raises(SettingsError) as ei:
            get()
        msg = str(ei.value)
        assert msg.startswith(f"{name}=") and repr(bad)[:40].rstrip("'") in msg, msg
        assert "Fix:" in msg and "unset it for the default" in msg, msg
        assert isinstance(ei.value, MvSinkError) and isinstance(ei.value, ValueError)


def test_the_message_of_the_brief(clean_env):
    clean_env.setenv("MVSINK_TASK_RETRIES", "x")
    with pytest.raises(SettingsError) as ei:
        settings.task_retries()
    assert str(ei.value) == (
        "MVSINK_TASK_RETRIES='x' is not a whole number >= 0. Fix: set it to e.g. 2, or unset it for the default 2."
    )


def test_data_root_resolves_relative_and_home_paths(clean_env, tmp_path):
    clean_env.chdir(tmp_path)
    clean_env.setenv("MVSINK_DATA_ROOT", "lake")
    assert settings.data_root() == (tmp_path / "lake").resolve()
    clean_env.setenv("MVSINK_DATA_ROOT", "~/lake")
    assert settings.data_root() == (Path.home() / "lake").resolve()


def test_flags_accept_the_usual_spellings(clean_env):
    for text, want in [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False), ("Off", False)]:
        clean_env.setenv("MVSINK_ALLOW_OUTSIDE_DATA_ROOT", text)
        assert settings.allow_outside_data_root() is want


def test_airflow_section_is_a_fallback_below_the_variable(clean_env):
    section = {
        "task_retries": "7",
        "task_retry_delay_seconds": "1.5",
        "max_reschedules": "9",
        "spark_conn_id": "spark_af",
    }
    asked: list[str] = []

    def fallback(key: str) -> str | None:
        asked.append(key)
        return section.get(key)

    assert settings.task_retries(fallback) == 7
    assert settings.task_retry_delay_seconds(fallback) == 1.5
    assert settings.max_reschedules(fallback) == 9
    assert settings.spark_conn_id(fallback) == "spark_af"
    assert asked == ["task_retries", "task_retry_delay_seconds", "max_reschedules", "spark_conn_id"]
    clean_env.setenv("MVSINK_TASK_RETRIES", "3")  # the MVSINK_* variable wins
    assert settings.task_retries(fallback) == 3
    clean_env.delenv("MVSINK_TASK_RETRIES")
    section["task_retries"] = "many"
    with pytest.raises(
        SettingsError,
        match=r"^\[mvsink\] task_retries \(AIRFLOW__MVSINK__TASK_RETRIES\)='many' "
        r"is not a whole number >= 0\. Fix:",
    ):
        settings.task_retries(fallback)
    assert settings.task_retries(lambda key: None) == 2  # neither set: the default
    # only the Airflow-only settings consult the section
    assert {s.name for s in settings.AIRFLOW_SETTINGS} == {
        "MVSINK_TASK_RETRIES",
        "MVSINK_TASK_RETRY_DELAY_SECONDS",
        "MVSINK_MAX_RESCHEDULES",
        "MVSINK_SPARK_CONN_ID",
    }


def test_airflow_config_section_through_airflow(clean_env, tmp_path):
    """The real [mvsink] section (AIRFLOW__MVSINK__*) through mvsink.airflow.config."""
    pytest.importorskip("airflow.configuration")
    from mvsink.airflow import config

    clean_env.setenv("AIRFLOW__MVSINK__TASK_RETRIES", "6")
    clean_env.setenv("AIRFLOW__MVSINK__MAX_RESCHEDULES", "1")
    assert config.task_retries() == 6 and config.max_reschedules() == 1
    assert config.task_retry_delay_seconds() == 10.0 and config.spark_conn_id() == "spark_default"
    clean_env.setenv("MVSINK_TASK_RETRIES", "0")
    assert config.task_retries() == 0


def test_check_all_and_env_subset(clean_env):
    assert settings.check_all()["MVSINK_TASK_RETRIES"] == 2
    clean_env.setenv("MVSINK_DATA_ROOT", "/srv/lake")
    clean_env.setenv("MVSINK_FAIL_POINTS", "write:after_staging")
    assert settings.env_subset(settings.SPARK_JOB_ENV) == {
        "MVSINK_DATA_ROOT": "/srv/lake",
        "MVSINK_FAIL_POINTS": "write:after_staging",
    }
    clean_env.setenv("MVSINK_REPORTS_DIR", A_FILE)
    with pytest.raises(SettingsError, match="MVSINK_REPORTS_DIR"):
        settings.env_subset(settings.SPARK_JOB_ENV)  # validated before it is handed to a child


# "junk" is a valid folder and a valid connection id; every other setting refuses it
REFUSE_JUNK = set(CASES) - {
    "MVSINK_DATA_ROOT",
    "MVSINK_VIEWS_DIR",
    "MVSINK_REPORTS_DIR",
    "MVSINK_CACHE_DIR",
    "MVSINK_SPARK_JARS",
    "MVSINK_SPARK_CONN_ID",
}


def test_nothing_is_read_at_import():
    """Every module of the package imports with junk in every variable; the accessor then fails."""
    env = {s.name: "junk" for s in settings.REGISTRY}
    env.update({"PYTHONPATH": str(PLUGINS), "PATH": "/usr/bin:/bin", "SPARK_LOCAL_IP": "127.0.0.1"})
    code = (
        "import importlib, pkgutil, mvsink\n"
        "skip = ('mvsink.__main__', 'mvsink.write.mv_write', 'mvsink.airflow.operators')\n"
        "names = [m.name for m in pkgutil.walk_packages(mvsink.__path__, 'mvsink.') if m.name not in skip]\n"
        "for n in names: importlib.import_module(n)\n"
        "print('IMPORTED', len(names))\n"
        "from mvsink import settings\n"
        "from mvsink.exceptions import SettingsError\n"
        f"for name in {sorted(REFUSE_JUNK)!r}:\n"
        "    get = settings.ACCESSORS[name]\n"
        "    try: get()\n"
        "    except SettingsError as e: assert str(e).startswith(name), e\n"
        "    else: raise SystemExit(name + ' accepted junk')\n"
        "print('ALL REFUSED')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ALL REFUSED" in proc.stdout and int(proc.stdout.split("IMPORTED ")[1].split()[0]) > 30


# ---------------------------------------------------------------- every MVSINK_* name is registered and documented

NAME_RE = re.compile(r"MVSINK_[A-Z][A-Z_]*[A-Z]")


def _names_in(*folders: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for folder in folders:
        for f in sorted((REPO / folder).rglob("*")):
            if f.is_file() and f.suffix in (".py", ".yaml", ".yml", ".sql", ".md", ".cfg", ".toml", ".txt"):
                for name in NAME_RE.findall(f.read_text(errors="replace")):
                    found.setdefault(name, []).append(str(f.relative_to(REPO)))
    return found


def test_every_mvsink_name_in_the_code_is_registered():
    registered = {s.name for s in settings.REGISTRY}
    test_only = {s.name for s in settings.TEST_ONLY}
    found = _names_in("plugins", "spark_jobs", "dags")
    unknown = {
        n: files[:3] for n, files in found.items() if n not in registered | test_only | set(settings.NOT_VARIABLES)
    }
    assert unknown == {}, f"add these to mvsink.settings.REGISTRY (or TEST_ONLY) and docs/configuration.md: {unknown}"
    assert registered <= set(found)  # and no registered setting is dead


def test_every_setting_is_documented():
    doc = (REPO / "docs" / "configuration.md").read_text()
    missing = [s.name for s in (*settings.REGISTRY, *settings.TEST_ONLY) if f"`{s.name}`" not in doc]
    assert missing == [], (
        f"document these in docs/configuration.md (see python -m mvsink.devtools.settingsdoc): {missing}"
    )
    assert "[mvsink]" in doc  # the Airflow section and its precedence


def test_markdown_table_lists_the_registry():
    from mvsink.devtools.settingsdoc import markdown_table

    table = markdown_table().splitlines()
    assert table[0] == "| variable | default | meaning |"
    assert [line.split("`")[1] for line in table[2:]] == [s.name for s in settings.REGISTRY]


def test_only_settings_and_fail_points_touch_os_environ():
    allowed = {PLUGINS / "mvsink" / "settings.py", PLUGINS / "mvsink" / "core" / "failpoints.py"}
    offenders = [
        f"{f.relative_to(REPO)}:{i}"
        for f in sorted(PLUGINS.rglob("*.py"))
        if f not in allowed
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if "os.environ" in line or "getenv" in line
    ]
    assert offenders == []
