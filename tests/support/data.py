"""Random source tables and histories, and the queries over them.

Three data sets, each with its own schema (the seeds of the tests depend on them: they are kept as written):

- orders (with prices) and customers: ``make_orders``, ``make_customers``, ``random_change``; queries
  ``PROJECT`` (a projection with duplicates) and ``JOIN_AGG`` (a left join + aggregate);
- the incremental tests' orders and customers (no prices, customer tiers): ``inc_orders``, ``inc_customers``,
  ``inc_change``; queries ``INC_JOIN``, ``INC_UNION``, ``INC_LEFT``, ``INC_AGG``; ``inc_join_view``;
- the soak's orders: ``soak_orders``, ``soak_change``; query ``SOAK_QUERY``.

``project_views`` writes the view ``proj`` (PROJECT) that the history tests refresh.
"""

from __future__ import annotations

import decimal
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import ViewDefinition
from tests.support.delta import BASE, delete_at, stamp, update_at, write_at
from tests.support.viewfiles import write_view

# --------------------------------------------------------------------------- orders (with prices), customers

JOIN_AGG = """
SELECT c.region, o.status, count(*) AS n, sum(o.qty) AS qty, max(o.price) AS max_price
FROM orders o LEFT JOIN customers c ON o.cust_id = c.id
GROUP BY c.region, o.status
""".strip()

PROJECT = """
SELECT o.cust_id, o.status, o.qty FROM orders o WHERE o.qty > 1 OR o.qty IS NULL
""".strip()

ORDERS = pa.schema(
    [
        ("id", pa.int64()),
        ("cust_id", pa.int32()),
        ("status", pa.string()),
        ("qty", pa.int32()),
        ("price", pa.decimal128(10, 2)),
    ]
)
CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string())])


def make_orders(rng: random.Random, start_id: int, n: int) -> pa.Table:
    """``n`` orders with ids from ``start_id``; NULLs in every column but the id."""
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": start_id + i,
                "cust_id": rng.choice([1, 2, 3, 4, 5, 9, None]),
                "status": rng.choice(["A", "B", "C", None]),
                "qty": rng.choice([0, 1, 2, 3, 3, None]),
                "price": rng.choice([decimal.Decimal("1.50"), decimal.Decimal("2.25"), None]),
            }
        )
    return pa.Table.from_pylist(rows, schema=ORDERS)


def make_customers(rng: random.Random) -> pa.Table:
    """Customers 1-5 (orders also name customer 9, which does not exist)."""
    return pa.Table.from_pylist(
        [{"id": i, "region": rng.choice(["eu", "us", None])} for i in range(1, 6)], schema=CUSTOMERS
    )


def random_change(rng: random.Random, orders: str, customers: str, next_id: list[int], ts: int) -> str:
    """One random change committed at ``ts``: insert, duplicates, delete, update, or new customers."""
    op = rng.choice(["insert", "insert", "delete", "update", "customers", "dupes"])
    if op == "insert":
        t = make_orders(rng, next_id[0], rng.randint(1, 6))
        next_id[0] += t.num_rows
        write_at(orders, t, ts)
    elif op == "dupes":  # exact copies of existing rows except the id: duplicates in the projection
        t = make_orders(random.Random(7), next_id[0], 4)
        next_id[0] += 4
        write_at(orders, t, ts)
    elif op == "delete":
        delete_at(orders, f"id % 5 = {rng.randint(0, 4)}", ts)
    elif op == "update":
        update_at(orders, {"status": "'B'", "qty": "qty + 1"}, f"id % 3 = {rng.randint(0, 2)}", ts)
    else:
        write_at(customers, make_customers(rng), ts, mode="overwrite")
    return op


# --------------------------------------------------------------------------- the incremental tests' data set

INC_ORDERS = pa.schema([("id", pa.int64()), ("cust", pa.int32()), ("status", pa.string()), ("qty", pa.int32())])
INC_CUSTOMERS = pa.schema([("id", pa.int32()), ("region", pa.string()), ("tier", pa.int32())])

INC_JOIN = (
    "SELECT o.id, o.status, o.qty, c.region FROM orders o JOIN customers c ON o.cust = c.id "
    "WHERE o.qty IS NULL OR o.qty > 0"
)
INC_UNION = "SELECT status, qty FROM orders UNION ALL SELECT region AS status, tier AS qty FROM customers"
INC_LEFT = "SELECT o.status, c.region FROM orders o LEFT JOIN customers c ON o.cust = c.id"
INC_AGG = "SELECT o.status, c.region, count(*) AS n FROM orders o JOIN customers c ON o.cust = c.id GROUP BY 1, 2"


def inc_orders(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "cust": rng.choice([1, 2, 3, None]),
                "status": rng.choice(["A", "B", None]),
                "qty": rng.choice([0, 1, 1, 2, None]),
            }
            for i in range(n)
        ],
        schema=INC_ORDERS,
    )


def inc_customers(rng: random.Random) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "region": rng.choice(["eu", "us", None]), "tier": rng.choice([1, 2])} for i in (1, 2, 3)],
        schema=INC_CUSTOMERS,
    )


def inc_change(rng: random.Random, orders: str, customers: str, next_id: list[int], ts: int) -> None:
    """One random change committed at ``ts``: insert, duplicates, delete, update, or a customer's region."""
    op = rng.choice(["insert", "insert", "delete", "update", "customers", "dupes"])
    if op == "insert":
        t = inc_orders(rng, next_id[0], rng.randint(1, 5))
        next_id[0] += t.num_rows
        write_at(orders, t, ts)
    elif op == "dupes":
        t = inc_orders(random.Random(3), next_id[0], 3)
        next_id[0] += 3
        write_at(orders, t, ts)
    elif op == "delete":
        delete_at(orders, f"id % 7 = {rng.randint(0, 6)}", ts)
    elif op == "update":
        update_at(orders, {"status": "'B'", "qty": "qty + 1"}, f"id % 4 = {rng.randint(0, 3)}", ts)
    else:
        update_at(customers, {"region": "'apac'"}, f"id = {rng.randint(1, 3)}", ts)


# --------------------------------------------------------------------------- the soak's orders

SOAK_QUERY = "SELECT o.cust_id, o.status, o.qty FROM orders o WHERE o.qty > 1 OR o.qty IS NULL"
SOAK_ORDERS = pa.schema([("id", pa.int64()), ("cust_id", pa.int32()), ("status", pa.string()), ("qty", pa.int32())])


def soak_orders(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "cust_id": rng.choice([1, 2, 3, None]),
                "status": rng.choice(["open", "shipped", "returned"]),
                "qty": rng.choice([0, 1, 2, 3, 5, None]),
            }
            for i in range(n)
        ],
        schema=SOAK_ORDERS,
    )


def soak_change(rng: random.Random, orders: str, next_id: list[int], when: int) -> str:
    """One random change committed at ``when`` (insert, delete, update, or none); what it did."""
    kind = rng.choice(["insert", "insert", "delete", "update", "none"])
    if kind == "insert":
        n = rng.randint(1, 8)
        write_at(orders, soak_orders(rng, next_id[0], n), when)
        next_id[0] += n
        return f"insert {n}"
    if kind == "delete":
        lo = rng.randrange(0, next_id[0])
        delete_at(orders, f"id >= {lo} AND id < {lo + 4}", when)
        return f"delete ids {lo}..{lo + 3}"
    if kind == "update":
        lo = rng.randrange(0, next_id[0])
        update_at(orders, {"qty": str(rng.choice([2, 7]))}, f"id >= {lo} AND id < {lo + 5}", when)
        return f"update ids {lo}..{lo + 4}"
    return "none"


# --------------------------------------------------------------------------- views over these data sets


def inc_join_view(
    env: tuple[Path, Path], rng: random.Random, n: int, **orders_kw: Any
) -> tuple[ViewDefinition, dict[str, str]]:
    """Sources orders (``n`` rows, written with ``orders_kw``) and customers, and the INC_JOIN view ``join``
    over them; (view, source paths)."""
    data, views = env
    orders, customers = str(data / "orders"), str(data / "customers")
    write_deltalake(orders, inc_orders(rng, 0, n), **orders_kw)
    stamp(orders, BASE)
    write_at(customers, inc_customers(rng), BASE + 1)
    write_view(
        views,
        "join",
        query=INC_JOIN,
        sources={"orders": "orders", "customers": "customers"},
        target="views/join",
        as_of=BASE,
    )
    return Catalog(views).get("join"), {"orders": orders, "customers": customers}


def project_views(root: Path, views: Path, **extra: Any) -> Catalog:
    """A view ``proj`` (PROJECT over ``root/orders``, target ``root/views/proj``, absolute paths) in ``views``."""
    views.mkdir(exist_ok=True)
    write_view(
        views,
        "proj",
        query=PROJECT,
        sources={"orders": str(root / "orders")},
        target=str(root / "views" / "proj"),
        as_of=BASE,
        **extra,
    )
    return Catalog(views)
