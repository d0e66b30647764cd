"""``mvsink check``'s report and view order (mvsink.write.check), without Spark: one line per file, a good view's
modes below it, the count; upstream views checked before the views over them."""

from __future__ import annotations

import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.write.check import CheckReport, ViewCheck, _upstream_first
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.unit


def test_the_report_reads_one_line_per_file():
    report = CheckReport(
        views_dir="v",
        checks=(
            ViewCheck(file="v/a.yaml", view="a", modes=("a change of `o` → incremental (linear)",)),
            ViewCheck(file="v/b.yaml", view="b", problem="view b: the query does not\n analyse. Fix: x."),
            ViewCheck(file="v/c.yaml", view="c", note="refresh modes not reported"),
        ),
    )
    assert not report.ok
    assert report.summary().splitlines() == [
        "ok   v/a.yaml: view a",
        "       a change of `o` → incremental (linear)",
        "FAIL v/b.yaml: view b: the query does not analyse. Fix: x.",
        "ok   v/c.yaml: view c",
        "       refresh modes not reported",
        "3 view file(s) checked in v: 1 with problems",
    ]
    assert report.to_dict()["views"][1] == {
        "file": "v/b.yaml",
        "view": "b",
        "problem": "view b: the query does not\n analyse. Fix: x.",
        "modes": (),
        "note": None,
    }
    assert CheckReport(views_dir="v", checks=report.checks[:1]).summary().endswith("all good")


def test_upstream_views_come_first(tmp_path, monkeypatch):
    monkeypatch.setenv("MVSINK_DATA_ROOT", str(tmp_path))
    views = tmp_path / "views"
    views.mkdir()
    write_view(views, "a_top", query="SELECT x FROM m", sources={"m": {"view": "m_mid"}}, target="t/a", as_of=0)
    write_view(views, "m_mid", query="SELECT x FROM z", sources={"z": {"view": "z_base"}}, target="t/m", as_of=0)
    write_view(views, "z_base", query="SELECT x FROM o", sources={"o": "o"}, target="t/z", as_of=0)
    assert [v.name for v in _upstream_first(Catalog(views))] == ["z_base", "m_mid", "a_top"]
