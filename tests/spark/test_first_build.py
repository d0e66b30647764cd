"""A first build writes the query's result directly (issue 38, item 1): no table yet means ``desired - persisted =
desired``, so each row of the query (after the view's checks, with the hidden aggregate state) is written once with
``_mv_diff = 1``, without a comparison. Randomized sources: each shape's table equals the DuckDB oracle and the
table the comparison against an empty table builds; a later incremental refresh over a direct first build is right."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.columns import DIFF, TIME
from mvsink.definitions.catalog import Catalog
from mvsink.incremental.modes import full
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.aggdata import CDF
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, stamp, update_at, write_at
from tests.support.oracle import multiset, ok_rows_query, oracle, zero_signs
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

ITEMS = pa.schema([("id", pa.int64()), ("tag", pa.string()), ("qty", pa.int32()), ("price", pa.float64())])
CHECKS = [
    {"name": "no_test", "expr": "tag IS NULL OR tag <> 't'", "action": "drop"},
    {"name": "positive_qty", "expr": "qty > 0", "action": "error"},
]
SHAPES: dict[str, dict[str, Any]] = {
    # duplicates (many ids share tag and price), NULLs, -0.0 and NaN
    "dupes": {"query": "SELECT tag, price FROM items"},
    # an aggregate keeping hidden state (count, sum, avg), NULL group keys, float sums
    "agg": {"query": "SELECT tag, count(*) AS n, sum(qty) AS s, avg(qty) AS a FROM items GROUP BY tag"},
    # checks: dropped rows, error rows kept with _mv_error
    "checked": {"query": "SELECT id % 4 AS g, tag, qty FROM items", "checks": CHECKS},
}


def _items(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "tag": rng.choice(["a", "b", "t", None]),
                "qty": rng.choice([0, 1, 2, 5, None]),
                "price": rng.choice([0.0, -0.0, math.nan, None, 2.5, 1e300]),
            }
            for i in range(n)
        ],
        schema=ITEMS,
    )


def _key(v: Any) -> Any:
    """A value as Spark's grouping sees it: -0.0 as 0.0, every NaN one value."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else v + 0.0
    return v


def _consolidated(target: str) -> Counter[tuple[Any, ...]]:
    """The table's updates (every column, the hidden state and ``_mv_error`` included) summed per row."""
    t = DeltaTable(target).to_pyarrow_table()
    cols = sorted(c for c in t.column_names if c not in (TIME, DIFF))
    out: Counter[tuple[Any, ...]] = Counter()
    for r in t.to_pylist():
        out[tuple(_key(r[c]) for c in cols)] += r[DIFF]
    return Counter({k: v for k, v in out.items() if v})


@pytest.mark.parametrize("seed", [3, 11])
def test_first_builds_write_the_query_directly(spark, env, monkeypatch, seed):
    data, views = env
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "100")  # small sources: their changes are large
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_SCAN_RATIO", "1000")
    rng = random.Random(seed)
    src = str(data / "items")
    write_deltalake(src, _items(rng, 0, rng.randint(40, 90)), configuration=CDF)  # small change sets
    stamp(src, BASE)
    for name, shape in SHAPES.items():
        for suffix in ("", "_old"):
            write_view(
                views, name + suffix, sources={"items": "items"}, target=f"views/{name}{suffix}", as_of=BASE, **shape
            )
    catalog = Catalog(views)
    t = BASE + HOUR
    for name, shape in SHAPES.items():
        direct = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark)
        with monkeypatch.context() as mp:  # the old path: the comparison against an empty table
            mp.setattr(full, "nothing_persisted", lambda table, *, lower: False)
            old = refresh(catalog.get(name + "_old"), t, catalog=catalog, runner="inprocess", spark=spark)
        assert direct.status == old.status == "appended" and direct.mode == old.mode == "full", (direct, old)
        target, old_target = str(data / "views" / name), str(data / "views" / f"{name}_old")
        entry = mvsink_history(target)[0]
        assert entry["mode"] == "full" and entry["mode_reason"] == f"{full.NO_EARLIER} ({full.FIRST_BUILD})", entry
        assert full.FIRST_BUILD not in str(mvsink_history(old_target)[0]["mode_reason"])
        rows = DeltaTable(target).to_pyarrow_table()
        assert set(rows.column(DIFF).to_pylist()) == {1} and set(rows.column(TIME).to_pylist()) == {t}, name
        assert rows.num_rows == direct.rows_added and direct.rows_retracted == 0, (name, direct)
        assert (direct.rows_added, direct.checks) == (old.rows_added, old.checks), (name, direct, old)
        assert _consolidated(target) == _consolidated(old_target), name  # hidden state and errors included
        got = zero_signs(multiset(read_view(catalog.get(name), as_of=t, errors="ignore")))
        assert got == zero_signs(oracle(ok_rows_query(shape["query"], shape.get("checks")), {"items": src}, t)), name
        if name == "dupes":
            assert max(_consolidated(target).values()) > 1  # the draw has duplicates, kept as separate rows
        if name == "agg":
            assert any(c.startswith("_mv_") and c not in (TIME, DIFF) for c in rows.column_names), rows.schema

    # a later refresh over the direct first builds: incremental where a mode serves it, exact either way
    next_id = 1000
    for step in range(3):
        ts = t + 10 + step
        write_at(src, _items(rng, next_id, rng.randint(1, 8)), ts)
        next_id += 10
        delete_at(src, f"id % 7 = {rng.randint(0, 6)}", ts + 1)
        update_at(src, {"price": "-0.0", "qty": "qty + 1"}, f"id % 5 = {rng.randint(0, 4)}", ts + 2)
        t += HOUR
        for name, shape in SHAPES.items():
            res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
            assert res.status == "appended", (name, res)
            if name == "agg":
                assert res.mode == "incremental:aggregate", res  # the hidden state the first build wrote
            if name == "dupes":
                assert res.mode == "incremental", res.mode_reason
            got = zero_signs(multiset(read_view(catalog.get(name), as_of=t, errors="ignore")))
            assert got == zero_signs(oracle(ok_rows_query(shape["query"], shape.get("checks")), {"items": src}, t)), (
                name,
                step,
            )
        # the aggregate's state equals what a first build of the same sources now writes
        fresh = f"agg_fresh{step}"
        write_view(views, fresh, sources={"items": "items"}, target=f"views/{fresh}", as_of=BASE, **SHAPES["agg"])
        res = refresh(Catalog(views).get(fresh), t, runner="inprocess", spark=spark)
        assert res.status == "appended", res
        assert _consolidated(str(data / "views" / "agg")) == _consolidated(str(data / "views" / fresh)), step
