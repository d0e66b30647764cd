"""The cost model on real Spark (local[2]) over real Delta tables: each refresh records what decides its cost in its
commit info and the view's history; ``mvsink explain --json`` lists the estimates; with ``MVSINK_COST_MODEL`` on, a
history that makes the change terms expensive takes the full diff, with the same rows."""

from __future__ import annotations

import json
import random

import pytest

from mvsink.cli.app import main
from mvsink.core.costrecord import CostRecord, add_to_history, history_path, read_history
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.readers.status import format_status, view_status
from mvsink.write.runners import refresh
from tests.support.aggdata import agg_orders, appends, write_sources
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

QUERY = (
    "SELECT c.region, count(*) AS n, sum(o.qty) AS s FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region"
)
INCREMENTAL = ("incremental:aggregate/spark", "incremental:aggregate/duckdb", "incremental:aggregate/driver")


def test_refreshes_record_their_cost_and_the_model_decides_when_on(spark, env, monkeypatch, capsys):
    monkeypatch.setenv("MVSINK_COST_MODEL", "false")  # first the scan guard alone (whatever the default)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # the change-set size guard: never
    data, views = env
    rng = random.Random(37)
    orders, customers = write_sources(data, rng, 40)
    write_view(
        views,
        "costly",
        query=QUERY,
        sources={"orders": "orders", "customers": "customers"},
        target="views/costly",
        as_of=BASE,
    )
    catalog = Catalog(views)
    view = catalog.get("costly")

    t, next_id = BASE + HOUR, 40
    assert refresh(view, t, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    for _ in range(3):  # small inserts: the aggregate state's change terms
        t += HOUR
        write_at(orders, agg_orders(rng, next_id, 3), t - 60_000)
        next_id += 3
        res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
        assert res.mode == "incremental:aggregate", res

    target = str(data / "views" / "costly")
    commits = appends(target)
    assert [c["mode"] for c in commits] == ["full"] + ["incremental:aggregate"] * 3
    for c in commits[1:]:
        cost = c["cost"]
        assert cost["engine"] in ("spark", "duckdb", "driver"), cost
        assert set(cost["phases"]) >= {"plan", "corrections"}, cost
        assert cost["changes"]["orders"]["bytes"] > 0 and cost["changes"]["orders"]["files"] == 1, cost
        assert set(cost["guard"]) == {"terms_bytes", "full_bytes", "table_bytes"}, cost
        assert 0 < cost["guard"]["terms_bytes"] < cost["guard"]["full_bytes"], cost  # customers only, vs both + table
        assert "full" in cost["estimates"] and cost["basis"] == "prior" and cost["model"] == "off", cost
        assert cost["picked"] in INCREMENTAL, cost
    history = read_history(target)
    versions = [r.version for r in history]
    assert len(versions) == 4 and versions == sorted(set(versions))  # one per append
    assert [r.mode for r in history] == [c["mode"] for c in commits]
    assert all(r.write_s > 0 and r.wall_s is not None and r.wall_s >= r.write_s for r in history)
    assert history[-1].guard == commits[-1]["cost"]["guard"] and history[-1].changes["orders"]["bytes"] > 0

    # status: per refresh the mode that ran, its estimate against the actual time, the next-best estimate
    st = view_status(view)
    last = st["last_commits"][0]
    assert last["cost_choice"]["chosen"] in INCREMENTAL and last["cost_choice"]["next_best"] is not None
    assert last["cost_choice"]["actual_s"] == pytest.approx(last["write_ms"] / 1000)
    assert "; cost: incremental:aggregate/" in format_status(st) and "next best" in format_status(st)

    # explain --json: each applicable candidate's estimate for a change of orders, and the pick
    assert main(["explain", "costly", "--views-dir", str(views), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    src = next(s for s in doc["sources"] if s["source"] == "orders")
    modes = [e["mode"] for e in src["estimates"]]
    assert modes[0] == "incremental:aggregate/spark" and modes[-1] == "full", src
    assert all(e["seconds"] >= 0 and e["basis"] in ("prior", "scaled prior", "history") for e in src["estimates"])
    assert src["cost_pick"] in modes and "MVSINK_COST_MODEL is off" in src["cost_why"], src
    assert main(["explain", "costly", "--views-dir", str(views)]) == 0
    assert "estimates: incremental:aggregate/spark" in capsys.readouterr().out

    # The model on, with a recorded history where every incremental candidate is slow and the full diff fast:
    # the next small change takes the full diff, its reason saying why; the rows are the oracle's either way.
    path = history_path(target)
    for i, key in enumerate([*INCREMENTAL * 3, *("full",) * 3]):
        mode, _, engine = key.partition("/")
        slow = key != "full"
        add_to_history(
            target,
            CostRecord(
                version=100 + i,
                at=0,
                mode=mode,
                engine=engine or "spark",
                write_s=30.0 if slow else 0.1,
                guard={"terms_bytes": 1000 + i, "full_bytes": 5000, "table_bytes": 100},
                changes={"orders": {"bytes": 500, "files": 1}},
            ),
        )
    monkeypatch.setenv("MVSINK_COST_MODEL", "on")
    t += HOUR
    write_at(orders, agg_orders(rng, next_id, 3), t - 60_000)
    res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
    assert res.mode == "full" and "the cost model picks the full diff" in res.mode_reason, res
    assert appends(target)[-1]["cost"]["basis"] == "history"
    assert multiset(read_view(view, as_of=t)) == oracle(QUERY, {"orders": orders, "customers": customers}, t)

    # the history deleted mid-way: no history, the prior (the scan guard) decides again, and it is written anew
    import os

    os.remove(str(path))
    t += HOUR
    write_at(orders, agg_orders(rng, next_id + 3, 3), t - 60_000)
    res = refresh(view, t, catalog=catalog, runner="inprocess", spark=spark)
    assert res.mode == "incremental:aggregate", res
    assert appends(target)[-1]["cost"]["basis"] == "prior"
    assert [r.mode for r in read_history(target)] == ["incremental:aggregate"]
    assert multiset(read_view(view, as_of=t)) == oracle(QUERY, {"orders": orders, "customers": customers}, t)
