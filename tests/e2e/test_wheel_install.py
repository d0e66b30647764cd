"""A wheel built from the repo, installed in a fresh venv outside the checkout, refreshes a view via the CLI.

The wheel is built from a copy of the repo's packaging inputs (pyproject.toml, README.md, plugins/) in a
temporary folder, so no ``build/`` or ``*.egg-info`` from an earlier build can leak into it and the checkout
is left untouched. The venv is created without pip and filled by this interpreter's pip (``pip --python``),
resolving the pinned dependencies from the package index pip already uses. Every command then runs from a
temporary cwd with no PYTHONPATH and with this project's venv off PATH: only the installed wheel can answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SUBPACKAGES = {
    "core",
    "definitions",
    "spark",
    "plan",
    "engines",
    "incremental",
    "write",
    "maintenance",
    "readers",
    "airflow",
    "cli",
    "devtools",
}
BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
TIMEOUT = 1200


def _run(
    cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: int = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel (``pip wheel --no-deps``) from a clean copy of the repo's packaging inputs."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in", "LICENSE", "LICENSE.txt"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    shutil.copytree(
        REPO / "plugins", src / "plugins", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    )
    out = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)], cwd=tmp)
    wheels = list(out.glob("mvsink-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A fresh venv outside the checkout with the wheel and its pinned dependencies; an environment to run it.

    The venv (about 1.3 GB) is deleted afterwards; the work folder (data, view files) is kept.
    """
    tmp = tmp_path_factory.mktemp("venv")
    home = tmp / "venv"
    venv.create(home, with_pip=False)
    py = home / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", str(wheel)], cwd=tmp)
    _run([sys.executable, "-m", "pip", "--python", str(py), "check"], cwd=tmp)

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "SPARK_HOME", "VIRTUAL_ENV", "PYSPARK_DRIVER_PYTHON"} and not k.startswith("MVSINK_")
    }
    # this project's venv off PATH (only when it is a venv: never drop a system bin folder)
    ours = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)} if sys.prefix != sys.base_prefix else set()
    env["PATH"] = os.pathsep.join(
        [str(home / "bin"), *(p for p in env.get("PATH", "").split(os.pathsep) if p and p not in ours)]
    )
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=str(py), PYTHONDONTWRITEBYTECODE="1")
    work = tmp / "work"
    work.mkdir()
    yield {"home": home, "py": py, "bin": home / "bin", "env": env, "work": work}
    shutil.rmtree(home, ignore_errors=True)


def test_wheel_holds_every_module_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert not [
        n
        for n in names
        if "__pycache__" in n or n.endswith(".pyc") or "/tests/" in n or n.startswith("tests/") or "egg-info" in n
    ]
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"mvsink"} and len(top) == 2, top
    subs = {n.split("/")[1] for n in names if n.startswith("mvsink/") and n.count("/") >= 2}
    assert subs == SUBPACKAGES, subs
    for sub in SUBPACKAGES:
        assert f"mvsink/{sub}/__init__.py" in names
    assert "mvsink/write/mv_write.py" in names
    # every module of the source tree is in the wheel (a folder without __init__.py would still be found)
    source = {
        p.relative_to(REPO / "plugins").as_posix()
        for p in (REPO / "plugins" / "mvsink").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert source <= set(names), sorted(source - set(names))
    z = zipfile.ZipFile(wheel)
    info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "mvsink = mvsink.cli:main" in z.read(info).decode()
    meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for pin in ("pyspark==4.2.0", "deltalake==1.6.6", "pyarrow", "duckdb", "pandas", "pyyaml"):
        assert f"Requires-Dist: {pin}" in meta, pin


def test_installed_package_runs_from_the_venv(installed: dict[str, Any]) -> None:
    """mvsink, its job script and spark-submit all come from the new venv, not from the checkout."""
    probe = textwrap.dedent("""
        import json, shutil, sys
        from pathlib import Path
        import mvsink
        from mvsink.write import runners
        found = {"module": mvsink.__file__, "job": runners.job_file(), "submit": runners.spark_submit_binary()}
        # a venv whose bin/ has no spark-submit beside the interpreter (e.g. pip --target, --user):
        # pyspark's own bin/spark-submit, not whatever PATH holds
        sys.executable = "/nonexistent/python"
        found["fallback"] = runners.spark_submit_binary()
        print(json.dumps(found))
    """)
    home: Path = installed["home"]
    env = {**installed["env"], "PATH": "/nonexistent"}
    found = json.loads(_run([str(installed["py"]), "-c", probe], env=env, cwd=installed["work"]).stdout)
    site = home / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site = site.resolve()
    assert Path(found["module"]).resolve() == site / "mvsink" / "__init__.py"
    assert Path(found["job"]).resolve() == site / "mvsink" / "write" / "mv_write.py" and Path(found["job"]).is_file()
    assert Path(found["submit"]) == home / "bin" / "spark-submit"
    assert Path(found["fallback"]).resolve() == site / "pyspark" / "bin" / "spark-submit"
    assert os.access(found["fallback"], os.X_OK)


def test_dag_factory_imports_without_airflow(installed: dict[str, Any]) -> None:
    """Without the ``airflow`` extra the DAG factory imports; building a DAG is what needs Airflow."""
    probe = textwrap.dedent("""
        import importlib.util
        assert importlib.util.find_spec("airflow") is None, "airflow is installed"
        from mvsink.airflow.dag_factory import build_dags
        try:
            build_dags({}, views_dir=".")
        except ImportError as exc:
            print("ImportError", exc)
        else:
            print("no error")
    """)
    out = _run([str(installed["py"]), "-c", probe], env=installed["env"], cwd=installed["work"]).stdout
    assert out.startswith("no error") or ("ImportError" in out and "airflow" in out), out


SEED = """
import sys
import pyarrow as pa
from deltalake import write_deltalake
from mvsink.core.deltalog import set_commit_time

root, base, hour = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
customers, orders = f"{root}/customers", f"{root}/orders"
i64 = pa.int64()
write_deltalake(customers, pa.table({"customer_id": pa.array([1, 2, 3], i64), "region": ["north", "south", "north"]}))
set_commit_time(customers, base)
write_deltalake(orders, pa.table({"order_id": pa.array([10, 11, 12, 13], i64),
                                  "customer_id": pa.array([1, 2, 3, 9], i64),
                                  "amount": pa.array([5, 7, 11, 13], i64)}))
set_commit_time(orders, base)
# after the refresh time: must not show up in the view
write_deltalake(orders, pa.table({"order_id": pa.array([14], i64), "customer_id": pa.array([2], i64),
                                  "amount": pa.array([100], i64)}), mode="append")
set_commit_time(orders, base + 2 * hour)
write_deltalake(customers, pa.table({"customer_id": pa.array([3], i64), "region": ["south"]}), mode="overwrite",
                predicate="customer_id = 3")
set_commit_time(customers, base + 2 * hour)
"""

VIEW = """\
name: revenue
query: |
  SELECT c.region, count(*) AS orders, sum(o.amount) AS revenue
  FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id
  GROUP BY c.region
sources:
  orders: orders
  customers: customers
target: views/revenue
key: [region]
schedule: manual
as_of: 2026-01-01T00:00:00Z
"""


def test_cli_refreshes_a_view(installed: dict[str, Any]) -> None:
    work: Path = installed["work"]
    data, views = work / "data", work / "views"
    data.mkdir()
    views.mkdir()
    (views / "revenue.yaml").write_text(VIEW)
    (work / "seed.py").write_text(SEED)
    # an installed wheel has no checkout beside it: the JVM jars (make install's .jars/) are named explicitly
    env = {**installed["env"], "MVSINK_DATA_ROOT": str(data), "MVSINK_SPARK_JARS": str(REPO / ".jars")}
    py, bin_ = str(installed["py"]), installed["bin"]
    _run([py, "seed.py", str(data), str(BASE), str(HOUR)], env=env, cwd=work)

    at = BASE + HOUR
    cli = [str(bin_ / "mvsink")]
    args = ["refresh", "revenue", "--at", "2026-01-01T01:00:00Z", "--views-dir", str(views)]
    no_jars = {k: v for k, v in env.items() if k != "MVSINK_SPARK_JARS"}
    bad = subprocess.run([*cli, *args], env=no_jars, cwd=work, capture_output=True, text=True)
    assert bad.returncode == 2, (bad.returncode, bad.stderr[-2000:])  # bad setup, not a retryable failure
    assert "no delta-spark jar" in bad.stderr and "MVSINK_SPARK_JARS" in bad.stderr, bad.stderr[-2000:]
    res = json.loads(
        _run(
            [*cli, "refresh", "revenue", "--at", "2026-01-01T01:00:00Z", "--views-dir", str(views), "--json"],
            env=env,
            cwd=work,
        ).stdout
    )
    assert res["status"] == "appended" and res["refresh_time"] == at, res
    assert res["rows_added"] == 3 and res["rows_retracted"] == 0, res

    lines = _run(
        [*cli, "read", "revenue", "--format", "jsonl", "--views-dir", str(views)], env=env, cwd=work
    ).stdout.splitlines()
    got = sorted((json.loads(line) for line in lines), key=lambda r: (r["region"] is None, r["region"] or ""))
    # by hand, as of 01:00: orders 10-13 (order 14 and customer 3's move to "south" come at 02:00);
    # customer 9 is unknown, so order 13 counts under a NULL region
    assert got == [
        {"region": "north", "orders": 2, "revenue": 16},
        {"region": "south", "orders": 1, "revenue": 7},
        {"region": None, "orders": 1, "revenue": 13},
    ]

    status = json.loads(
        _run([*cli, "status", "revenue", "--json", "--views-dir", str(views)], env=env, cwd=work).stdout
    )
    assert status["upper"] == at + 1 and status["target"] == str((data / "views" / "revenue").resolve()), status
    assert status["staged_batches"] == []
    assert [c["operation"] for c in status["last_commits"]] == ["append", "bump", "create"]
    assert status["last_commits"][0]["sources"] == {"orders": 0, "customers": 0}
