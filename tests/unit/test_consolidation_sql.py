"""readers/sql: identifier quoting and the consolidation SELECT, run in DuckDB over odd column names."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from mvsink.columns import DIFF, ERROR, TIME
from mvsink.readers.sql import consolidation_sql, quote_ident

pytestmark = pytest.mark.unit

ODD = 'we"ird'


@pytest.mark.parametrize(
    "name, quoted",
    [
        ("a", '"a"'),
        ('a"b', '"a""b"'),
        ('""', '""""""'),
        ("a b", '"a b"'),
        ("it's", '"it\'s"'),
        ("select", '"select"'),
        ("ü", '"ü"'),
    ],
)
def test_quote_ident(name, quoted):
    assert quote_ident(name) == quoted
    assert duckdb.sql(f"SELECT 1 AS {quoted}").columns == [name]  # DuckDB reads it back as the same name


def test_the_three_forms():
    cols = ["id", ODD, TIME, DIFF, ERROR]
    assert consolidation_sql(cols, through=5) == (
        'SELECT "id", "we""ird", CAST(sum("_mv_diff") AS BIGINT) AS "_mv_diff", "_mv_error" FROM "updates" '
        'WHERE "_mv_time" <= 5 GROUP BY "id", "we""ird", "_mv_error" HAVING sum("_mv_diff") <> 0'
    )
    assert consolidation_sql(cols, from_time=2, to_time=7, per_time=True) == (
        'SELECT "id", "we""ird", "_mv_time", CAST(sum("_mv_diff") AS BIGINT) AS "_mv_diff", "_mv_error" '
        'FROM "updates" WHERE "_mv_time" >= 2 AND "_mv_time" < 7 GROUP BY "id", "we""ird", "_mv_error", "_mv_time" '
        'HAVING sum("_mv_diff") <> 0 ORDER BY "_mv_time", "id", "we""ird", "_mv_error"'
    )
    assert consolidation_sql(cols, through=4, at=4, table="u") == (
        'SELECT "id", "we""ird", CAST(4 AS BIGINT) AS "_mv_time", CAST(sum("_mv_diff") AS BIGINT) AS "_mv_diff", '
        '"_mv_error" FROM "u" WHERE "_mv_time" <= 4 GROUP BY "id", "we""ird", "_mv_error" HAVING sum("_mv_diff") <> 0'
    )
    assert consolidation_sql(["a"]) == (
        'SELECT "a", CAST(sum("_mv_diff") AS BIGINT) AS "_mv_diff" FROM "updates" '
        'GROUP BY "a" HAVING sum("_mv_diff") <> 0'
    )
    with pytest.raises(ValueError):
        consolidation_sql(cols, per_time=True, at=3)


UPDATES = pa.table(
    {
        "id": pa.array([1, 1, 2, 2, 3, 3, 4], pa.int64()),
        ODD: ['x"y', 'x"y', "b", "b", None, None, "d"],
        TIME: pa.array([1, 2, 1, 3, 2, 2, 4], pa.int64()),
        DIFF: pa.array([1, 1, 1, -1, 2, -2, 1], pa.int64()),
        ERROR: [None, None, None, None, None, None, "bad"],
    }
)


def _run(sql: str) -> pa.Table:
    con = duckdb.connect()
    con.register("updates", UPDATES)
    return con.sql(sql).to_arrow_table()


def test_contents_as_of_a_time():
    out = _run(consolidation_sql(UPDATES.column_names, through=3))
    assert out.column_names == ["id", ODD, DIFF, ERROR]  # the table's order, _mv_time dropped
    assert sorted(out.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, ODD: 'x"y', DIFF: 2, ERROR: None}
    ]  # id 2 cancels out at 3, id 3 within one time
    assert _run(consolidation_sql(UPDATES.column_names, through=1)).num_rows == 2


def test_changes_per_time_cast_back_to_the_table_schema():
    out = _run(consolidation_sql(UPDATES.column_names, from_time=2, to_time=5, per_time=True))
    assert out.cast(UPDATES.schema).to_pylist() == [
        {"id": 1, ODD: 'x"y', TIME: 2, DIFF: 1, ERROR: None},
        {"id": 2, ODD: "b", TIME: 3, DIFF: -1, ERROR: None},
        {"id": 4, ODD: "d", TIME: 4, DIFF: 1, ERROR: "bad"},
    ]


def test_compaction_stamps_the_since():
    out = _run(consolidation_sql(UPDATES.column_names, through=2, at=2)).cast(UPDATES.schema)
    assert sorted(out.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, ODD: 'x"y', TIME: 2, DIFF: 2, ERROR: None},
        {"id": 2, ODD: "b", TIME: 2, DIFF: 1, ERROR: None},
    ]
