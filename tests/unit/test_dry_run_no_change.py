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
