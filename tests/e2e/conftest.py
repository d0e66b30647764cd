from __future__ import annotations

import random

import pytest

from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, write_at
from tests.support.viewfiles import write_view


@pytest.fixture
def proj(env):
    """A projection view over an orders table with history from BASE: (data folder, views folder, orders)."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(5), 0, 40), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    return data, views, orders
