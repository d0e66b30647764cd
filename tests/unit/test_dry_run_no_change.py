"""A dry run of a batch in which no source changed since the last refresh (mint marks it empty, so the write step
is skipped) reports what the refresh would do: nothing. It used to fail in append on ``assert report is not
None`` (the page's Dry run button on an up-to-date view, or ``mvsink refresh --dry-run``)."""

from __future__ import annotations

import os
import time

import pytest

pytestmark = pytest.mark.unit


def test_a_dry_run_of_a_batch_no_source_changed_reports_nothing_to_do(tmp_path, monkeypatch):
    from mvsink.core.append import append
    from mvsink.core.mint import mint
    from mvsink.definitions.catalog import Catalog
    from tests.support.refreshlog import HOUR, refresh, source, view_file

    data, views = tmp_path / "data", tmp_path / "views"
    data.mkdir()
    views.mkdir()
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    source(data)
    view_file(views, "v")
    catalog = Catalog(views)
    now = int(time.time() * 1000)
    refresh(catalog, "v", now - HOUR, added=3)
    version = len(os.listdir(data / "views" / "v" / "_delta_log"))
    desc = mint(catalog.get("v"), now, catalog=catalog, run_id="manual__dry", dry_run=True)
    assert desc.empty and desc.dry_run
    res = append(catalog.get("v"), desc, None)
    assert res.status == "dry_run" and (res.rows_added, res.rows_retracted) == (0, 0) and res.mode == "unchanged"
    assert "would add 0 and retract 0 rows (no source changed); nothing written" in res.summary()
    assert len(os.listdir(data / "views" / "v" / "_delta_log")) == version  # nothing written


def test_a_refresh_no_source_changed_imports_no_spark_or_duckdb(tmp_path, monkeypatch):
    """The command line's refresh of a view no source changed since its last refresh (mint finds the batch empty:
    one commit that moves the upper) imports none of pyspark, duckdb, pandas, sqlglot, pyarrow, numpy, and commits
    the new upper (issue 35: a new process per refresh costs little then)."""
    import json
    import subprocess
    import sys

    from mvsink.definitions.catalog import Catalog
    from tests.support.refreshlog import HOUR, refresh, source, view_file

    data, views = tmp_path / "data", tmp_path / "views"
    data.mkdir()
    views.mkdir()
    source(data)
    view_file(views, "v")
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(data))
    now = int(time.time() * 1000)
    refresh(Catalog(views), "v", now - HOUR, added=3)
    log = data / "views" / "v" / "_delta_log"
    before = len(os.listdir(log))
    script = (
        "import json, sys\n"
        "from mvsink.cli.app import main\n"
        f"code = main(['refresh', 'v', '--views-dir', {str(views)!r}, '--at', '{now}', '--json'])\n"
        "heavy = sorted(m for m in ('pyspark', 'duckdb', 'pandas', 'sqlglot', 'pyarrow', 'numpy') if m in sys.modules)\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    env = {**os.environ, "MVSINK_DATA_ROOT": str(data)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    *printed, last = out.stdout.strip().splitlines()
    assert json.loads(last) == {"code": 0, "heavy": []}, out.stderr
    result = json.loads("\n".join(printed))
    assert (result["status"], result["reason"]) == ("appended", "no source changed: only the upper moved")
    assert len(os.listdir(log)) == before + 1  # one commit: the new upper
