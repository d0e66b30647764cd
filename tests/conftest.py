from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("SPARK_HOME", None)


@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2]) for the whole test run."""
    from mvsink.write.runners import local_session

    session = local_session("local[2]", {"spark.driver.memory": "2g"})
    yield session
    session.stop()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A data root and a views folder, with relative paths resolving into the data root."""
    data = tmp_path / "data"
    views = tmp_path / "views"
    data.mkdir()
    views.mkdir()
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    monkeypatch.delenv("MVSINK_FAIL_POINTS", raising=False)
    return data, views


def pytest_addoption(parser):
    """The differential test of the DuckDB translation (tests/spark/test_duckdb_translation.py): its seed and
    how many expressions it generates (e.g. ``--translator-cases 20000`` once by hand)."""
    parser.addoption("--translator-seed", type=int, default=20240611, help="seed of the generated expressions")
    parser.addoption("--translator-cases", type=int, default=1000, help="how many expressions to generate")
