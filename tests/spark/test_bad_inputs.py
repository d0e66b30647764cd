"""Acceptance 7: bad input fails with a message naming the view, the problem and the fix; no table changes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvsink import exceptions as errors
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.write.runners import refresh
from tests.support.data import PROJECT, make_orders
from tests.support.delta import BASE, HOUR, stamp, table_state, write_at
from tests.support.viewfiles import write_view

pytestmark = pytest.mark.spark


@pytest.fixture
def setup(spark, env):
    """orders (from BASE) and a view `proj` refreshed once at BASE+1h."""
    data, views = env
    orders = str(data / "orders")
    write_at(orders, make_orders(random.Random(5), 0, 20), BASE)
    write_view(views, "proj", query=PROJECT, sources={"orders": "orders"}, target="views/proj", as_of=BASE)
    catalog = Catalog(views)
    refresh(catalog.get("proj"), BASE + HOUR, catalog=catalog, runner="inprocess", spark=spark)
    return data, views


def _tables(data: Path) -> dict[str, object]:
    return {str(p): table_state(p) for p in sorted(data.rglob("_delta_log"))}


def _expect(setup, spark, name, fields, exc, *needles, at=BASE + 2 * HOUR):
    """Write view `name`, refresh it, expect `exc` whose message holds every needle; tables unchanged."""
    data, views = setup
    if fields is not None:
        write_view(views, name, **fields)
    before = _tables(data)
    with pytest.raises(exc) as info:
        catalog = Catalog(views)
        refresh(catalog.get(name), at, catalog=catalog, runner="inprocess", spark=spark)
    msg = str(info.value)
    for needle in (name, "Fix:", *needles):
        assert needle in msg, f"{needle!r} not in: {msg}"
    assert _tables(data) == before
    assert not (data / "views" / name).exists() or name == "proj"
    return msg


def _view(query: str, **kw):
    return {
        "query": query,
        "sources": kw.pop("sources", {"orders": "orders"}),
        "target": kw.pop("target", "views/bad"),
        "as_of": kw.pop("as_of", BASE),
        **kw,
    }


def test_bad_yaml(setup, spark):
    data, views = setup
    (views / "bad.yaml").write_text("name: bad\nquery: [unclosed\n")
    msg = _expect(setup, spark, "bad", None, errors.ViewDefinitionError, "not valid YAML", "line")
    assert "bad.yaml" in msg
    assert Catalog(views).get("proj").name == "proj"  # the broken file fails alone


def test_unknown_source_view(setup, spark):
    _expect(
        setup,
        spark,
        "bad",
        _view("SELECT * FROM up", sources={"up": {"view": "nope"}}),
        errors.ViewDefinitionError,
        "'nope'",
        "not defined",
    )


def test_missing_source_table(setup, spark):
    _expect(
        setup,
        spark,
        "bad",
        _view("SELECT * FROM orders", sources={"orders": "no_such_table"}),
        errors.SourceError,
        "no Delta table",
        "no_such_table",
    )


def test_sql_error(setup, spark):
    _expect(setup, spark, "bad", _view("SELECT nope FROM orders"), errors.QueryError, "does not analyse", "nope")


def test_reserved_column(setup, spark):
    _expect(setup, spark, "bad", _view("SELECT qty AS _mv_qty FROM orders"), errors.QueryError, "reserved", "_mv_qty")


def test_map_column(setup, spark):
    _expect(setup, spark, "bad", _view("SELECT map(status, qty) AS m FROM orders"), errors.QueryError, "MAP", "'m'")


def test_unaliased_expression(setup, spark):
    _expect(setup, spark, "bad", _view("SELECT count(*) FROM orders"), errors.QueryError, "alias")


def test_non_deterministic_function(setup, spark):
    _expect(
        setup,
        spark,
        "bad",
        _view("SELECT qty, rand() AS r FROM orders"),
        errors.ViewDefinitionError,
        "non-deterministic",
        "rand",
    )


def test_source_missing_at_refresh_time(setup, spark):
    _expect(
        setup,
        spark,
        "bad",
        _view("SELECT qty FROM orders", as_of=BASE - 5 * HOUR),
        errors.SourceError,
        "no version at or before",
        at=BASE - HOUR,
    )


@pytest.mark.parametrize(
    "protocol",
    [
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors"],
        },
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors", "timestampNtz"],
            "writerFeatures": ["deletionVectors", "timestampNtz"],
        },
    ],
)
def test_reader_features_are_read_not_refused(setup, spark, protocol):
    """A source whose protocol turns deletion vectors on (as Databricks does by default) was refused while
    sources were read as Parquet file lists; Delta's reader reads it: the view holds every row."""
    import os

    data, views = setup
    dv = str(data / "dv")
    rows = make_orders(random.Random(2), 0, 5)
    write_at(dv, rows, BASE)
    log = Path(dv) / "_delta_log" / "00000000000000000001.json"
    log.write_text(json.dumps({"protocol": protocol}) + "\n")
    os.utime(log, ns=((BASE + 10) * 1_000_000,) * 2)
    write_view(views, "feat", query="SELECT qty FROM dv", sources={"dv": "dv"}, target="views/feat", as_of=BASE)
    catalog = Catalog(views)
    refresh(catalog.get("feat"), BASE + 2 * HOUR, catalog=catalog, runner="inprocess", spark=spark)

    def key(q: int | None) -> tuple[bool, int]:
        return (q is None, q or 0)

    got = sorted((r["qty"] for r in read_view(catalog.get("feat")).to_pylist()), key=key)
    assert got == sorted(rows.column("qty").to_pylist(), key=key)


def test_query_schema_change_for_existing_table(setup, spark):
    data, views = setup
    write_view(
        views,
        "proj",
        query="SELECT o.cust_id, o.status FROM orders o",
        sources={"orders": "orders"},
        target="views/proj",
        as_of=BASE,
    )
    _expect(setup, spark, "proj", None, errors.SchemaChangedError, "now returns columns", "new table path")


def test_source_schema_change_breaks_query(setup, spark):
    data, views = setup
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        str(data / "orders"), pa.table({"id": [1], "note": ["x"]}), mode="overwrite", schema_mode="overwrite"
    )
    stamp(data / "orders", BASE + HOUR + 5)
    _expect(setup, spark, "proj", None, errors.QueryError, "does not analyse", "qty")


def test_read_before_as_of_and_past_upper(setup):
    data, views = setup
    view = Catalog(views).get("proj")
    before = _tables(data)
    with pytest.raises(errors.ReadTimeError, match="before the view's as_of.*Fix:"):
        read_view(view, as_of=BASE - 1)
    with pytest.raises(errors.ReadTimeError, match="at or past the upper.*Fix:"):
        read_view(view, as_of=BASE + HOUR + 1)
    assert read_view(view, as_of=BASE + HOUR).num_rows > 0
    assert _tables(data) == before


def test_cli_rejects_bad_time_and_unknown_view(setup):
    data, views = setup
    run = [sys.executable, "-m", "mvsink"]
    bad_time = subprocess.run(
        [*run, "refresh", "proj", "--at", "yesterday", "--views-dir", str(views)], capture_output=True, text=True
    )
    assert bad_time.returncode == 2 and "ISO-8601" in bad_time.stderr
    unknown = subprocess.run([*run, "read", "nope", "--views-dir", str(views)], capture_output=True, text=True)
    assert unknown.returncode == 2 and "'nope' is not defined" in unknown.stderr and "proj" in unknown.stderr
    before_as_of = subprocess.run(
        [*run, "read", "proj", "--as-of", "2025-01-01", "--views-dir", str(views)], capture_output=True, text=True
    )
    assert before_as_of.returncode == 2 and "before the view's as_of" in before_as_of.stderr
    assert DeltaTable(str(data / "views" / "proj")).version() == 2  # create, bump, append: untouched since
