"""The size guard's reason advises enabling the change data feed only on a source that does not have it."""

from __future__ import annotations

import random

import pytest
from deltalake import write_deltalake

from mvsink.definitions.catalog import Catalog
from mvsink.write.runners import refresh
from tests.support.aggdata import CDF, agg_orders, appends
from tests.support.delta import BASE, HOUR, stamp, update_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

ADVICE = "enable delta.enableChangeDataFeed"


def test_the_change_data_feed_is_advised_only_where_it_is_off(spark, env, monkeypatch):
    data, views = env
    rng = random.Random(4)
    for name, cdf in (("with_cdf", True), ("without_cdf", False)):
        write_deltalake(str(data / name), agg_orders(rng, 0, 30), configuration=CDF if cdf else None)
        stamp(data / name, BASE)
        write_view(
            views,
            name,
            query="SELECT id, status, qty FROM orders WHERE qty > 0",
            sources={"orders": name},
            target=f"views/{name}",
            as_of=BASE,
        )
    catalog = Catalog(views)
    for name in ("with_cdf", "without_cdf"):
        assert refresh(catalog.get(name), BASE + HOUR, runner="inprocess", spark=spark).mode == "full"
        update_at(data / name, {"qty": "qty + 1"}, "id = 3", BASE + HOUR + 10)
    monkeypatch.setenv("MVSINK_INCREMENTAL_MAX_FRACTION", "0.001")  # any change is over the guard
    reasons = {}
    for name in ("with_cdf", "without_cdf"):
        res = refresh(catalog.get(name), BASE + 2 * HOUR, runner="inprocess", spark=spark)
        reasons[name] = str(appends(str(data / "views" / name))[-1]["mode_reason"])
        assert res.mode == "full" and "over 0%" in reasons[name], reasons[name]
    assert ADVICE not in reasons["with_cdf"], reasons["with_cdf"]
    assert "its change data feed is already on: 1 change data file(s)" in reasons["with_cdf"], reasons["with_cdf"]
    assert ADVICE in reasons["without_cdf"], reasons["without_cdf"]
