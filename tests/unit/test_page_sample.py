"""Issue 39, the view's data on its tab: the schema (hidden ``_mv_`` columns left out) and its first rows as of the
upper - 1, read as ``mvsink read`` reads them, size-bounded; rendered on the view's tab. A real refresh through
the Spark-free write step (DuckDB), real Delta tables."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvsink.airflow.plugin import render
from mvsink.core.deltalog import set_commit_time
from mvsink.core.refresh import run_refresh
from mvsink.definitions.catalog import Catalog
from mvsink.readers.arrow import read_view
from mvsink.readers.overview import view_detail
from mvsink.readers.sample import bounded_rows, in_order, view_sample
from tests.support.refreshlog import BASE, HOUR
from tests.support.sparkfree import sparkfree_write

pytestmark = pytest.mark.unit


@pytest.fixture
def view(env):
    data, views = env
    rows = pa.table({"id": list(range(30)), "note": ["x" * 500 if i == 3 else f"n{i}" for i in range(30)]})
    write_deltalake(str(data / "notes"), rows, mode="append")
    set_commit_time(str(data / "notes"), BASE - HOUR)
    (views / "notes.yaml").write_text(
        "name: notes\nquery: SELECT id, note FROM n WHERE id < 25\nsources: {n: notes}\n"
        f"target: views/notes\nas_of: {BASE}\n"
    )
    cat = Catalog(views)
    return cat, cat.get("notes")


def test_the_sample_is_what_mvsink_read_reads_bounded(view):
    cat, v = view
    assert view_sample(v) == {"as_of": None, "columns": [], "rows": [], "total_rows": 0, "cut_cells": 0}
    run_refresh(v, BASE, write=sparkfree_write, catalog=cat, run_id="t1")
    s = view_sample(v)
    assert s["as_of"] == BASE and s["total_rows"] == 25
    assert s["columns"] == [{"name": "id", "type": "int64"}, {"name": "note", "type": "string"}]
    assert len(s["rows"]) == 20
    full = in_order(read_view(v, as_of=BASE)).slice(0, 20).to_pylist()  # mvsink read's rows, in the columns' order
    assert [r[0] for r in s["rows"]] == [str(r["id"]) for r in full]
    long = next(r for r in s["rows"] if r[0] == "3")
    assert len(long[1]) == 120 and long[1].endswith("…") and s["cut_cells"] == 1
    page = render.view_page(view_detail(v, cat.views), links=render.Links(), nonce="n", sample=s)
    assert '<table id="sample">' in page and page.count('<tr data-sample-row="') == 20
    assert (
        '<th data-column="note" data-type="string">note' in page and "_mv_" not in page.split('id="sample"')[1][:3000]
    )
    assert "first 20 of 25 rows" in page


def test_bounded_rows_caps_each_cell_and_each_row():
    shown, cuts = bounded_rows([["a" * 10, None, b"\x01\x02", "b" * 10]], cell_chars=6, row_chars=14)
    assert shown == [["aaaaa…", "NULL", "0x0…", "…"]] and cuts == 3
