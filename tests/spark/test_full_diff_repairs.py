"""The Spark full diff in one group-by (issue 38, item 2): the desired rows and the table's updates before the batch
summed per row in one shuffle, the table's updates not consolidated first. Randomized hand edits of the view's table
(inserted, deleted, duplicated and altered rows, negative and zero counts, NULLs, -0.0, NaN) are repaired exactly:
the contents equal the DuckDB oracle, and each batch equals the corrections the former comparison (the table
consolidated in a group-by of its own, then compared) computes in the same refresh from the same table."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.definitions.catalog import Catalog
from mvsink.engines import arrow as driver
from mvsink.incremental.modes import full
from mvsink.readers.arrow import read_view
from mvsink.spark.declaredchecks import apply_checks
from mvsink.spark.transforms import consolidate, corrections
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, delete_at, mvsink_history, update_at, write_at
from tests.support.oracle import multiset, ok_rows_query, oracle, zero_signs
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

ITEMS = pa.schema([("id", pa.int64()), ("tag", pa.string()), ("qty", pa.int32()), ("price", pa.float64())])
PRICES = [0.0, -0.0, math.nan, None, 2.5]
CHECKS = [{"name": "positive_qty", "expr": "qty > 0", "action": "error"}]
SHAPES: dict[str, dict[str, Any]] = {
    "dupes": {"query": "SELECT tag, price FROM items"},  # duplicates, NULLs, -0.0, NaN
    "agg": {"query": "SELECT tag, count(*) AS n, sum(qty) AS s, avg(price) AS a FROM items GROUP BY tag"},
    "checked": {"query": "SELECT id % 3 AS g, tag, qty FROM items", "checks": CHECKS},
}


def _items(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "tag": rng.choice(["a", "b", None]),
                "qty": rng.choice([0, 1, 2, None]),
                "price": rng.choice(PRICES),
            }
            for i in range(n)
        ],
        schema=ITEMS,
    )


def _former_full_diff(inputs: Any, desired: Any) -> Any:
    """The comparison before issue 38: the table's updates consolidated by a group-by of their own, then compared
    with the desired rows in another (kept here as the reference the new form must equal)."""
    from pyspark.sql import functions as F

    table_rows = inputs.table_df()
    user_t = [c for c in table_rows.columns if c not in (TIME, DIFF, ERROR)]
    err = [F.col(ERROR) if ERROR in table_rows.columns else F.lit(None).cast("string").alias(ERROR)]
    stored = dict(zip(user_t, desired.schema.fields))
    renamed = table_rows.select(
        *[F.col(a).cast(f.dataType).alias(f.name) for a, f in stored.items()],
        *(err if inputs.with_error else []),
        TIME,
        DIFF,
    )
    persisted = consolidate(renamed, [c for c in renamed.columns if c not in (TIME, DIFF)], before=inputs.desc.lower)
    checked = apply_checks(desired, inputs.view, with_error=inputs.with_error, observation=None)
    return corrections(checked, persisted, time=inputs.desc.time)


def _key(v: Any) -> Any:
    """A value as Spark's grouping sees it: -0.0 as 0.0, every NaN one value."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else v + 0.0
    return v


def _summed(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        out[tuple(_key(r[c]) for c in sorted(r) if c not in (TIME, DIFF))] += r[DIFF]
    return Counter({k: v for k, v in out.items() if v})


def _batch(target: str, t: int) -> Counter[tuple[Any, ...]]:
    """The updates the refresh at ``t`` wrote, summed per row (hidden state and ``_mv_error`` included)."""
    return _summed([r for r in DeltaTable(target).to_pyarrow_table().to_pylist() if r[TIME] == t])


EDITS = ("delete", "junk", "duplicate", "alter", "negative")


def _hand_edit(rng: random.Random, target: str, at: int, op: str) -> None:
    """A foreign edit ``op`` (one of :data:`EDITS`) of the view's table, below its upper, on random rows."""
    dt = DeltaTable(target)
    rows = dt.to_pyarrow_table()
    if op == "delete":
        dt.delete(f"{TIME} % 2 = 0 OR {DIFF} > 1" if rng.random() < 0.3 else "tag IS NULL")
        return
    if op == "alter":
        column = "tag" if "tag" in rows.column_names else rows.column_names[0]
        dt.update(updates={column: "'zz'"}, predicate=f"{column} = 'a'")
        return
    picked = rows.take(sorted(rng.sample(range(rows.num_rows), min(rows.num_rows, rng.randint(1, 4)))))
    if op == "junk":  # altered copies: NULLs, -0.0, NaN where the table has a float column
        picked = pa.table(
            [
                pa.array([rng.choice(PRICES) for _ in range(picked.num_rows)], f.type)
                if pa.types.is_floating(f.type)
                else picked.column(f.name)
                for f in picked.schema
            ],
            schema=picked.schema,
        )
    diffs = {"junk": [1, 2], "duplicate": [1], "negative": [-1, 0, -2]}[op]
    picked = picked.set_column(
        picked.column_names.index(DIFF), DIFF, pa.array([rng.choice(diffs) for _ in range(picked.num_rows)], pa.int64())
    ).set_column(picked.column_names.index(TIME), TIME, pa.array([at] * picked.num_rows, pa.int64()))
    write_deltalake(target, picked, mode="append")


@pytest.mark.parametrize("seed", [5, 17])
def test_hand_edits_are_repaired_like_the_former_comparison(spark, env, monkeypatch, seed):
    data, views = env
    monkeypatch.setattr(driver, "MAX_DRIVER_ROWS", 0)  # the Spark diff, not the driver's
    rng = random.Random(seed)
    src = str(data / "items")
    write_at(src, _items(rng, 0, 60), BASE)
    for name, shape in SHAPES.items():
        write_view(
            views, name, sources={"items": "items"}, target=f"views/{name}", as_of=BASE, incremental=False, **shape
        )
    catalog = Catalog(views)
    t = BASE + HOUR
    for name in SHAPES:
        assert refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark).mode == "full"
    compared: list[tuple[Counter, Counter]] = []
    new_full_diff = full.spark_full_diff

    def both(inputs: Any, desired: Any) -> Any:  # the new corrections, and the former's from the same inputs
        got = new_full_diff(inputs, desired)
        compared.append(
            (_summed(got.toArrow().to_pylist()), _summed(_former_full_diff(inputs, desired).toArrow().to_pylist()))
        )
        return got

    monkeypatch.setattr(full, "spark_full_diff", both)
    next_id = 1000
    for step in range(len(EDITS)):
        # the sources change, and each table gets the same hand edit (its twin an equal one)
        write_at(src, _items(rng, next_id, rng.randint(0, 5)), t + 10)
        next_id += 10
        if rng.random() < 0.5:
            delete_at(src, f"id % 9 = {rng.randint(0, 8)}", t + 11)
        if rng.random() < 0.5:
            update_at(src, {"price": "-0.0"}, f"id % 4 = {rng.randint(0, 3)}", t + 12)
        for i, name in enumerate(SHAPES):  # every kind of edit on every shape over the steps
            _hand_edit(rng, str(data / "views" / name), t - 5, EDITS[(step + 2 * i + seed) % len(EDITS)])
        t += HOUR
        for name, shape in SHAPES.items():
            target = str(data / "views" / name)
            compared.clear()
            res = refresh(catalog.get(name), t, catalog=catalog, runner="inprocess", spark=spark, run_id=f"r{t}")
            assert res.status == "appended" and res.mode == "full", (name, res)
            reason = str(mvsink_history(target)[0]["mode_reason"])
            assert "in the driver" not in reason
            if full.FIRST_BUILD in reason:  # the edit deleted every row: the table holds nothing, a first build
                assert not compared and not DeltaTable(target, version=DeltaTable(target).version() - 1).file_uris()
            else:
                assert len(compared) == 1 and compared[0][0] == compared[0][1], (name, step, compared)
                assert _batch(target, t) == compared[0][0], (name, step)
            got = zero_signs(multiset(read_view(catalog.get(name), as_of=t, errors="ignore")))
            want = zero_signs(oracle(ok_rows_query(shape["query"], shape.get("checks")), {"items": src}, t))
            assert got == want, (name, step)
            # every row's count at t is exactly the query's (no negative or spurious counts left)
            table = DeltaTable(target).to_pyarrow_table().to_pylist()
            assert all(v > 0 for v in _summed(table).values()), (name, step)
