from __future__ import annotations

import random

import pytest

from tests.support.airflow import AirflowHome
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, write_at
from tests.support.viewfiles import write_view


@pytest.fixture(scope="module")
def af(tmp_path_factory):
    """A migrated throw-away installation (no servers) with the hourly view ``proj`` over an orders table."""
    root = tmp_path_factory.mktemp("af")
    data = root / "data"
    data.mkdir()
    home = AirflowHome(root, data)
    write_at(str(data / "orders"), make_orders(random.Random(5), 0, 30), BASE)
    write_view(
        home.views,
        "proj",
        query=PROJECT,
        sources={"orders": "orders"},
        target="views/proj",
        as_of=BASE,
        schedule="0 * * * *",
        description="Projection with duplicates.",
        tags=["test"],
    )
    home.migrate()
    return home
