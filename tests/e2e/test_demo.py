"""The README's first command: the demo refreshes the example views and reads them back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import REPO

pytestmark = pytest.mark.slow


def test_demo_runs_end_to_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MVSINK_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mvsink.devtools.demo",
            "--data-root",
            str(tmp_path),
            "--views-dir",
            str(REPO / "dags" / "views"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.count(": appended [") >= 8, out  # 2 demo views x 4 refresh times
    assert "up to date" in out and "no source changed: only the upper moved" in out
    assert "== mvsink status revenue_by_region" in out and "== mvsink status open_orders" in out
    assert (tmp_path / "demo" / "views").is_dir()
