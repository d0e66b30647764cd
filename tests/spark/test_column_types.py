"""Column types round-trip through Spark, staged Parquet, the Delta log and the readers."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.delta import BASE, HOUR, write_at
from tests.support.oracle import multiset, oracle
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark

QUERY = """
SELECT id % 3 AS k, ts, d, amount, flag, payload, tags, named_struct('a', id, 'b', label) AS s, label
FROM events WHERE flag OR flag IS NULL
""".strip()


def _events(ids: range, shift: int = 0) -> pa.Table:
    utc = dt.UTC
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "ts": pa.array(
                [dt.datetime(2026, 1, 1, 12, 0, i % 60, tzinfo=utc) if i % 4 else None for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "d": pa.array([dt.date(2026, 1, 1 + (i + shift) % 28) for i in ids], pa.date32()),
            "amount": pa.array([decimal.Decimal(f"{i}.25") for i in ids], pa.decimal128(18, 2)),
            "flag": pa.array([None if i % 5 == 0 else bool(i % 2) for i in ids], pa.bool_()),
            "payload": pa.array([bytes([i % 7]) * 3 for i in ids], pa.binary()),
            "tags": pa.array([[i % 2, None] if i % 3 else None for i in ids], pa.list_(pa.int32())),
            "label": pa.array([f"é-{i % 4}" for i in ids], pa.string()),
        }
    )


def test_types_round_trip_against_oracle(spark, env):
    data, views = env
    events = str(data / "events")
    write_at(events, _events(range(30)), BASE)
    write_view(views, "typed", query=QUERY, sources={"events": "events"}, target="views/typed", as_of=BASE)
    catalog = Catalog(views)
    view = catalog.get("typed")
    assert refresh(view, BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    write_at(events, _events(range(20, 40), shift=3), BASE + HOUR + 10, mode="overwrite")
    assert refresh(view, BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark).status == "appended"
    duck = QUERY.replace("id % 3", "CAST(id % 3 AS BIGINT)").replace(
        "named_struct('a', id, 'b', label)", "{'a': id, 'b': label}"
    )
    for t in (BASE + HOUR, BASE + 2 * HOUR):
        got = read_view(view, as_of=t)
        assert multiset(got) == oracle(duck, {"events": events}, t)
    schema = got.schema
    ts_type = schema.field("ts").type
    assert pa.types.is_timestamp(ts_type) and ts_type.unit == "us" and ts_type.tz in ("UTC", "Etc/UTC")
    assert schema.field("amount").type == pa.decimal128(18, 2)
    assert pa.types.is_list(schema.field("tags").type) and pa.types.is_struct(schema.field("s").type)
