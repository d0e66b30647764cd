"""The package's layering and acyclicity (import-linter contracts in pyproject.toml) hold, and can fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(package_parent: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package and the contracts, to break on purpose."""
    shutil.copytree(
        REPO / "plugins" / "mvsink", tmp_path / "pkg" / "mvsink", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_every_contract(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    proc = _lint(REPO / "plugins", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_a_lazy_pyspark_import_in_core_breaks_a_contract(copy: Path) -> None:
    _append(copy / "pkg/mvsink/core/mint.py", "\n\ndef _sneaky() -> None:\n    import pyspark  # noqa: F401\n")
    proc = _lint(copy / "pkg", copy)
    assert proc.returncode != 0
    assert "mvsink.core.mint -> pyspark" in proc.stdout


def test_an_upward_import_breaks_the_layers(copy: Path) -> None:
    _append(
        copy / "pkg/mvsink/core/append.py",
        "\n\ndef _up() -> None:\n    from mvsink.readers import status  # noqa: F401\n",
    )
    proc = _lint(copy / "pkg", copy)
    assert proc.returncode != 0
    assert "Layers" in proc.stdout and "BROKEN" in proc.stdout
    assert "mvsink.core.append -> mvsink.readers.status" in proc.stdout


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("spark/sources.py", "mvsink.plan.tree"),
        ("plan/splits.py", "mvsink.engines.duckdb"),
        ("engines/duckdbsql.py", "mvsink.incremental.telescope"),
        ("incremental/topk.py", "mvsink.write.job"),
        ("write/explain.py", "mvsink.maintenance.vacuum"),
    ],
    ids=["spark-to-plan", "plan-to-engines", "engines-to-incremental", "incremental-to-write", "write-to-maintenance"],
)
def test_each_new_layer_refuses_an_upward_import(copy: Path, module: str, imported: str) -> None:
    _append(copy / "pkg/mvsink" / module, f"\n\ndef _up() -> None:\n    import {imported}  # noqa: F401\n")
    proc = _lint(copy / "pkg", copy)
    assert proc.returncode != 0
    assert "Layers" in proc.stdout and "BROKEN" in proc.stdout
    source = "mvsink." + module.removesuffix(".py").replace("/", ".")
    assert f"{source} -> {imported}" in proc.stdout


def test_duckdb_in_the_plan_subpackage_breaks_a_contract(copy: Path) -> None:
    _append(copy / "pkg/mvsink/plan/joinkeys.py", "\n\ndef _eval() -> None:\n    import duckdb  # noqa: F401\n")
    proc = _lint(copy / "pkg", copy)
    assert proc.returncode != 0
    assert "mvsink.plan.joinkeys -> duckdb" in proc.stdout


def test_an_import_cycle_inside_a_subpackage_breaks_the_cycle_check(copy: Path) -> None:
    # core.batch is imported by core.staging; make batch import staging back
    _append(
        copy / "pkg/mvsink/core/batch.py",
        "\n\ndef _cycle() -> None:\n    from mvsink.core import staging  # noqa: F401\n",
    )
    proc = _lint(copy / "pkg", copy)
    assert proc.returncode != 0
    assert "No cycles are allowed in mvsink.core" in proc.stdout
