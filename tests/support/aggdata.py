"""Randomised histories of an orders fact table and a customers dimension for the aggregate tests."""

from __future__ import annotations

import json
import random

import pyarrow as pa
from deltalake import DeltaTable

from tests.support.delta import BASE, delete_at, stamp, update_at, write_at

CDF = {"delta.enableChangeDataFeed": "true"}
ORDERS = pa.schema(
    [("id", pa.int64()), ("cust", pa.int32()), ("status", pa.string()), ("qty", pa.int32()), ("price", pa.float64())]
)
CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string()), ("seg", pa.string())])


def agg_orders(rng: random.Random, start: int, n: int, status: list[str | None] | None = None) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "cust": rng.choice([1, 2, 3, 4, None]),
                "status": rng.choice(status or ["A", "B", "C", None]),
                "qty": rng.choice([0, 1, 2, 5, 7, None]),
                "price": rng.choice([0.5, 1.25, 2.0, None]),
            }
            for i in range(n)
        ],
        schema=ORDERS,
    )


def agg_customers(rng: random.Random) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"id": i, "region": rng.choice(["eu", "us", None]), "seg": rng.choice(["x", "y", None])}
            for i in (1, 2, 3, 4)
        ],
        schema=CUSTOMERS,
    )


def write_sources(data, rng: random.Random, orders: int, *, cdf: bool = False) -> tuple[str, str]:
    """``data/orders`` (``orders`` rows of :func:`agg_orders`, dated BASE) and ``data/customers`` (dated BASE + 1) as
    Delta tables (with the change data feed where ``cdf``): their paths."""
    from deltalake import write_deltalake

    paths = str(data / "orders"), str(data / "customers")
    write_deltalake(paths[0], agg_orders(rng, 0, orders), configuration=CDF if cdf else None)
    stamp(paths[0], BASE)
    write_deltalake(paths[1], agg_customers(rng), configuration=CDF if cdf else None)
    stamp(paths[1], BASE + 1)
    return paths


def agg_change(rng: random.Random, orders: str, customers: str, next_id: list[int], ts: int) -> str:
    op = rng.choice(
        ["insert", "insert", "delete", "delete_max", "update", "customers", "dupes", "kill_group", "revive_group"]
    )
    if op == "insert":
        t = agg_orders(rng, next_id[0], rng.randint(1, 5))
    elif op == "dupes":  # the same rows again (but the id): duplicates in C
        t = agg_orders(random.Random(3), next_id[0], 3)
    elif op == "revive_group":
        t = agg_orders(rng, next_id[0], 2, status=["C"])
    if op in ("insert", "dupes", "revive_group"):
        next_id[0] += t.num_rows
        write_at(orders, t, ts)
    elif op == "delete":
        delete_at(orders, f"id % 5 = {rng.randint(0, 4)}", ts)
    elif op == "delete_max":  # the extreme of MIN/MAX groups
        delete_at(orders, f"qty = {rng.choice([7, 5, 0])}", ts)
    elif op == "kill_group":  # a group dies (and may come back later)
        delete_at(orders, "status = 'C'", ts)
    elif op == "update":
        update_at(orders, {"status": "'B'", "qty": "qty + 1"}, f"id % 4 = {rng.randint(0, 3)}", ts)
    else:  # a dimension change: the customer's orders move between groups
        region = rng.choice(["'eu'", "'apac'", "NULL"])
        update_at(
            customers, {"region": region, "seg": rng.choice(["'x'", "'z'", "NULL"])}, f"id = {rng.randint(1, 4)}", ts
        )
    return op


def appends(target: str) -> list[dict[str, object]]:
    """mvsink.* commit info of each append, oldest first."""
    out = []
    for h in reversed(DeltaTable(target).history()):
        info = {k.removeprefix("mvsink."): json.loads(v) for k, v in h.items() if k.startswith("mvsink.")}
        if info.get("operation") == "append":
            out.append(info)
    return out
