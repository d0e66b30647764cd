"""The Spark Connect new-process benchmark's pure parts (bench/connect_process.py): its rows, report and views."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from bench.connect_process import EXTRA_VIEWS, PATH, make_row, report_lines, reported_mode

pytestmark = pytest.mark.unit


def _refresh_json(mode: str, write: float, *, status: str = "appended") -> dict[str, object]:
    return {
        "status": status,
        "mode": mode,
        "rows_added": 3,
        "rows_retracted": 2,
        "spark_jobs": 4,
        "timings": {"mint": 0.1, "write": write, "append": 0.2, "write.plan": 0.5, "write.corrections": 1.0},
        "reads": {"orders": {"bytes": 1000, "files": 2}, "lineitem": {"bytes": 3000, "files": 1}},
    }


def _rows() -> list[dict[str, object]]:
    rows = []
    for rnd, (r_s, o_s, n_s) in enumerate([(4.0, 8.0, 2.0), (6.0, 10.0, 3.0), (5.0, 5.0, 2.5)]):
        rows.append(
            make_row(
                "q10",
                rnd,
                refresh=(r_s, _refresh_json("incremental:aggregate", 2.0)),
                overwrite=(o_s, {"session_s": 1.5, "register_s": 0.5, "write_s": o_s - 3}),
                nochange=(n_s, _refresh_json("", 0.0)),
                pairs=1,
            )
        )
    rows.append(
        make_row(
            "q18",
            0,
            refresh=(9.0, _refresh_json("full", 6.0)),
            overwrite=(3.0, {"session_s": 1.0, "write_s": 1.0}),
            nochange=(2.0, _refresh_json("", 0.0, status="up_to_date")),
        )
    )
    return rows


def test_row_fields():
    row = _rows()[0]
    assert row["path"] == PATH == "connect-process"
    assert (row["view"], row["round"], row["pairs"]) == ("q10", 0, 1)
    assert row["ratio"] == pytest.approx(0.5)
    assert row["mode"] == "aggregate" and row["nochange_mode"] == "unchanged"
    assert row["refresh_inside_s"] == pytest.approx(2.3)  # mint + write + append
    assert row["refresh_write_plan_s"] == 0.5 and row["refresh_write_stage_s"] is None
    assert (row["bytes_read"], row["files_read"], row["refresh_rows"]) == (4000, 3, 5)
    assert (row["overwrite_session_s"], row["overwrite_register_s"], row["overwrite_write_s"]) == (1.5, 0.5, 5.0)
    assert row["reason"] is None


def test_unknown_spark_jobs_and_reason():
    res = {**_refresh_json("full", 1.0), "spark_jobs": -1, "reason": "the query has a subquery"}
    row = make_row("q18", 0, refresh=(2.0, res), overwrite=(1.0, {}), nochange=(1.0, _refresh_json("", 0.0)))
    assert row["refresh_jobs"] is None and row["reason"] == "the query has a subquery"
    text = "\n".join(report_lines([row], raw="r", meta={}))
    assert "- q18: the query has a subquery" in text


def test_reported_mode():
    assert reported_mode({"status": "appended", "mode": "full"}) == "full"
    assert reported_mode({"status": "appended", "mode": ""}) == "unchanged"
    assert reported_mode({"status": "up_to_date", "mode": ""}) == "up_to_date"


def test_report_medians_and_ratio():
    meta = {"sf": 1.0, "stream": "rf", "date": "2026-01-01 00:00 UTC", "command": "python -m bench.connect_process"}
    text = "\n".join(report_lines(_rows(), raw="`raw.json`", meta=meta))
    assert "TPC-H SF1.0, stream `rf`" in text and "Command: `python -m bench.connect_process`." in text
    # q10: refresh 4, 6, 5; overwrite 8, 10, 5; ratios 0.5, 0.6, 1.0 (the median of the ratios); no change 2, 3, 2.5
    q10 = next(line for line in text.splitlines() if line.startswith("| q10 | aggregate |"))
    assert "| 5.00 (4.00–6.00) | 8.00 (5.00–10.00) | 0.60 (0.50–1.00) | 2.50 (2.00–3.00) (unchanged) |" in q10
    q18 = next(line for line in text.splitlines() if line.startswith("| q18 | full |"))
    assert "| 9.00 | 3.00 | 3.00 | 2.00 (up_to_date) |" in q18
    # where the time goes: q10's refresh start-up is wall - (mint + write + append) = 5.0 - 2.3 (median); its
    # overwrite's start-up wall - (session + register + write) = 1.0; q18's overwrite reported no register_s
    q10_time = [line for line in text.splitlines() if line.startswith("| q10 |")][1]
    assert (
        q10_time
        == "| q10 | 2.70 | 0.10 / 2.00 / 0.20 | 0.50 / 1.00 / – | 4 | 2.20 / 0.30 | 1.00 | 1.50 / 0.50 / 5.00 |"
    )
    q18_time = [line for line in text.splitlines() if line.startswith("| q18 |")][1]
    assert q18_time.endswith("| – | 1.00 / – / 1.00 |")


@pytest.mark.parametrize("name", ["q10", "q18"])
def test_extra_views_are_aggregates_without_order_or_limit(name):
    sql, sources, key = EXTRA_VIEWS[name]
    tree = sqlglot.parse_one(sql, read="spark")
    assert isinstance(tree, exp.Select) and tree.args.get("group")
    assert tree.find(exp.Order) is None and tree.find(exp.Limit) is None
    tables = {t.name for t in tree.find_all(exp.Table)}
    assert tables == set(sources)
    assert set(key) <= {c.name for c in tree.args["group"].expressions}


def test_q18_keeps_its_in_subquery():
    tree = sqlglot.parse_one(EXTRA_VIEWS["q18"][0], read="spark")
    sub = tree.find(exp.In).args["query"].this
    assert sub.args["having"] and [t.name for t in sub.find_all(exp.Table)] == ["lineitem"]
